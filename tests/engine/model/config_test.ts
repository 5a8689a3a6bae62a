// config.json parsing (transformers' defaults, every spelling of RoPE scaling, each bad field
// named) and the RoPE inverse frequencies computed from the config.

import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { expectLoadError } from "../../helpers/model_files.ts";
import { type LlamaConfig, parseLlamaConfig } from "../../../engine/model/config.ts";
import { ropeInvFreq } from "../../../engine/model/rope_freqs.ts";

const CONFIG_FILE = "/models/x/config.json";

function baseConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    architectures: ["LlamaForCausalLM"],
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    vocab_size: 100,
    ...overrides,
  };
}

function configError(json: unknown, problem: RegExp): void {
  assertThrows(
    () => parseLlamaConfig(json, CONFIG_FILE),
    (e) => expectLoadError(e, "config.json", problem),
  );
}

Deno.test("config: defaults follow transformers' LlamaConfig", () => {
  const c = parseLlamaConfig(baseConfig(), CONFIG_FILE);
  const want: LlamaConfig = {
    hiddenSize: 64,
    intermediateSize: 128,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 4,
    headDim: 16,
    vocabSize: 100,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    ropeScaling: null,
    maxPositionEmbeddings: 2048,
    tieWordEmbeddings: false,
    bosTokenId: null,
    eosTokenIds: [],
    architecture: "llama",
    qkvBias: false,
    qkNorm: false,
    slidingWindow: null,
    ropeLayers: [true, true],
    rotaryDim: 16,
    embedScale: 1,
    normOffset: 0,
    sandwichNorms: false,
    activation: "silu",
    attentionScale: 0.25,
    localLayers: null,
  };
  assertEquals(c, want);
  // model_type alone identifies a Llama checkpoint too.
  const byType = parseLlamaConfig(
    baseConfig({ architectures: undefined, model_type: "llama" }),
    CONFIG_FILE,
  );
  assertEquals(byType.hiddenSize, 64);
});

Deno.test("config: GQA, MQA, explicit head_dim, token ids", () => {
  const gqa = parseLlamaConfig(
    baseConfig({
      num_key_value_heads: 2,
      bos_token_id: 1,
      eos_token_id: 2,
      tie_word_embeddings: true,
    }),
    CONFIG_FILE,
  );
  assertEquals([
    gqa.numKvHeads,
    gqa.headDim,
    gqa.bosTokenId,
    gqa.eosTokenIds,
    gqa.tieWordEmbeddings,
  ], [
    2,
    16,
    1,
    [2],
    true,
  ]);
  const mqa = parseLlamaConfig(
    baseConfig({ num_key_value_heads: 1, eos_token_id: [5, 7] }),
    CONFIG_FILE,
  );
  assertEquals([mqa.numKvHeads, mqa.eosTokenIds], [1, [5, 7]]);
  const wide = parseLlamaConfig(baseConfig({ head_dim: 32 }), CONFIG_FILE);
  assertEquals(wide.headDim, 32); // q_proj is then 128 x 64, not square
  const odd = parseLlamaConfig(
    baseConfig({ hidden_size: 60, num_attention_heads: 3, head_dim: 24 }),
    CONFIG_FILE,
  );
  assertEquals(odd.headDim, 24);
});

Deno.test("config: rope scaling under rope_type, type and rope_parameters", () => {
  const llama3 = parseLlamaConfig(
    baseConfig({
      rope_theta: 500000,
      rope_scaling: {
        rope_type: "llama3",
        factor: 32,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 8192,
      },
    }),
    CONFIG_FILE,
  );
  assertEquals(llama3.ropeTheta, 500000);
  assertEquals(llama3.ropeScaling, {
    type: "llama3",
    factor: 32,
    lowFreqFactor: 1,
    highFreqFactor: 4,
    originalMaxPositionEmbeddings: 8192,
  });
  const linear = parseLlamaConfig(
    baseConfig({ rope_scaling: { type: "linear", factor: 2 } }),
    CONFIG_FILE,
  );
  assertEquals(linear.ropeScaling, { type: "linear", factor: 2 });
  const plain = parseLlamaConfig(
    baseConfig({ rope_scaling: { rope_type: "default" } }),
    CONFIG_FILE,
  );
  assertEquals(plain.ropeScaling, null);
  const v5 = parseLlamaConfig(
    baseConfig({ rope_parameters: { rope_type: "linear", factor: 4, rope_theta: 1234 } }),
    CONFIG_FILE,
  );
  assertEquals([v5.ropeTheta, v5.ropeScaling], [1234, { type: "linear", factor: 4 }]);
});

Deno.test("config: bad fields are rejected naming config.json and the field", () => {
  configError([1, 2], /JSON object/);
  configError(
    baseConfig({ architectures: ["GPT2LMHeadModel"], model_type: "gpt2" }),
    /unsupported architecture.*GPT2LMHeadModel.*supported are LlamaForCausalLM, Qwen2ForCausalLM/,
  );
  configError(baseConfig({ architectures: undefined }), /unsupported architecture/);
  configError(baseConfig({ hidden_size: "64" }), /"hidden_size"/);
  configError(baseConfig({ vocab_size: undefined }), /"vocab_size"/);
  configError(baseConfig({ num_hidden_layers: 0 }), /"num_hidden_layers"/);
  configError(baseConfig({ intermediate_size: 1.5 }), /"intermediate_size"/);
  configError(baseConfig({ num_key_value_heads: 3 }), /"num_key_value_heads".*does not divide/);
  configError(baseConfig({ hidden_size: 66 }), /"hidden_size".*not divisible/);
  configError(baseConfig({ head_dim: 15 }), /"head_dim".*even/);
  configError(baseConfig({ eos_token_id: "2" }), /"eos_token_id"/);
  configError(baseConfig({ attention_bias: true }), /"attention_bias"/);
  configError(baseConfig({ hidden_act: "gelu" }), /"hidden_act"/);
  configError(
    baseConfig({ rope_scaling: { rope_type: "yarn", factor: 4 } }),
    /"rope_scaling.rope_type".*yarn/,
  );
  configError(baseConfig({ rope_scaling: { type: "linear" } }), /"rope_scaling.factor"/);
  configError(
    baseConfig({
      rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4 },
    }),
    /"rope_scaling.original_max_position_embeddings"/,
  );
});

// config.json as published for Qwen2.5-0.5B-Instruct, Qwen3-0.6B, Mistral-7B-v0.1 and
// Mistral-7B-Instruct-v0.3 (fields the engine does not read left in, as they are).
const QWEN2_5 = {
  architectures: ["Qwen2ForCausalLM"],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: "silu",
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: "qwen2",
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};
const QWEN3 = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: "qwen3",
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};
const MISTRAL_V01 = {
  architectures: ["MistralForCausalLM"],
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: "silu",
  hidden_size: 4096,
  initializer_range: 0.02,
  intermediate_size: 14336,
  max_position_embeddings: 32768,
  model_type: "mistral",
  num_attention_heads: 32,
  num_hidden_layers: 32,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-5,
  rope_theta: 10000.0,
  sliding_window: 4096,
  tie_word_embeddings: false,
  torch_dtype: "bfloat16",
  use_cache: true,
  vocab_size: 32000,
};

Deno.test("config: Qwen2, Qwen3 and Mistral parse with their per-layer options", () => {
  const q2 = parseLlamaConfig(QWEN2_5, CONFIG_FILE);
  assertEquals(
    [q2.architecture, q2.qkvBias, q2.qkNorm, q2.slidingWindow, q2.headDim, q2.numKvHeads],
    ["qwen2", true, false, null, 64, 2],
  );
  assertEquals([q2.tieWordEmbeddings, q2.ropeTheta, q2.eosTokenIds], [true, 1e6, [151645]]);

  const q3 = parseLlamaConfig(QWEN3, CONFIG_FILE);
  // head_dim 128 while hidden / heads is 64.
  assertEquals(
    [q3.architecture, q3.qkvBias, q3.qkNorm, q3.slidingWindow, q3.headDim, q3.hiddenSize],
    ["qwen3", false, true, null, 128, 1024],
  );

  const m1 = parseLlamaConfig(MISTRAL_V01, CONFIG_FILE);
  assertEquals(
    [m1.architecture, m1.qkvBias, m1.qkNorm, m1.slidingWindow, m1.headDim],
    ["mistral", false, false, 4096, 128],
  );
  // v0.3 dropped the window: sliding_window null.
  const m3 = parseLlamaConfig(
    { ...MISTRAL_V01, sliding_window: null, vocab_size: 32768, rope_theta: 1000000.0 },
    CONFIG_FILE,
  );
  assertEquals([m3.architecture, m3.slidingWindow], ["mistral", null]);
  // model_type alone names the family, as for Llama.
  const byType = parseLlamaConfig({ ...QWEN3, architectures: undefined }, CONFIG_FILE);
  assertEquals(byType.architecture, "qwen3");
});

Deno.test("config: MoE and other families are refused, naming what is supported", () => {
  configError(
    { ...QWEN2_5, architectures: ["Qwen2MoeForCausalLM"], model_type: "qwen2_moe" },
    /unsupported architecture \["Qwen2MoeForCausalLM"\].*qwen2_moe.*no MoE/,
  );
  configError(
    { ...QWEN3, architectures: ["Qwen3MoeForCausalLM"], model_type: "qwen3_moe" },
    /unsupported architecture \["Qwen3MoeForCausalLM"\]/,
  );
  configError(
    { ...MISTRAL_V01, architectures: ["MixtralForCausalLM"], model_type: "mixtral" },
    /unsupported architecture \["MixtralForCausalLM"\].*MistralForCausalLM/,
  );
  configError(
    { ...QWEN2_5, architectures: ["Gemma2ForCausalLM"], model_type: "gemma2" },
    /unsupported architecture.*Phi3ForCausalLM/,
  );
  // Qwen's per-layer sliding window (max_window_layers) is not Mistral's: refused.
  configError({ ...QWEN2_5, use_sliding_window: true }, /"use_sliding_window".*qwen2/);
  // Qwen3's attention_bias adds an o_proj bias too.
  configError({ ...QWEN3, attention_bias: true }, /"attention_bias"/);
});

// Phi-4-mini-instruct's config.json, its fields as published (the 48 factors of each list here are
// stand-ins of the right count).
const PHI4_MINI = {
  architectures: ["Phi3ForCausalLM"],
  model_type: "phi3",
  attention_bias: false,
  hidden_act: "silu",
  hidden_size: 3072,
  intermediate_size: 8192,
  max_position_embeddings: 131072,
  original_max_position_embeddings: 4096,
  num_attention_heads: 24,
  num_hidden_layers: 32,
  num_key_value_heads: 8,
  partial_rotary_factor: 0.75,
  rms_norm_eps: 1e-5,
  rope_scaling: {
    type: "longrope",
    long_factor: Array.from({ length: 48 }, (_, i) => 1 + i),
    short_factor: Array.from({ length: 48 }, () => 1),
  },
  rope_theta: 10000,
  sliding_window: 262144,
  tie_word_embeddings: true,
  vocab_size: 200064,
};

// SmolLM3-3B's config.json (the fields that matter).
const SMOLLM3 = {
  architectures: ["SmolLM3ForCausalLM"],
  model_type: "smollm3",
  hidden_size: 2048,
  intermediate_size: 11008,
  num_hidden_layers: 36,
  num_attention_heads: 16,
  num_key_value_heads: 4,
  rope_theta: 5000000,
  no_rope_layer_interval: 4,
  no_rope_layers: Array.from({ length: 36 }, (_, i) => (i + 1) % 4 === 0 ? 0 : 1),
  layer_types: Array(36).fill("full_attention"),
  use_sliding_window: false,
  sliding_window: null,
  tie_word_embeddings: true,
  vocab_size: 128256,
};

Deno.test("config: SmolLM3's no-RoPE layers, given or by their interval", () => {
  const c = parseLlamaConfig(SMOLLM3, CONFIG_FILE);
  assertEquals(c.architecture, "smollm3");
  assertEquals(c.ropeLayers.filter((r) => !r).length, 9);
  assertEquals(c.ropeLayers.slice(0, 8), [true, true, true, false, true, true, true, false]);
  assertEquals(c.ropeTheta, 5000000);
  // transformers' default: every no_rope_layer_interval-th layer (1 = RoPE, 0 = none).
  const { no_rope_layers: _, rope_theta: _theta, ...derived } = SMOLLM3;
  const d = parseLlamaConfig({ ...derived, no_rope_layer_interval: 3 }, CONFIG_FILE);
  assertEquals(d.ropeLayers.slice(0, 6), [true, true, false, true, true, false]);
  assertEquals(d.ropeTheta, 2000000); // SmolLM3Config's default theta
  configError({ ...SMOLLM3, no_rope_layers: [1, 0] }, /"no_rope_layers": 2 entries for 36/);
  configError(
    { ...SMOLLM3, layer_types: ["sliding_attention", ...SMOLLM3.layer_types.slice(1)] },
    /"layer_types"/,
  );
});

Deno.test("config: Phi-4-mini's partial rotary, LongRoPE and window", () => {
  const c = parseLlamaConfig(PHI4_MINI, CONFIG_FILE);
  assertEquals(c.architecture, "phi3");
  assertEquals(c.headDim, 128);
  assertEquals(c.rotaryDim, 96);
  assertEquals(c.slidingWindow, 262144);
  assertEquals(c.tieWordEmbeddings, true);
  assert(c.ropeScaling?.type === "longrope");
  // sqrt(1 + ln(131072 / 4096) / ln 4096): transformers' attention factor.
  assert(
    Math.abs(c.ropeScaling.attentionFactor - Math.sqrt(1 + Math.log(32) / Math.log(4096))) < 1e-15,
  );
  assertEquals(c.ropeScaling.originalMaxPositionEmbeddings, 4096);
  // "su", Phi-3's first name for it, and an explicit attention_factor.
  const su = parseLlamaConfig(
    {
      ...PHI4_MINI,
      rope_scaling: { ...PHI4_MINI.rope_scaling, type: "su", attention_factor: 1.5 },
    },
    CONFIG_FILE,
  );
  assert(su.ropeScaling?.type === "longrope" && su.ropeScaling.attentionFactor === 1.5);
  configError(
    { ...PHI4_MINI, rope_scaling: { ...PHI4_MINI.rope_scaling, long_factor: [1, 2] } },
    /"rope_scaling.long_factor" must list 48 factors/,
  );
  configError({ ...PHI4_MINI, partial_rotary_factor: 0.7 }, /partial rotary of 89 of 128/);
});

Deno.test("rope: LongRoPE's short factors up to the original context, its long ones past it", () => {
  const c = parseLlamaConfig(PHI4_MINI, CONFIG_FILE);
  const plain = ropeInvFreq({ ...c, ropeScaling: null });
  assertEquals(plain.length, 48);
  assertEquals(plain[1], 1 / 10000 ** (2 / 96)); // over the rotary dims, not the head's
  const short = ropeInvFreq(c, 4096), long = ropeInvFreq(c, 4097);
  for (let i = 0; i < 48; i++) {
    assertEquals(short[i], plain[i]); // short factors of 1
    assert(Math.abs(long[i] - plain[i] / (1 + i)) <= 1e-15 * plain[i]);
  }
});

function ropeConfig(
  headDim: number,
  theta: number,
  ropeScaling: LlamaConfig["ropeScaling"],
): LlamaConfig {
  return {
    ...parseLlamaConfig(baseConfig(), CONFIG_FILE),
    headDim,
    rotaryDim: headDim,
    ropeTheta: theta,
    ropeScaling,
  };
}

function assertAllClose(got: ArrayLike<number>, want: number[], what: string): void {
  assertEquals(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]) / Math.abs(want[i]);
    assert(err < 1e-12, `${what}[${i}]: got ${got[i]}, want ${want[i]}`);
  }
}

Deno.test("rope: inverse frequencies match hand-computed values", () => {
  // theta^(-2i/d) for d = 8: 1, 10000^-1/4, 10000^-1/2, 10000^-3/4.
  assertAllClose(ropeInvFreq(ropeConfig(8, 10000, null)), [1, 0.1, 0.01, 0.001], "default");
  assertAllClose(
    ropeInvFreq(ropeConfig(8, 10000, { type: "linear", factor: 4 })),
    [0.25, 0.025, 0.0025, 0.00025],
    "linear",
  );
  // llama3 with original context 1024, low 1, high 4: wavelengths 2π/f = 6.28, 62.8, 628, 6283
  // against bands [256, 1024]: two kept, one smoothed, one divided by 8. The smoothed value is
  // s = (1024/628.3185 - 1) / 3 = 0.2099155…, (1-s)·0.01/8 + s·0.01 = 0.0030867609670…
  assertAllClose(
    ropeInvFreq(ropeConfig(8, 10000, {
      type: "llama3",
      factor: 8,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalMaxPositionEmbeddings: 1024,
    })),
    [1, 0.1, 0.003086760967011274, 0.000125],
    "llama3",
  );
  // Llama 3.1's own settings (head 128, theta 5e5, factor 8, original 8192), values from the
  // transformers formula evaluated in float64: one per band.
  const l31 = ropeInvFreq(ropeConfig(128, 500000, {
    type: "llama3",
    factor: 8,
    lowFreqFactor: 1,
    highFreqFactor: 4,
    originalMaxPositionEmbeddings: 8192,
  }));
  assertEquals(l31.length, 64);
  assertAllClose(
    [l31[0], l31[20], l31[30], l31[40], l31[63]],
    [1, 0.016560440080994446, 0.0013718935677611381, 3.428102195952591e-05, 3.068925988914511e-07],
    "llama3.1",
  );
});

/** Gemma 3 270M's config.json as published (layer_types written out, no rope_scaling). */
const GEMMA3_270M = {
  _sliding_window_pattern: 6,
  architectures: ["Gemma3ForCausalLM"],
  attention_bias: false,
  attn_logit_softcapping: null,
  bos_token_id: 2,
  eos_token_id: 1,
  final_logit_softcapping: null,
  head_dim: 256,
  hidden_activation: "gelu_pytorch_tanh",
  hidden_size: 640,
  intermediate_size: 2048,
  layer_types: Array.from(
    { length: 18 },
    (_, i) => (i + 1) % 6 ? "sliding_attention" : "full_attention",
  ),
  max_position_embeddings: 32768,
  model_type: "gemma3_text",
  num_attention_heads: 4,
  num_hidden_layers: 18,
  num_key_value_heads: 1,
  query_pre_attn_scalar: 256,
  rms_norm_eps: 1e-6,
  rope_local_base_freq: 10000,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: 512,
  vocab_size: 262144,
};

Deno.test("config: Gemma 3 (270M as published): local and global layers, GeGLU, sandwich norms, √hidden", () => {
  const c = parseLlamaConfig(GEMMA3_270M, CONFIG_FILE);
  assertEquals(c.architecture, "gemma3");
  assertEquals(c.headDim, 256);
  assertEquals(c.tieWordEmbeddings, true); // Gemma's default
  assertEquals(c.activation, "gelu_tanh");
  assertEquals(c.sandwichNorms, true);
  assertEquals(c.qkNorm, true);
  assertEquals(c.normOffset, 1);
  assertEquals(c.embedScale, Math.sqrt(640));
  assertEquals(c.attentionScale, 1 / 16);
  assertEquals(c.slidingWindow, null); // no window on every layer
  assertEquals(c.localLayers?.window, 512);
  assertEquals(c.localLayers?.ropeTheta, 10000);
  assertEquals(c.ropeTheta, 1e6);
  assertEquals(c.localLayers?.layers.filter((l) => !l).length, 3); // layers 5, 11, 17
  assertEquals(c.localLayers?.layers[5], false);
  // Without layer_types: the pattern (sliding_window_pattern, default 6), as Gemma3TextConfig.
  const { layer_types: _, ...noTypes } = GEMMA3_270M;
  assertEquals(parseLlamaConfig(noTypes, CONFIG_FILE).localLayers, c.localLayers);
  // query_pre_attn_scalar apart from head_dim (Gemma 3 27B: 168 for a head_dim of 128).
  const big = parseLlamaConfig({ ...GEMMA3_270M, query_pre_attn_scalar: 168 }, CONFIG_FILE);
  assertEquals(big.attentionScale, 1 / Math.sqrt(168));
  // Linear scaling applies to the global layers' frequencies (rope_scaling); local stay unscaled.
  const scaled = parseLlamaConfig(
    { ...GEMMA3_270M, rope_scaling: { rope_type: "linear", factor: 8 } },
    CONFIG_FILE,
  );
  assertEquals(scaled.ropeScaling, { type: "linear", factor: 8 });
  // transformers v5: rope_parameters per layer type.
  const v5 = parseLlamaConfig({
    ...GEMMA3_270M,
    rope_theta: undefined,
    rope_local_base_freq: undefined,
    rope_parameters: {
      full_attention: { rope_type: "linear", factor: 8, rope_theta: 1e6 },
      sliding_attention: { rope_type: "default", rope_theta: 10000 },
    },
  }, CONFIG_FILE);
  assertEquals(v5.ropeTheta, 1e6);
  assertEquals(v5.ropeScaling, { type: "linear", factor: 8 });
  assertEquals(v5.localLayers?.ropeTheta, 10000);
});

Deno.test("config: Gemma3ForConditionalGeneration reads as its language model (text_config)", () => {
  const { architectures: _, model_type: __, ...text } = GEMMA3_270M;
  const c = parseLlamaConfig({
    architectures: ["Gemma3ForConditionalGeneration"],
    model_type: "gemma3",
    text_config: { ...text, model_type: "gemma3_text" },
    vision_config: { hidden_size: 1152 },
    eos_token_id: [1, 106],
  }, CONFIG_FILE);
  assertEquals(c.architecture, "gemma3");
  assertEquals(c.hiddenSize, 640);
  assertEquals(c.eosTokenIds, [1, 106]);
});

Deno.test("config: Gemma 2's soft caps and other activations are refused, naming the field", () => {
  configError(
    { ...GEMMA3_270M, final_logit_softcapping: 30 },
    /final_logit_softcapping.*not supported/,
  );
  configError({ ...GEMMA3_270M, hidden_activation: "relu" }, /hidden_activation.*relu/);
  configError(
    { ...GEMMA3_270M, layer_types: ["chunked_attention", ...GEMMA3_270M.layer_types.slice(1)] },
    /layer_types.*chunked_attention/,
  );
  // A window on some layers only is Gemma 3's alone.
  configError(
    baseConfig({ layer_types: ["sliding_attention", "full_attention"] }),
    /layer_types/,
  );
});
