// Ollama's answer objects. A streamed answer is one object per piece ({model, created_at, message}
// for chat, {model, created_at, response} for generate, done: false), then a last one with
// done: true, done_reason and the counts and durations (nanoseconds); an answer sent whole is that
// last object with everything in it. Thinking goes in `thinking`, tool calls in message.tool_calls
// with their arguments as objects.

import type { Delta, OllamaToolCall, ReplyEnd } from "./reply.ts";

/** The counts and times of the last object. */
export interface Stats {
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
}

/** Writes one endpoint's objects. */
export interface OllamaWire {
  piece(delta: Delta): object;
  /** The last object of a stream. */
  last(end: ReplyEnd, stats: Stats): object;
  /** The whole answer: the last object with every piece in it. */
  whole(deltas: Delta[], end: ReplyEnd, stats: Stats): object;
}

const head = (model: string) => ({ model, created_at: new Date().toISOString() });

function message(d: Delta): Record<string, unknown> {
  const m: Record<string, unknown> = { role: "assistant", content: d.content ?? "" };
  if (d.thinking) m.thinking = d.thinking;
  if (d.toolCalls?.length) m.tool_calls = d.toolCalls;
  return m;
}

/** Every delta in one: content and thinking joined, tool calls in order. */
function joined(deltas: Delta[]): Delta {
  const toolCalls: OllamaToolCall[] = deltas.flatMap((d) => d.toolCalls ?? []);
  return {
    content: deltas.map((d) => d.content ?? "").join(""),
    thinking: deltas.map((d) => d.thinking ?? "").join(""),
    toolCalls,
  };
}

const ending = (end: ReplyEnd, stats: Stats) => ({
  done: true,
  done_reason: end.doneReason,
  ...stats,
});

export function chatWire(model: string): OllamaWire {
  return {
    piece: (d) => ({ ...head(model), message: message(d), done: false }),
    last: (end, stats) => ({ ...head(model), message: message({}), ...ending(end, stats) }),
    whole: (deltas, end, stats) => ({
      ...head(model),
      message: message(joined(deltas)),
      ...ending(end, stats),
    }),
  };
}

export function generateWire(model: string): OllamaWire {
  const response = (d: Delta) => ({
    response: d.content ?? "",
    ...(d.thinking ? { thinking: d.thinking } : {}),
  });
  return {
    piece: (d) => ({ ...head(model), ...response(d), done: false }),
    last: (end, stats) => ({
      ...head(model),
      response: "",
      ...ending(end, stats),
      context: end.context ?? [],
    }),
    whole: (deltas, end, stats) => ({
      ...head(model),
      ...response(joined(deltas)),
      ...ending(end, stats),
      context: end.context ?? [],
    }),
  };
}

/** What a request that asks for nothing (no messages, an empty prompt) answers: the model is loaded. */
export function loadedAnswer(
  model: string,
  kind: "chat" | "generate",
  reason: "load" | "unload" = "load",
): object {
  const body = kind === "chat" ? { message: message({}) } : { response: "" };
  return { ...head(model), ...body, done: true, done_reason: reason };
}
