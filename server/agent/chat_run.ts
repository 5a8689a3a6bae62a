// One chat turn run on the model: the one path from a parsed chat body to the assistant's events,
// for chat completions and for the agent APIs built over it (Responses, Messages), so a turn is
// rendered, constrained and parsed the same way everywhere. It renders the prompt, submits one
// runtime request per choice, plays each out at its reader's pace (stop strings cut), and reads
// its text into events: text, reasoning, and tool calls.
//
// A choice's events come in steps, each with the tokens whose text it carries (their logprobs and
// times, for chat completions' chunks). With n > 1, choices 2..n are the same prompt with seeds
// seed+1, …: they are submitted once choice 1 has its first token, so its prompt is prefilled and,
// with --prefix-cache, its full blocks are cached for them to share.

import type { PromptEncoder, Runtime, TokenEvent, Tokenizer } from "../../runtime/service.ts";
import type { RequestHandle, SubmitParams } from "../../runtime/service.ts";
import { stopStrings, submitParams } from "../completions/build.ts";
import { chat, promptIds } from "../completions/kinds.ts";
import type { LiveRequests } from "../completions/live_requests.ts";
import { play } from "../completions/playback.ts";
import { checkPromptLength, submit } from "../completions/submit.ts";
import { TextStream } from "../completions/text_stream.ts";
import type { RequestObserver } from "../metrics/server_metrics.ts";
import { ApiError } from "../openai/errors.ts";
import type { ChatRequest } from "../openai/schemas.ts";
import type { AssistantEvent, TurnFinish } from "./assistant_events.ts";
import { turnPrompt } from "./chat_prompt.ts";
import { AssistantParser, type AssistantParserOptions } from "./assistant_parser.ts";
import { Handoff } from "./handoff.ts";
import { modelToolFormat } from "./tool_format.ts";
import { turnGrammar } from "./turn_grammar.ts";

/** What a chat turn needs from the route that runs it. */
export interface ChatContext {
  runtime: Runtime;
  tokenizer: Tokenizer;
  prompts: PromptEncoder;
  /** The served model's id. */
  modelId: string;
  /** The HTTP request's metrics: tokens released, stalls; the route still finishes it. */
  observer: RequestObserver;
  /** Where running requests are kept by response id (POST /v1/requests/{id}/priority). */
  live: LiveRequests;
  /** The server's default (--reasoning-format none): reasoning stays in the text. */
  reasoningInline?: boolean;
}

/** How a turn (or one choice of it) ended; `error` unless it completed ("stop", "length", "tool_calls"). */
export interface TurnEnd {
  finish: TurnFinish;
  completionTokens: number;
  error?: ApiError;
  /** The stop string that ended it, when one did (Anthropic's stop_sequence). */
  stopSequence?: string;
}

export interface ChatRun {
  /** "chatcmpl-…": the response's id, also the running request's (sluice-request-id). */
  id: string;
  /** Unix seconds. */
  created: number;
  promptTokens: number;
  /** The turn's events in order. Read them to the end: the playback waits on its reader. */
  events: AsyncIterable<AssistantEvent>;
  /** Settles (never rejects) once the events have ended. */
  done: Promise<TurnEnd>;
}

/** Runs one already-parsed chat body (n must be 1; `stream` ignored); throws ApiError on refusal. */
export async function startChat(
  ctx: ChatContext,
  body: ChatRequest,
  signal: AbortSignal,
): Promise<ChatRun> {
  if ((body.n ?? 1) !== 1) throw new ApiError(400, "only n = 1 is supported here", "n");
  const run = await startChoices(ctx, body, signal);
  const [choice] = run.choices;
  return { ...run, events: flatten(choice.steps), done: choice.done };
}

/** What a choice's text became since the last step, with the tokens that text completes. */
export interface ChoiceStep {
  events: AssistantEvent[];
  tokens: TokenEvent[];
}

export interface ChoiceRun {
  index: number;
  steps: AsyncIterable<ChoiceStep>;
  done: Promise<TurnEnd>;
}

export interface ChoicesRun {
  id: string;
  created: number;
  promptTokens: number;
  choices: ChoiceRun[];
}

/** Runs every choice `body.n` asks for; throws ApiError if the first cannot be submitted. */
export async function startChoices(
  ctx: ChatContext,
  body: ChatRequest,
  signal: AbortSignal,
): Promise<ChoicesRun> {
  const { runtime } = ctx;
  const checkLength = (atLeast: number) => checkPromptLength(runtime, atLeast, "messages");
  const format = modelToolFormat(ctx.tokenizer);
  const prompt = turnPrompt(ctx.tokenizer, body);
  const ids = await promptIds(ctx.prompts, prompt, checkLength);
  const parsing: AssistantParserOptions = {
    format,
    reasoning: (body.reasoning_format ?? (ctx.reasoningInline ? "none" : "auto")) === "none"
      ? "inline"
      : "split",
    startsInReasoning: endsInThinking(ctx.tokenizer, ids),
    toolsEnabled: (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none",
  };
  const grammar = await turnGrammar(runtime, body, format, parsing.startsInReasoning ?? false);
  const params = { ...submitParams(chat, body, ids), grammar, signal };
  const id = chat.idPrefix + crypto.randomUUID().replaceAll("-", "");
  const first = submit(runtime, params, "messages");
  ctx.live.add(id, first);
  ctx.observer.generating();

  const n = body.n ?? 1;
  let prefilled = () => {};
  const firstToken = new Promise<void>((resolve) => prefilled = resolve);
  first.done.then(prefilled, prefilled);
  const choice = (i: number, handle: Promise<RequestHandle>, onFirstToken?: () => void) =>
    runChoice(ctx, body, parsing, i, handle, signal, onFirstToken);
  const choices = [choice(0, Promise.resolve(first), prefilled)];
  for (let i = 1; i < n; i++) {
    // The same prompt with the next seed, once choice 1's prompt blocks are there to share.
    const handle = firstToken.then(() => submit(runtime, withSeed(params, i), "messages"));
    choices.push(choice(i, handle));
  }
  return { id, created: Math.floor(Date.now() / 1000), promptTokens: ids.length, choices };
}

function withSeed(params: SubmitParams, offset: number): SubmitParams {
  const seed = (params.sampling.seed + offset) >>> 0;
  return { ...params, sampling: { ...params.sampling, seed } };
}

/** Whether the prompt ends inside `<think>` (the template opened it for the model). */
function endsInThinking(tokenizer: Tokenizer, ids: number[]): boolean {
  return tokenizer.decode(ids.slice(-8)).trimEnd().endsWith("<think>");
}

function runChoice(
  ctx: ChatContext,
  body: ChatRequest,
  parsing: AssistantParserOptions,
  index: number,
  submitted: Promise<RequestHandle>,
  signal: AbortSignal,
  onFirstToken?: () => void,
): ChoiceRun {
  const steps = new Handoff<ChoiceStep>();
  const parser = new AssistantParser(parsing);
  let completionTokens = 0;
  const put = (events: AssistantEvent[], tokens: TokenEvent[]) =>
    events.length || tokens.length ? steps.put({ events, tokens }) : undefined;
  const done = (async (): Promise<TurnEnd> => {
    try {
      const handle = await submitted;
      const text = new TextStream(ctx.tokenizer, stopStrings(body));
      const observer = {
        token: () => {
          if (completionTokens++ === 0) onFirstToken?.();
          ctx.observer.token();
        },
        stalled: (s: number) => ctx.observer.stalled(s),
      };
      const reason = await play(
        { handle, text, signal, observer },
        (piece) => put(parser.push(piece.text), piece.tokens),
      );
      await put(parser.flush(), []);
      const end: TurnEnd = { finish: parser.finish(reason), completionTokens };
      if (text.matched !== null) end.stopSequence = text.matched;
      return end;
    } catch (err) {
      const error = ApiError.from(err);
      return { finish: turnFinishOf(error), completionTokens, error };
    } finally {
      steps.close();
    }
  })();
  return { index, steps, done };
}

/** How a turn that did not complete ended, from the error its playback threw. */
function turnFinishOf(error: ApiError): TurnFinish {
  if (error.status === 499) return "cancelled";
  if (error.status === 503) return "shutdown";
  return "error";
}

async function* flatten(steps: AsyncIterable<ChoiceStep>): AsyncIterable<AssistantEvent> {
  for await (const step of steps) yield* step.events;
}
