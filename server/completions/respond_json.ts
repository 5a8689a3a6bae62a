// A running request answered as one JSON response, once its playback is complete. A failed or cut
// playback throws its ApiError, which app.ts turns into the error envelope (503, 500; 499 when the
// client is gone, which only the metrics see).

import type { Context } from "hono";
import type { TokenEvent } from "../../runtime/service.ts";
import type { BuiltRequest } from "./build.ts";
import { play, type Playback } from "./playback.ts";

export async function respondJson(c: Context, req: BuiltRequest, run: Playback) {
  let text = "";
  const tokens: TokenEvent[] = [];
  const finish = await play(run, (piece) => {
    text += piece.text;
    tokens.push(...piece.tokens);
  });
  return c.json(req.writer.whole({ text, tokens }, finish, run.observer.tokens));
}
