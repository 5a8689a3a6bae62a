// `keep_alive` as Ollama takes it: a number of seconds, or a Go duration string ("300ms", "1.5h",
// "2h45m", "0"); any negative value keeps the model loaded for good, 0 unloads it once the request
// ends. Parsed and checked here (a malformed one is a 400); with one model per process Sluice
// never unloads it, so the routes only validate it for now.

import { z } from "zod";

/** How long to keep the model loaded after a request: ms, or null for ever. */
export type KeepAlive = { ms: number | null };

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Milliseconds of a Go duration string, or null if it is not one. */
export function goDurationMs(text: string): number | null {
  const sign = text.startsWith("-") ? -1 : 1;
  const body = text.replace(/^[-+]/, "");
  if (body === "0") return 0;
  if (body === "") return null;
  let ms = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < body.length) {
    const at = PART.lastIndex;
    const m = PART.exec(body);
    if (!m || m.index !== at) return null;
    ms += Number(m[1]) * UNIT_MS[m[2]];
  }
  return sign * ms;
}

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
