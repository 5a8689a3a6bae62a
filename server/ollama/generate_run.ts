// /api/generate's run: a prompt (the model's chat template around `system` and `prompt`, or the
// prompt as it is with raw), after the token ids of an earlier answer's `context`, submitted and
// played out as /v1/completions plays a prompt (completions/: the request builder's sampling, the
// runtime's refusals, the reader's pace, stop strings), constrained by `format` through the same
// grammar engine as chat, its reasoning split off by agent/reasoning_split.ts. Its answer's
// context is the prompt's ids and the generated ones.

import type { ChatMessage, GrammarSpec, Prompt, TokenEvent } from "../../runtime/service.ts";
import { InvalidRequest } from "../../runtime/service.ts";
import { grammarFromBody, GrammarRequestError } from "../agent/body_grammar.ts";
import type { ChatContext } from "../agent/chat_run.ts";
import { Handoff } from "../agent/handoff.ts";
import { ReasoningSplit } from "../agent/reasoning_split.ts";
import { stopStrings, submitParams } from "../completions/build.ts";
import { type Kind, promptIds } from "../completions/kinds.ts";
import { play } from "../completions/playback.ts";
import { checkPromptLength, submit } from "../completions/submit.ts";
import { TextStream } from "../completions/text_stream.ts";
import { ApiError } from "../openai/errors.ts";
import { SharedFields } from "../openai/schemas.ts";
import { limitToContext } from "./context_limit.ts";
import { badField } from "./errors.ts";
import { responseFormat } from "./format.ts";
import { samplingFields } from "./options.ts";
import type { Delta, Reply } from "./reply.ts";
import type { OllamaGenerateRequest } from "./schema.ts";

/** A generate request as the request builder reads it: the shared sampling fields. */
const generateKind: Kind<SharedFields> = {
  schema: SharedFields,
  promptParam: "prompt",
  idPrefix: "gen-",
  maxTokens: (body) => body.max_tokens ?? undefined,
  logprobs: () => null,
};

export async function startGenerate(
  ctx: ChatContext,
  body: OllamaGenerateRequest,
  signal: AbortSignal,
): Promise<Reply> {
  const { runtime, tokenizer } = ctx;
  const checkLength = (atLeast: number) => checkPromptLength(runtime, atLeast, "prompt");
  const ids = [...body.context ?? [], ...await promptIds(ctx.prompts, prompt(body), checkLength)];
  const fields = parseFields(body);
  fields.max_tokens = limitToContext(
    body.options?.num_ctx,
    runtime.info.maxContext,
    ids.length,
    fields.max_tokens ?? undefined,
  );
  const grammar = await compiled(ctx, formatGrammar(body));
  const params = { ...submitParams(generateKind, fields, ids), grammar, signal };
  const handle = submit(runtime, params, "prompt");
  const id = generateKind.idPrefix + crypto.randomUUID().replaceAll("-", "");
  ctx.live.add(id, handle);
  ctx.observer.generating();

  const think = body.think ?? !ctx.reasoningInline;
  const split = think ? new ReasoningSplit(endsInThinking(ctx, ids)) : null;
  const deltas = new Handoff<Delta>();
  const generated: number[] = [];
  let evalCount = 0;
  const emit = (text: string, tokens: TokenEvent[]) => {
    generated.push(...tokens.map((t) => t.id));
    const part = split ? split.push(text) : { reasoning: "", content: text };
    return put(deltas, part.content, part.reasoning);
  };
  const text = new TextStream(tokenizer, stopStrings(fields));
  const observer = {
    token: () => {
      evalCount++;
      ctx.observer.token();
    },
    stalled: (s: number) => ctx.observer.stalled(s),
  };
  const finished = (async () => {
    try {
      const reason = await play({ handle, text, signal, observer }, (p) => emit(p.text, p.tokens));
      const rest = split?.flush();
      if (rest) await put(deltas, rest.content, rest.reasoning);
      return reason;
    } finally {
      deltas.close();
    }
  })();
  // Nobody may be reading yet: the ending is observed now and rethrown by end().
  finished.catch(() => {});
  return {
    id,
    promptTokens: ids.length,
    deltas,
    end: async () => ({
      doneReason: await finished,
      evalCount,
      context: [...ids, ...generated],
    }),
  };
}

function put(deltas: Handoff<Delta>, content: string, thinking: string) {
  const delta: Delta = {};
  if (content) delta.content = content;
  if (thinking) delta.thinking = thinking;
  return content || thinking ? deltas.put(delta) : undefined;
}

/** The prompt run: raw text, or the chat template around system and prompt. */
function prompt(body: OllamaGenerateRequest): Prompt {
  if (body.raw) return { text: body.prompt };
  const messages: ChatMessage[] = [];
  if (body.system) messages.push({ role: "system", content: body.system });
  messages.push({ role: "user", content: body.prompt });
  return { messages, addGenerationPrompt: true };
}

/** The sampling fields, checked as /v1 checks them. */
function parseFields(body: OllamaGenerateRequest): SharedFields {
  const parsed = SharedFields.safeParse({
    model: body.model,
    stream: body.stream ?? true,
    ...samplingFields(body.options ?? undefined),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw badField(`options.${issue.path.join(".")}`, issue.message);
  }
  return parsed.data;
}

function formatGrammar(body: OllamaGenerateRequest): GrammarSpec | null {
  try {
    return grammarFromBody({ response_format: responseFormat(body.format) });
  } catch (err) {
    if (err instanceof GrammarRequestError) throw badField("format", err.message);
    throw err;
  }
}

async function compiled(ctx: ChatContext, spec: GrammarSpec | null) {
  if (!spec) return undefined;
  try {
    return await ctx.runtime.compileGrammar(spec);
  } catch (err) {
    if (err instanceof InvalidRequest) throw new ApiError(400, err.message, "format", err.code);
    throw err;
  }
}

/** Whether the prompt ends inside `<think>` (the template opened it for the model). */
function endsInThinking(ctx: ChatContext, ids: number[]): boolean {
  return ctx.tokenizer.decode(ids.slice(-8)).trimEnd().endsWith("<think>");
}
