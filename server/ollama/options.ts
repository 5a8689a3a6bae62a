// Ollama's `options`: the sampling options Sluice runs (as the chat body's fields), the load-time
// and hardware options Ollama has that cannot change an answer (accepted, no effect: Sluice sizes
// its batch and threads itself), and the ones that would change it and Sluice does not do
// (mirostat, tfs_z, typical_p, a penalty window): a 400 unless given their neutral value, never a
// silent ignore. An option Ollama does not have is a 400 too (a typo must not go unnoticed).
// num_ctx is checked against the model's context by the route, which knows the model.

import { z } from "zod";
import { MAX_PENALTY, MAX_REPETITION_PENALTY } from "../../runtime/service.ts";

const int = () => z.number().int();

/** Options Sluice does not do, accepted only at their neutral value. */
const neutralOnly = (neutral: unknown, why: string) =>
  z.unknown().refine((v) => v === neutral, { message: `${why} (only ${neutral} is accepted)` })
    .optional();

export const OllamaOptions = z.strictObject({
  // Sampling, as the OpenAI routes run it (Sluice's ranges).
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: int().min(0).optional(),
  min_p: z.number().min(0).max(1).optional(),
  seed: int().optional(),
  num_predict: int().refine((n) => n >= 1 || n === -1 || n === -2, {
    message: "a number of tokens (at least 1), or -1 / -2: until the context is full",
  }).optional(),
  stop: z.array(z.string().min(1, { message: "stop strings must not be empty" })).max(4)
    .optional(),
  repeat_penalty: z.number().gt(0).max(MAX_REPETITION_PENALTY).optional(),
  presence_penalty: z.number().min(-MAX_PENALTY).max(MAX_PENALTY).optional(),
  frequency_penalty: z.number().min(-MAX_PENALTY).max(MAX_PENALTY).optional(),
  num_ctx: int().min(1).optional(),
  // Penalties look at every token of the sequence: the window is the whole context (-1).
  repeat_last_n: int().min(-1).optional(),
  penalize_newline: z.boolean().optional(),
  // Sluice never shifts the context (a prompt that does not fit is refused), so nothing is kept.
  num_keep: int().optional(),
  // What Sluice does not sample with.
  mirostat: neutralOnly(0, "mirostat sampling is not supported"),
  mirostat_tau: z.number().optional(),
  mirostat_eta: z.number().optional(),
  tfs_z: neutralOnly(1, "tail-free sampling is not supported"),
  typical_p: neutralOnly(1, "typical sampling is not supported"),
  // Load-time and hardware settings: they change speed, never the answer.
  numa: z.boolean().optional(),
  num_batch: int().min(1).optional(),
  num_gpu: int().optional(),
  main_gpu: int().min(0).optional(),
  low_vram: z.boolean().optional(),
  f16_kv: z.boolean().optional(),
  logits_all: z.boolean().optional(),
  use_mmap: z.boolean().optional(),
  use_mlock: z.boolean().optional(),
  num_thread: int().min(0).optional(),
  vocab_only: neutralOnly(false, "a vocabulary-only model cannot generate"),
  embedding_only: neutralOnly(false, "embeddings are not served on this route"),
}).refine((o) => !penalized(o) || o.repeat_last_n === undefined || o.repeat_last_n === -1, {
  message: "penalties look at the whole sequence: only -1 (the whole context) is supported",
  path: ["repeat_last_n"],
}).refine((o) => !penalized(o) || o.penalize_newline !== false, {
  message: "penalties apply to every token: penalize_newline false is not supported",
  path: ["penalize_newline"],
});
export type OllamaOptions = z.infer<typeof OllamaOptions>;

function penalized(o: Partial<Record<string, unknown>>): boolean {
  return (o.repeat_penalty !== undefined && o.repeat_penalty !== 1) ||
    !!o.presence_penalty || !!o.frequency_penalty;
}

/** The chat body's sampling fields the options set (absent ones stay the server's defaults). */
export function samplingFields(o: OllamaOptions | undefined): Record<string, unknown> {
  if (!o) return {};
  return {
    temperature: o.temperature,
    top_p: o.top_p,
    top_k: o.top_k,
    min_p: o.min_p,
    seed: o.seed,
    // -1 and -2 (until the context is full) are what no max_tokens means.
    max_tokens: o.num_predict !== undefined && o.num_predict > 0 ? o.num_predict : undefined,
    stop: o.stop?.length ? o.stop : undefined,
    repetition_penalty: o.repeat_penalty,
    presence_penalty: o.presence_penalty,
    frequency_penalty: o.frequency_penalty,
  };
}
