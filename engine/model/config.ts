// Parses a Hugging Face config.json of a Llama-family model into the fields the engine needs, with
// the same defaults transformers' config classes apply, and rejects what the engine cannot run
// (other architectures, MoE, o-projection biases, non-SiLU activations, unknown RoPE scaling) up
// front instead of producing wrong logits later.
//
// The families differ from Llama only by per-layer options, which the forward pass applies as such:
//   qwen2    biases on the q, k and v projections (always: its config has no attention_bias);
//   qwen3    a per-head RMSNorm of q and k before RoPE, and an explicit head_dim;
//   mistral  attention limited to a sliding window of the last `sliding_window` positions;
//   smollm3  no RoPE on some layers (`no_rope_layers`: 1 = RoPE, 0 = none; by default every
//            `no_rope_layer_interval`-th layer, layers 3, 7, 11, ... skip it), as transformers'
//            SmolLM3Config derives it;
//   phi3     fused qkv_proj and gate_up_proj (split at load: formats/fused_tensors.ts), partial
//            rotary (`partial_rotary_factor`: only the first rotaryDim values of a head turn),
//            LongRoPE (short and long per-frequency factors, and the attention factor they imply),
//            a sliding window where set;
//   gemma3   the embedding scaled by √hidden, norms of x·(1 + w) (the 1 added at load where the
//            checkpoint stores w: normOffset), a norm after attention and after the MLP as well
//            as before (sandwichNorms), GeGLU with tanh-approximated GELU, q/k norms, a head_dim
//            of its own and scores scaled by query_pre_attn_scalar^-½, and interleaved local
//            layers (a sliding window with a RoPE base of their own, no scaling: localLayers)
//            beside global ones (rope_theta and rope_scaling). Gemma3ForConditionalGeneration's
//            language model reads as one: its text_config (the tensors' prefix is hf_dir.ts's).

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
  | { type: "freq_factors"; factors: number[] }
  // Phi-3's LongRoPE: each frequency divided by its short or long factor (rotaryDim/2 of each), the
  // long ones once the context passes originalMaxPositionEmbeddings (rope_freqs.ts says when), and
  // cos and sin scaled by attentionFactor either way.
  | {
    type: "longrope";
    shortFactor: number[];
    longFactor: number[];
    originalMaxPositionEmbeddings: number;
    attentionFactor: number;
  };

/** The model families Sluice runs: Llama and the ones that are Llama plus per-layer options. */
export const ARCHITECTURES = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  mistral: "MistralForCausalLM",
  smollm3: "SmolLM3ForCausalLM",
  phi3: "Phi3ForCausalLM",
  gemma3: "Gemma3ForCausalLM",
} as const;

/** A multimodal class whose language model Sluice runs alone (its text_config and tensors). */
const TEXT_MODEL_OF: Record<string, Architecture> = {
  Gemma3ForConditionalGeneration: "gemma3",
};

/** model_type spellings beside the family's own key. */
const MODEL_TYPES: Record<string, Architecture> = { gemma3_text: "gemma3" };

/** Gemma 3's local layers: a sliding window, and RoPE frequencies of their own base. */
export interface LocalLayers {
  /** Positions a local layer's row attends to, its own included. */
  window: number;
  /** The local layers' RoPE base (rope_local_base_freq), never scaled. */
  ropeTheta: number;
  /** Whether layer i is local (a window); the others attend to every position. */
  layers: boolean[];
}

/** The MLP's gate activation: SiLU (SwiGLU) or GELU's tanh approximation (GeGLU, Gemma). */
export type Activation = "silu" | "gelu_tanh";

export type Architecture = keyof typeof ARCHITECTURES;

export interface LlamaConfig {
  /** The family (model_type), named where the engine names its model. */
  architecture: Architecture;
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
  /** Biases on the q, k and v projections (Qwen2). */
  qkvBias: boolean;
  /** Per-head RMSNorm of q and k, weights of headDim values, before RoPE (Qwen3). */
  qkNorm: boolean;
  /** A row at position p attends to positions p - W + 1..p only (Mistral); null: all of 0..p. */
  slidingWindow: number | null;
  /** Whether layer i applies RoPE (SmolLM3 skips it on some layers; elsewhere all true). */
  ropeLayers: boolean[];
  /** Values of each head that RoPE turns, the first ones (partial rotary, Phi-4-mini); headDim. */
  rotaryDim: number;
  /** What the embedding's rows are multiplied by (Gemma: √hidden); 1 elsewhere. */
  embedScale: number;
  /**
   * What each RMSNorm weight as the checkpoint stores it lacks: Gemma applies x·(1 + w) and its
   * safetensors hold w (1, added at load); its GGUF files hold 1 + w already (0), as all others.
   */
  normOffset: number;
  /** A norm after attention and after the MLP too, before each joins the residual (Gemma 3). */
  sandwichNorms: boolean;
  activation: Activation;
  /** What q·k is multiplied by: 1/√headDim, Gemma 3's query_pre_attn_scalar^-½. */
  attentionScale: number;
  /** Gemma 3's interleaved local layers; null: every layer as slidingWindow says. */
  localLayers: LocalLayers | null;
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
  short_factor: z.array(z.number().positive()).optional(),
  long_factor: z.array(z.number().positive()).optional(),
  attention_factor: z.number().positive().optional(),
  partial_rotary_factor: z.number().positive().max(1).optional(),
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
  tie_word_embeddings: z.boolean().nullish(),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  attention_bias: z.boolean().default(false),
  mlp_bias: z.boolean().default(false),
  hidden_act: z.string().default("silu"),
  sliding_window: positiveInt.nullish(),
  use_sliding_window: z.boolean().default(false),
  layer_types: z.array(z.string()).nullish(),
  no_rope_layers: z.array(z.number().int().min(0).max(1)).nullish(),
  no_rope_layer_interval: positiveInt.default(4),
  partial_rotary_factor: z.number().positive().max(1).nullish(),
  original_max_position_embeddings: positiveInt.nullish(),
  // Gemma 3.
  hidden_activation: z.string().nullish(),
  query_pre_attn_scalar: z.number().positive().nullish(),
  rope_local_base_freq: z.number().positive().nullish(),
  sliding_window_pattern: positiveInt.nullish(),
  _sliding_window_pattern: positiveInt.nullish(),
  final_logit_softcapping: z.number().nullish(),
  attn_logit_softcapping: z.number().nullish(),
});

/** Validates `json` (the parsed contents of `file`) as a Llama config. Throws ModelLoadError. */
export function parseLlamaConfig(json: unknown, file: string): LlamaConfig {
  const fail = (problem: string): never => {
    throw new ModelLoadError(file, problem);
  };
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    fail("expected a JSON object");
  }
  json = languageModelConfig(json as Record<string, unknown>);
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

  const architecture = architectureOf(c.architectures ?? [], c.model_type ?? null, fail);
  // Llama's and Qwen3's attention_bias also adds an o_proj bias; Qwen2 has q, k, v biases only.
  if (c.attention_bias) fail(`field "attention_bias": true is not supported`);
  if (c.mlp_bias) fail(`field "mlp_bias": true is not supported`);
  const gemma = architecture === "gemma3";
  const activation = activationOf(c, gemma, fail);
  for (const cap of ["final_logit_softcapping", "attn_logit_softcapping"] as const) {
    // Gemma 2's soft caps (Gemma 3 has none).
    if (c[cap] != null) fail(`field "${cap}": ${c[cap]} is not supported (only null)`);
  }
  // Qwen's configs carry a sliding_window that applies only with use_sliding_window, and then only
  // to some layers (max_window_layers): not supported. Mistral's applies to every layer.
  if (c.use_sliding_window && architecture !== "mistral") {
    fail(`field "use_sliding_window": true is not supported for ${architecture}`);
  }
  // SmolLM3 and later configs name each layer's attention; a window on some layers only is
  // Gemma 3's alone.
  if (!gemma && c.layer_types?.some((t) => t !== "full_attention")) {
    fail(`field "layer_types": only "full_attention" layers are supported for ${architecture}`);
  }
  // Phi-3's window applies to every layer where set (Phi-4-mini's, 262144, never bites).
  const slidingWindow = architecture === "mistral" || architecture === "phi3"
    ? c.sliding_window ?? null
    : null;

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
  const headDim = c.head_dim ?? (gemma ? 256 : c.hidden_size / numHeads);
  if (headDim % 2 !== 0) fail(`field "head_dim": ${headDim} must be even for rotary embeddings`);

  const ropeField = c.rope_scaling ? "rope_scaling" : "rope_parameters";
  const ropeParams = perLayerTypeRope(c.rope_parameters);
  const rope = c.rope_scaling ?? ropeParams.full ?? null;
  // SmolLM3Config's default theta is 2e6 and Gemma3's 1e6 (transformers), every other family's
  // 10000.
  const ropeTheta = c.rope_theta ?? rope?.rope_theta ??
    (architecture === "smollm3" ? 2_000_000 : gemma ? 1_000_000 : 10000);
  const rotaryFactor = c.partial_rotary_factor ?? rope?.partial_rotary_factor ?? 1;
  const rotaryDim = Math.floor(headDim * rotaryFactor);
  // Whole vec4 pairs: the kernels rotate four pairs at a time (a full head's width is checked
  // where the kernels are bound).
  if (rotaryDim < headDim && rotaryDim % 8 !== 0) {
    fail(`partial rotary of ${rotaryDim} of ${headDim} values: must be a multiple of 8`);
  }
  const ropeScaling = parseRopeScaling(rope, ropeField, fail, {
    rotaryDim,
    maxPositionEmbeddings: c.max_position_embeddings,
    originalMaxPositionEmbeddings: c.original_max_position_embeddings ?? null,
  });
  const ropeLayers = ropeLayersOf(c, architecture, fail);
  const localLayers = gemma ? localLayersOf(c, ropeParams.sliding, fail) : null;

  const eos = c.eos_token_id;
  return {
    architecture,
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
    // Gemma's configs tie by default (PretrainedConfig's default, which Gemma3TextConfig keeps).
    tieWordEmbeddings: c.tie_word_embeddings ?? gemma,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenIds: eos == null ? [] : Array.isArray(eos) ? [...eos] : [eos],
    qkvBias: architecture === "qwen2",
    qkNorm: architecture === "qwen3" || gemma,
    slidingWindow,
    ropeLayers,
    rotaryDim,
    embedScale: gemma ? Math.sqrt(c.hidden_size) : 1,
    normOffset: gemma ? 1 : 0,
    sandwichNorms: gemma,
    activation,
    attentionScale: 1 / Math.sqrt(gemma ? c.query_pre_attn_scalar ?? headDim : headDim),
    localLayers,
  };
}

/**
 * The language model's config of a multimodal one (Gemma3ForConditionalGeneration): its
 * text_config, named as the family's text model; any other config as it is.
 */
function languageModelConfig(json: Record<string, unknown>): Record<string, unknown> {
  const archs = Array.isArray(json.architectures) ? json.architectures : [];
  const family = archs.map((a) => TEXT_MODEL_OF[a as string]).find(Boolean);
  const text = json.text_config;
  if (!family || typeof text !== "object" || text === null) return json;
  return {
    ...text,
    // Token ids and tying, where the top gives them, are the whole model's (gemma-3-4b-it ends a
    // turn with [1, 106] there; its text_config names no eos).
    ...Object.fromEntries(
      ["bos_token_id", "eos_token_id", "tie_word_embeddings"].filter((k) => json[k] != null).map((
        k,
      ) => [k, json[k]]),
    ),
    architectures: [ARCHITECTURES[family]],
    model_type: family,
  };
}

/** The MLP's activation: hidden_act (Llama's families) or hidden_activation (Gemma's). */
function activationOf(
  c: z.infer<typeof configSchema>,
  gemma: boolean,
  fail: (problem: string) => never,
): Activation {
  const name = gemma ? c.hidden_activation ?? "gelu_pytorch_tanh" : c.hidden_act;
  const field = gemma ? "hidden_activation" : "hidden_act";
  if (name === "silu" && !gemma) return "silu";
  if (gemma && (name === "gelu_pytorch_tanh" || name === "gelu_tanh")) return "gelu_tanh";
  return fail(
    `field "${field}": "${name}" is not supported (only "${gemma ? "gelu_pytorch_tanh" : "silu"}")`,
  );
}

/**
 * transformers v5 may give rope_parameters per layer type ({full_attention: {...},
 * sliding_attention: {...}}); older configs one set for all (Gemma 3's local base apart).
 */
function perLayerTypeRope(
  params: z.infer<typeof ropeScalingSchema> | null | undefined,
): {
  full: z.infer<typeof ropeScalingSchema> | null;
  sliding: z.infer<typeof ropeScalingSchema> | null;
} {
  if (!params) return { full: null, sliding: null };
  const byType = params as Record<string, unknown>;
  const full = byType.full_attention, sliding = byType.sliding_attention;
  if (typeof full === "object" || typeof sliding === "object") {
    return {
      full: (full ?? null) as z.infer<typeof ropeScalingSchema> | null,
      sliding: (sliding ?? null) as z.infer<typeof ropeScalingSchema> | null,
    };
  }
  return { full: params, sliding: null };
}

/**
 * Gemma 3's local layers: layer_types where given, else every layer but each
 * sliding_window_pattern-th (default 6: five local, one global), as Gemma3TextConfig derives it.
 */
function localLayersOf(
  c: z.infer<typeof configSchema>,
  slidingRope: z.infer<typeof ropeScalingSchema> | null,
  fail: (problem: string) => never,
): LocalLayers {
  const n = c.num_hidden_layers;
  const pattern = c.sliding_window_pattern ?? c._sliding_window_pattern ?? 6;
  const types = c.layer_types ??
    Array.from({ length: n }, (_, i) => (i + 1) % pattern ? "sliding_attention" : "full_attention");
  if (types.length !== n) fail(`field "layer_types": ${types.length} entries for ${n} layers`);
  const bad = types.find((t) => t !== "sliding_attention" && t !== "full_attention");
  if (bad) fail(`field "layer_types": "${bad}" is not supported`);
  const slidingType = slidingRope?.rope_type ?? slidingRope?.type ?? "default";
  if (slidingType !== "default") {
    fail(`rope_parameters.sliding_attention: rope type "${slidingType}" is not supported`);
  }
  return {
    window: c.sliding_window ?? 4096,
    ropeTheta: slidingRope?.rope_theta ?? c.rope_local_base_freq ?? 10000,
    layers: types.map((t) => t === "sliding_attention"),
  };
}

/** Which layers apply RoPE: all, but for SmolLM3's no_rope_layers (given or by its interval). */
function ropeLayersOf(
  c: z.infer<typeof configSchema>,
  architecture: Architecture,
  fail: (problem: string) => never,
): boolean[] {
  const n = c.num_hidden_layers;
  if (architecture !== "smollm3") return Array(n).fill(true);
  const flags = c.no_rope_layers ??
    Array.from({ length: n }, (_, i) => (i + 1) % c.no_rope_layer_interval !== 0 ? 1 : 0);
  // transformers reads the first num_hidden_layers entries ("at least the same length").
  if (flags.length < n) {
    fail(`field "no_rope_layers": ${flags.length} entries for ${n} layers`);
  }
  return flags.slice(0, n).map((f) => f === 1);
}

/** The family named by `architectures` or, failing that, `model_type`; anything else fails. */
function architectureOf(
  archs: string[],
  modelType: string | null,
  fail: (problem: string) => never,
): Architecture {
  const families = Object.entries(ARCHITECTURES) as [Architecture, string][];
  const byClass = families.find(([, cls]) => archs.includes(cls));
  if (byClass) return byClass[0];
  const byType = families.find(([type]) => type === modelType);
  if (byType) return byType[0];
  if (modelType !== null && Object.hasOwn(MODEL_TYPES, modelType)) return MODEL_TYPES[modelType];
  return fail(
    `unsupported architecture ${JSON.stringify(archs)} (model_type ${
      JSON.stringify(modelType)
    }): supported are ${Object.values(ARCHITECTURES).join(", ")} (dense models; no MoE)`,
  );
}

function parseRopeScaling(
  raw: z.infer<typeof ropeScalingSchema> | null,
  field: string,
  fail: (problem: string) => never,
  model: {
    rotaryDim: number;
    maxPositionEmbeddings: number;
    originalMaxPositionEmbeddings: number | null;
  },
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
    case "su": // Phi-3's first name for longrope
    case "longrope":
      return parseLongRope(raw, field, fail, model);
    default:
      return fail(
        `field "${field}.rope_type": "${type}" is not supported (supported: default, linear, ` +
          `llama3, longrope)`,
      );
  }
}

/**
 * LongRoPE as transformers computes it: Phi-3 keeps the pretraining context at the top level
 * (original_max_position_embeddings), and then the factor behind the attention factor is
 * max_position_embeddings / original; attention_factor, where given, wins.
 */
function parseLongRope(
  raw: z.infer<typeof ropeScalingSchema>,
  field: string,
  fail: (problem: string) => never,
  model: {
    rotaryDim: number;
    maxPositionEmbeddings: number;
    originalMaxPositionEmbeddings: number | null;
  },
): RopeScaling {
  const half = model.rotaryDim / 2;
  const factors = (key: "short_factor" | "long_factor"): number[] => {
    const f = raw[key];
    if (!f || f.length !== half) {
      fail(`field "${field}.${key}" must list ${half} factors (got ${f?.length ?? "none"})`);
    }
    return f!;
  };
  const original = model.originalMaxPositionEmbeddings ?? raw.original_max_position_embeddings;
  if (original === undefined) {
    fail(`field "original_max_position_embeddings" is required for rope type longrope`);
  }
  const factor = model.originalMaxPositionEmbeddings !== null
    ? model.maxPositionEmbeddings / model.originalMaxPositionEmbeddings
    : raw.factor ?? 1;
  const attentionFactor = raw.attention_factor ??
    (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original!)));
  return {
    type: "longrope",
    shortFactor: factors("short_factor"),
    longFactor: factors("long_factor"),
    originalMaxPositionEmbeddings: original!,
    attentionFactor,
  };
}
