// A chat turn's choices answered as Server-Sent Events or as one JSON response. A stream opens
// each choice with its role, sends each step of events as chunks (choices interleaved as their
// tokens come, each chunk naming its choice's index), then each choice's finish chunk, the usage
// chunk when asked, and [DONE]; a choice that fails ends the stream with one error event, as
// completions/respond_sse.ts does. Usage counts the prompt once and every choice's tokens.

import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { TokenEvent } from "../../runtime/service.ts";
import type { ChoiceRun, ChoicesRun, TurnEnd } from "./chat_run.ts";
import type { RequestObserver } from "../metrics/server_metrics.ts";
import { ApiError } from "../openai/errors.ts";
import { chatLogprobs, type TokenNames } from "../openai/logprobs.ts";
import { envelope, type ResponseMeta, usage } from "../openai/responses.ts";
import { keepAlive } from "../sse/keep_alive.ts";
import { chatDeltas, ChatMessageBuilder } from "./chat_wire.ts";
import { sluiceTiming } from "../completions/writer.ts";

export interface ChatAnswer {
  run: ChoicesRun;
  model: string;
  /** Names tokens in logprob entries; null when the request asked for none. */
  names: TokenNames | null;
  includeUsage: boolean;
  includeTiming: boolean;
  observer: RequestObserver;
  /** Aborted when the client goes away, and when a choice fails (the others stop). */
  abort: AbortController;
}

export function respondChatSse(c: Context, a: ChatAnswer, keepAliveMs?: number) {
  const { run, observer, abort } = a;
  const meta: ResponseMeta = { id: run.id, created: run.created, model: a.model };
  const chunk = (choice: object, extra: Record<string, unknown> = {}) =>
    envelope(meta, "chat.completion.chunk", [choice], extra);
  observer.keepOpen(); // this stream, not the counting middleware, reports the final status
  return streamSSE(c, async (sse) => {
    let clientGone = false;
    sse.onAbort(() => {
      clientGone = true;
      abort.abort();
    });
    const out = keepAlive(sse, keepAliveMs);
    let ended = false; // after an error event nothing more goes out (other choices may be mid-step)
    const send = async (obj: object) => {
      if (!ended) await out.write({ data: JSON.stringify(obj) });
    };
    let status = 200;
    try {
      for (const { index } of run.choices) {
        await send(chunk({
          index,
          delta: { role: "assistant", content: "" },
          logprobs: null,
          finish_reason: null,
        }));
      }
      const streamChoice = async (choice: ChoiceRun) => {
        let carried: TokenEvent[] = [];
        for await (const step of choice.steps) {
          carried.push(...step.tokens);
          const deltas = chatDeltas(step.events);
          for (const [i, delta] of deltas.entries()) {
            const tokens = i === 0 ? carried : [];
            const extra = a.includeTiming && tokens.length
              ? { sluice_timing: sluiceTiming(tokens, observer.arrivedMs) }
              : {};
            const logprobs = a.names && { content: chatLogprobs(a.names, tokens) };
            await send(chunk({ index: choice.index, delta, logprobs, finish_reason: null }, extra));
          }
          if (deltas.length) carried = [];
        }
        const end = await failFast(choice.done, abort);
        const logprobs = a.names && carried.length
          ? { content: chatLogprobs(a.names, carried) }
          : null;
        await send(chunk({ index: choice.index, delta: {}, logprobs, finish_reason: end.finish }));
        return end;
      };
      const ends = await Promise.all(run.choices.map(streamChoice));
      if (a.includeUsage) {
        await send(envelope(meta, "chat.completion.chunk", [], { usage: turnUsage(run, ends) }));
      }
      await sse.writeSSE({ data: "[DONE]" });
    } catch (err) {
      const apiErr = ApiError.from(err);
      status = apiErr.status;
      if (!clientGone) await send(apiErr.toJSON());
      ended = true;
    } finally {
      out.stop();
      observer.finish(clientGone ? 499 : status);
    }
  });
}

export async function respondChatJson(c: Context, a: ChatAnswer) {
  const { run } = a;
  const wholeChoice = async (choice: ChoiceRun) => {
    const message = new ChatMessageBuilder();
    const tokens: TokenEvent[] = [];
    for await (const step of choice.steps) {
      message.add(step.events);
      tokens.push(...step.tokens);
    }
    const end = await failFast(choice.done, a.abort);
    return {
      end,
      choice: {
        index: choice.index,
        message: message.message(),
        logprobs: a.names && { content: chatLogprobs(a.names, tokens) },
        finish_reason: end.finish,
      },
    };
  };
  const answers = await Promise.all(run.choices.map(wholeChoice));
  const meta: ResponseMeta = { id: run.id, created: run.created, model: a.model };
  const ends = answers.map((x) => x.end);
  return c.json(
    envelope(meta, "chat.completion", answers.map((x) => x.choice), {
      usage: turnUsage(run, ends),
    }),
  );
}

/** A choice's end; one that failed stops the others and throws its error. */
async function failFast(done: Promise<TurnEnd>, abort: AbortController): Promise<TurnEnd> {
  const end = await done;
  if (!end.error) return end;
  abort.abort();
  throw end.error;
}

function turnUsage(run: ChoicesRun, ends: TurnEnd[]) {
  return usage(run.promptTokens, ends.reduce((n, e) => n + e.completionTokens, 0));
}
