// Writes small but complete Hugging Face-style model directories of any supported family (Llama,
// Qwen2, Qwen3, Mistral, SmolLM3, Phi-3, Gemma 3: config.json as that family's config class writes it, its
// optional tensors, and Phi-3's fused qkv_proj and gate_up_proj): random weights that are deterministic from a seed, and a real byte-level BPE tokenizer with a ChatML template
// (tiny_tokenizer.ts). Tests use them as fixtures; `--model demo` uses one (demo.ts) so the server
// runs without a download.

import { join } from "node:path";
import { type Architecture, ARCHITECTURES, type RopeScaling } from "../model/config.ts";
import { type ExpectedTensor, expectedTensors } from "../model/tensors.ts";
import {
  encodeTensor,
  numElements,
  type StDtype,
  type TensorToWrite,
  writeSafetensors,
} from "../formats/safetensors.ts";
import {
  buildTokenizerJson,
  MIN_TOKENIZER_VOCAB_SIZE,
  TOKENIZER_VOCAB_SIZE,
  tokenizerConfigJson,
} from "./tiny_tokenizer.ts";

export interface TinyModelSpec {
  /** The family whose config.json and tensors are written (default llama). */
  architecture?: Architecture;
  /** Mistral's, Phi-3's and Gemma 3's sliding_window (only written for them; default null: none). */
  slidingWindow?: number;
  /** Gemma 3: every n-th layer global, the others local (default 6). */
  slidingWindowPattern?: number;
  /** Gemma 3: the local layers' RoPE base (default 10000). */
  localRopeTheta?: number;
  /** Gemma 3: query_pre_attn_scalar (default head_dim). */
  queryPreAttnScalar?: number;
  /** SmolLM3: every n-th layer skips RoPE (written as no_rope_layers too; default 4). */
  noRopeLayerInterval?: number;
  /** Phi-3: partial_rotary_factor (default 1). */
  partialRotaryFactor?: number;
  /** Phi-3: LongRoPE's pretraining context (written at the top level, as Phi-3's config does). */
  originalMaxPositionEmbeddings?: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Defaults to hiddenSize / numHeads. */
  headDim?: number;
  /**
   * Model vocabulary. Defaults to the tokenizer's full size (TOKENIZER_VOCAB_SIZE); smaller values
   * (at least 259) train fewer merges, larger ones pad the embedding like real checkpoints do.
   */
  vocabSize?: number;
  tied: boolean;
  dtype: StDtype;
  /** Number of safetensors shards; 1 (default) writes a single model.safetensors. */
  shards?: number;
  ropeScaling?: RopeScaling;
  ropeTheta?: number;
  maxPositionEmbeddings?: number;
  seed: number;
}

export async function writeTinyModel(dir: string, spec: TinyModelSpec): Promise<void> {
  const headDim = spec.headDim ?? spec.hiddenSize / spec.numHeads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new RangeError(`writeTinyModel: head dim ${headDim} must be an even integer`);
  }
  const vocabSize = spec.vocabSize ?? TOKENIZER_VOCAB_SIZE;
  if (vocabSize < MIN_TOKENIZER_VOCAB_SIZE) {
    throw new RangeError(`writeTinyModel: vocabSize ${vocabSize} is below the 259 base tokens`);
  }
  await Deno.mkdir(dir, { recursive: true });
  const tokenizer = buildTokenizerJson(Math.min(vocabSize, TOKENIZER_VOCAB_SIZE));
  const maxPos = spec.maxPositionEmbeddings ?? 2048;

  const architecture = spec.architecture ?? "llama";
  const config: Record<string, unknown> = {
    architectures: [ARCHITECTURES[architecture]],
    model_type: architecture === "gemma3" ? "gemma3_text" : architecture,
    hidden_size: spec.hiddenSize,
    intermediate_size: spec.intermediateSize,
    num_hidden_layers: spec.numLayers,
    num_attention_heads: spec.numHeads,
    num_key_value_heads: spec.numKvHeads,
    head_dim: headDim,
    vocab_size: vocabSize,
    hidden_act: "silu",
    rms_norm_eps: 1e-5,
    rope_theta: spec.ropeTheta ?? 10000,
    rope_scaling: ropeScalingJson(spec.ropeScaling ?? null),
    max_position_embeddings: maxPos,
    tie_word_embeddings: spec.tied,
    ...familyFields(architecture, spec),
    bos_token_id: 1,
    eos_token_id: 2,
    torch_dtype: { F32: "float32", F16: "float16", BF16: "bfloat16" }[spec.dtype],
  };
  await writeJson(join(dir, "config.json"), config);
  await writeJson(join(dir, "generation_config.json"), {
    bos_token_id: 1,
    eos_token_id: [2, 0],
  });
  await writeJson(join(dir, "tokenizer.json"), tokenizer);
  await writeJson(join(dir, "tokenizer_config.json"), tokenizerConfigJson(maxPos));
  await writeWeights(dir, spec, headDim, vocabSize);
}

/** The fields by which each family's config class differs from LlamaConfig's. */
function familyFields(architecture: Architecture, spec: TinyModelSpec): Record<string, unknown> {
  switch (architecture) {
    case "llama":
      return { attention_bias: false, mlp_bias: false };
    case "qwen2":
      // No attention_bias field: Qwen2 always has q, k and v biases.
      return { use_sliding_window: false, sliding_window: 32768, max_window_layers: 28 };
    case "qwen3":
      return {
        attention_bias: false,
        use_sliding_window: false,
        sliding_window: null,
        max_window_layers: 28,
      };
    case "mistral":
      return { sliding_window: spec.slidingWindow ?? null };
    case "smollm3": {
      const interval = spec.noRopeLayerInterval ?? 4;
      return {
        attention_bias: false,
        mlp_bias: false,
        use_sliding_window: false,
        sliding_window: null,
        no_rope_layer_interval: interval,
        no_rope_layers: Array.from(
          { length: spec.numLayers },
          (_, i) => (i + 1) % interval !== 0 ? 1 : 0,
        ),
        layer_types: Array(spec.numLayers).fill("full_attention"),
      };
    }
    case "gemma3": {
      const pattern = spec.slidingWindowPattern ?? 6;
      return {
        hidden_act: undefined,
        hidden_activation: "gelu_pytorch_tanh",
        query_pre_attn_scalar: spec.queryPreAttnScalar ?? spec.headDim ??
          spec.hiddenSize / spec.numHeads,
        sliding_window: spec.slidingWindow ?? 4096,
        layer_types: Array.from(
          { length: spec.numLayers },
          (_, i) => (i + 1) % pattern ? "sliding_attention" : "full_attention",
        ),
        rope_local_base_freq: spec.localRopeTheta ?? 10000,
        attention_bias: false,
        final_logit_softcapping: null,
        attn_logit_softcapping: null,
      };
    }
    case "phi3":
      return {
        sliding_window: spec.slidingWindow ?? null,
        partial_rotary_factor: spec.partialRotaryFactor ?? 1,
        ...(spec.originalMaxPositionEmbeddings
          ? { original_max_position_embeddings: spec.originalMaxPositionEmbeddings }
          : {}),
      };
  }
}

function ropeScalingJson(s: RopeScaling): Record<string, unknown> | null {
  if (s === null) return null;
  if (s.type === "linear") return { rope_type: "linear", factor: s.factor };
  if (s.type === "freq_factors") {
    throw new RangeError("freq_factors scaling has no config.json form");
  }
  if (s.type === "longrope") {
    // Phi-3 writes the original context at the top level (familyFields), not here.
    return { type: "longrope", short_factor: s.shortFactor, long_factor: s.longFactor };
  }
  return {
    rope_type: "llama3",
    factor: s.factor,
    low_freq_factor: s.lowFreqFactor,
    high_freq_factor: s.highFreqFactor,
    original_max_position_embeddings: s.originalMaxPositionEmbeddings,
  };
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify(value, null, 2) + "\n");
}

// ---- weights ----

// Scale choices. Linear weights are ~N(0, 1/fan_in), so each projection keeps the size of its input.
// The rest makes greedy decoding of a random model look like language-ish noise rather than one
// token forever: the embedding is large enough that layer 0 sees which token it is (not just
// the attention's average over the context), the MLPs amplify so that the residual stream is
// mostly token-dependent features and only ~10% the raw input embedding (with tied embeddings a
// dominant input embedding makes the model echo its input), and the final norm sets the spread
// of the logits to LOGIT_STD so that the top candidates are usually separated.
// (Tuned by greedy-decoding the demo and small tied/untied models with the float64 reference.)
const EMBED_STD = 0.5;
const ATTN_OUT_GAIN = 0.5;
const MLP_OUT_GAIN = 4;
const LOGIT_STD = 4;
/** Qwen2's q, k, v biases: large enough that a missing or misplaced bias shows in the logits. */
const BIAS_STD = 0.5;

interface PlannedTensor {
  name: string;
  shape: number[];
  /** Standard deviation of the N(0, std²) draw, or of the jitter around `center` for norms. */
  std: number;
  center: number;
}

function planTensors(spec: TinyModelSpec, headDim: number, vocab: number): PlannedTensor[] {
  const h = spec.hiddenSize;
  // Logits are lm_head rows · x̂ with x̂ of RMS 1, so their spread is finalNorm · rowStd · sqrt(h).
  const gemma = spec.architecture === "gemma3";
  // Gemma scales the embedding by √h on the way in (its LM head reads it unscaled); its norms'
  // branch outputs join the residual at RMS ~1, so its embedding is drawn √h smaller.
  const embedStd = gemma ? EMBED_STD / Math.sqrt(h) : EMBED_STD;
  const lmHeadStd = spec.tied ? embedStd : 1 / Math.sqrt(h);
  const linear = (gain = 1) => ({ std: (cols: number) => gain / Math.sqrt(cols), center: 0 });
  // A norm that scales by about `gain`: Gemma's checkpoints hold w of 1 + w.
  const norm = (gain = 1) => ({ std: () => 0.1 * gain, center: gain - (gemma ? 1 : 0) });
  const draw: Record<ExpectedTensor["role"], ReturnType<typeof linear>> = {
    embed: { std: () => embedStd, center: 0 },
    inputNorm: norm(),
    q: linear(),
    k: linear(),
    v: linear(),
    qBias: { std: () => BIAS_STD, center: 0 },
    kBias: { std: () => BIAS_STD, center: 0 },
    vBias: { std: () => BIAS_STD, center: 0 },
    qNorm: norm(),
    kNorm: norm(),
    o: linear(ATTN_OUT_GAIN),
    attnOutNorm: norm(),
    mlpNorm: norm(),
    gate: linear(),
    up: linear(),
    down: linear(MLP_OUT_GAIN),
    mlpOutNorm: norm(),
    finalNorm: norm(LOGIT_STD / (lmHeadStd * Math.sqrt(h))),
    lmHead: linear(),
  };
  const shape = {
    hiddenSize: h,
    intermediateSize: spec.intermediateSize,
    numLayers: spec.numLayers,
    numHeads: spec.numHeads,
    numKvHeads: spec.numKvHeads,
    headDim,
    vocabSize: vocab,
    tieWordEmbeddings: spec.tied,
    qkvBias: spec.architecture === "qwen2",
    qkNorm: spec.architecture === "qwen3" || gemma,
    sandwichNorms: gemma,
  };
  return expectedTensors(shape).map(({ name, shape, role }) => ({
    name,
    shape,
    std: draw[role].std(shape[shape.length - 1]),
    center: draw[role].center,
  }));
}

async function writeWeights(
  dir: string,
  spec: TinyModelSpec,
  headDim: number,
  vocab: number,
): Promise<void> {
  // Each tensor encoded as soon as it is drawn, so a large model's float64 values are never all
  // held at once.
  const drawn = planTensors(spec, headDim, vocab).map((t) => {
    const values = gaussian(tensorSeed(spec.seed, t.name), numElements(t.shape));
    for (let i = 0; i < values.length; i++) values[i] = t.center + t.std * values[i];
    return {
      name: t.name,
      dtype: spec.dtype,
      shape: t.shape,
      data: encodeTensor(values, spec.dtype),
    };
  });
  const tensors = spec.architecture === "phi3" ? fusePhi3(drawn) : drawn;

  const shards = Math.max(1, Math.min(spec.shards ?? 1, tensors.length));
  const metadata = { format: "pt" };
  if (shards === 1) {
    await writeSafetensors(join(dir, "model.safetensors"), tensors, metadata);
    return;
  }
  // Contiguous groups of roughly equal byte size, named like transformers names them.
  const total = tensors.reduce((s, t) => s + t.data.length, 0);
  const groups: (typeof tensors)[] = Array.from({ length: shards }, () => []);
  let acc = 0;
  for (const [i, t] of tensors.entries()) {
    const remainingTensors = tensors.length - i;
    let g = Math.min(shards - 1, Math.floor((acc / total) * shards));
    // Leave at least one tensor for each later shard.
    g = Math.max(g, shards - remainingTensors);
    groups[g].push(t);
    acc += t.data.length;
  }
  const weightMap: Record<string, string> = {};
  for (const [i, group] of groups.entries()) {
    const file = `model-${pad5(i + 1)}-of-${pad5(shards)}.safetensors`;
    await writeSafetensors(join(dir, file), group, metadata);
    for (const t of group) weightMap[t.name] = file;
  }
  await writeJson(join(dir, "model.safetensors.index.json"), {
    metadata: { total_size: total },
    weight_map: weightMap,
  });
}

/**
 * Phi-3's checkpoint layout: each layer's q, k, v stacked by rows into self_attn.qkv_proj, gate
 * and up into mlp.gate_up_proj (gate first), where the other tensors of the layer were.
 */
function fusePhi3(tensors: TensorToWrite[]): TensorToWrite[] {
  const byName = new Map(tensors.map((t) => [t.name, t]));
  // Rows are contiguous in one dtype: stacking them is concatenating their bytes.
  const fused = (name: string, parts: string[]): TensorToWrite => {
    const ts = parts.map((p) => byName.get(p)!);
    const data = new Uint8Array(ts.reduce((n, t) => n + t.data.length, 0));
    let at = 0;
    for (const t of ts) data.set(t.data, at), at += t.data.length;
    const rows = ts.reduce((n, t) => n + t.shape[0], 0);
    return { name, dtype: ts[0].dtype, shape: [rows, ts[0].shape[1]], data };
  };
  const out = [];
  for (const t of tensors) {
    const m = /^(model\.layers\.\d+)\.(self_attn\.[qkv]_proj|mlp\.(?:gate|up)_proj)\.weight$/
      .exec(t.name);
    if (!m) out.push(t);
    else if (m[2] === "self_attn.q_proj") {
      out.push(
        fused(
          `${m[1]}.self_attn.qkv_proj.weight`,
          ["q", "k", "v"].map((x) => `${m[1]}.self_attn.${x}_proj.weight`),
        ),
      );
    } else if (m[2] === "mlp.gate_proj") {
      out.push(fused(`${m[1]}.mlp.gate_up_proj.weight`, [
        `${m[1]}.mlp.gate_proj.weight`,
        `${m[1]}.mlp.up_proj.weight`,
      ]));
    }
  }
  return out;
}

function pad5(n: number): string {
  return String(n).padStart(5, "0");
}

/** FNV-1a over the name, mixed with the seed: each tensor's values depend only on (seed, name). */
export function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** N(0, 1) samples via Box–Muller from mulberry32 (a small 32-bit generator; plenty here). */
export function gaussian(seed: number, n: number): Float64Array {
  let state = seed >>> 0;
  const uniform = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float64Array(n);
  for (let i = 0; i < n; i += 2) {
    const u1 = 1 - uniform(); // (0, 1], keeps log finite
    const u2 = uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    out[i] = r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}
