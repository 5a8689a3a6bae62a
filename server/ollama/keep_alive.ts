// `keep_alive` as Ollama takes it (runtime/models/keep_alive.ts parses it): a number of seconds or a
// Go duration string; negative keeps the model loaded for good, 0 unloads it once the request ends.
// A malformed one is a 400. The router (runtime/model_router.ts) acts on it.

import { z } from "zod";
import { goDurationMs } from "../../runtime/model_router.ts";

export { goDurationMs };

/** How long to keep the model loaded after a request: ms, or null for ever. */
export type KeepAlive = { ms: number | null };

function keepAliveOf(ms: number): KeepAlive {
  return { ms: ms < 0 ? null : ms };
}

/** The request field: parses to a KeepAlive, or fails naming what it takes. */
export const keepAliveField = z.union([
  z.number().transform((s) => keepAliveOf(s * 1000)),
  z.string().transform((text, ctx) => {
    const ms = goDurationMs(text.trim());
    if (ms === null) {
      ctx.addIssue({
        code: "custom",
        message: 'a duration such as "5m", "1h30m" or "300ms", or a number of seconds',
      });
      return z.NEVER;
    }
    return keepAliveOf(ms);
  }),
]);
