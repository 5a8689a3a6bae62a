// Parses a Hugging Face Llama config.json into the fields the engine needs, with the same defaults
// transformers' LlamaConfig applies, and rejects what the engine cannot run (biases, non-SiLU
// activations, unknown RoPE scaling) up front instead of producing wrong logits later.

import { z } from "zod";
import { ModelLoadError } from "./errors.ts";

export type RopeScaling =
  | null
  | {
    type: "llama3";
    factor: number;
    lowFreqFactor: number;
    highFreqFactor: number;
    originalMaxPositionEmbeddings: number;
  }
  | { type: "linear"; factor: number }
  // GGUF files carry llama3-style scaling as llama.cpp's rope_freqs tensor: one divisor per
  // frequency, already computed (gguf_config.ts).
  | { type: "freq_factors"; factors: number[] };

export interface LlamaConfig {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
}

const positiveInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();

// Older configs carry `rope_scaling` with `type`; newer ones `rope_type`; transformers v5 moves
// everything (theta included) into `rope_parameters`. All three spellings are accepted.
const ropeScalingSchema = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  rope_theta: z.number().positive().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().positive().optional(),
  high_freq_factor: z.number().positive().optional(),
  original_max_position_embeddings: positiveInt.optional(),
});

const configSchema = z.looseObject({
  architectures: z.array(z.string()).nullish(),
  model_type: z.string().nullish(),
  hidden_size: positiveInt,
  intermediate_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.nullish(),
  head_dim: positiveInt.nullish(),
  vocab_size: positiveInt,
  rms_norm_eps: z.number().positive().default(1e-6),
  rope_theta: z.number().positive().nullish(),
  rope_scaling: ropeScalingSchema.nullish(),
  rope_parameters: ropeScalingSchema.nullish(),
  max_position_embeddings: positiveInt.default(2048),
  tie_word_embeddings: z.boolean().default(false),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  attention_bias: z.boolean().default(false),
  mlp_bias: z.boolean().default(false),
  hidden_act: z.string().default("silu"),
});

/** Validates `json` (the parsed contents of `file`) as a Llama config. Throws ModelLoadError. */
export function parseLlamaConfig(json: unknown, file: string): LlamaConfig {
  const fail = (problem: string): never => {
    throw new ModelLoadError(file, problem);
  };
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    fail("expected a JSON object");
  }
  const parsed = configSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join(".") || "(root)";
    const got = issue.path.reduce<unknown>(
      (obj, key) => (obj as Record<PropertyKey, unknown> | undefined)?.[key as PropertyKey],
      json,
    );
    fail(`field "${field}": ${issue.message} (got ${JSON.stringify(got) ?? "nothing"})`);
  }
  const c = parsed.data!;

  const archs = c.architectures ?? [];
  if (!archs.includes("LlamaForCausalLM") && c.model_type !== "llama") {
    fail(
      `unsupported architecture ${JSON.stringify(archs)} (model_type ${
        JSON.stringify(c.model_type ?? null)
      }): only LlamaForCausalLM models are supported`,
    );
  }
  if (c.attention_bias) fail(`field "attention_bias": true is not supported`);
  if (c.mlp_bias) fail(`field "mlp_bias": true is not supported`);
  if (c.hidden_act !== "silu") {
    fail(`field "hidden_act": "${c.hidden_act}" is not supported (only "silu")`);
  }

  const numHeads = c.num_attention_heads;
  const numKvHeads = c.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0) {
    fail(
      `field "num_key_value_heads": ${numKvHeads} does not divide num_attention_heads ${numHeads}`,
    );
  }
  if (c.head_dim == null && c.hidden_size % numHeads !== 0) {
    fail(
      `field "hidden_size": ${c.hidden_size} is not divisible by num_attention_heads ${numHeads} ` +
        `and no head_dim is given`,
    );
  }
  const headDim = c.head_dim ?? c.hidden_size / numHeads;
  if (headDim % 2 !== 0) fail(`field "head_dim": ${headDim} must be even for rotary embeddings`);

  const ropeField = c.rope_scaling ? "rope_scaling" : "rope_parameters";
  const ropeTheta = c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000;
  const ropeScaling = parseRopeScaling(
    c.rope_scaling ?? c.rope_parameters ?? null,
    ropeField,
    fail,
  );

  const eos = c.eos_token_id;
  return {
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: c.vocab_size,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta,
    ropeScaling,
    maxPositionEmbeddings: c.max_position_embeddings,
    tieWordEmbeddings: c.tie_word_embeddings,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenIds: eos == null ? [] : Array.isArray(eos) ? [...eos] : [eos],
  };
}

function parseRopeScaling(
  raw: z.infer<typeof ropeScalingSchema> | null,
  field: string,
  fail: (problem: string) => never,
): RopeScaling {
  if (raw === null) return null;
  const type = raw.rope_type ?? raw.type ?? "default";
  const need = (key: keyof typeof raw): number => {
    const value = raw[key];
    if (typeof value !== "number") {
      fail(`field "${field}.${key}" is required for rope type ${type}`);
    }
    return value as number;
  };
  switch (type) {
    case "default":
      return null;
    case "linear":
      return { type: "linear", factor: need("factor") };
    case "llama3": {
      const scaling = {
        type: "llama3" as const,
        factor: need("factor"),
        lowFreqFactor: need("low_freq_factor"),
        highFreqFactor: need("high_freq_factor"),
        originalMaxPositionEmbeddings: need("original_max_position_embeddings"),
      };
      if (scaling.highFreqFactor <= scaling.lowFreqFactor) {
        fail(`field "${field}.high_freq_factor" must be greater than low_freq_factor`);
      }
      return scaling;
    }
    default:
      return fail(
        `field "${field}.rope_type": "${type}" is not supported (supported: default, linear, llama3)`,
      );
  }
}
