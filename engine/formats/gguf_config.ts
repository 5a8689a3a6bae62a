// Turns a GGUF file's <arch>.* metadata (llama, qwen2, qwen3, smollm3, phi3) into the engine's
// LlamaConfig. The
// keys are mapped onto the config.json fields they stand for and validated by parseLlamaConfig, so
// a GGUF model passes the same checks (GQA divisibility, even head dim, rope scaling) as a Hugging
// Face directory. Mistral ships as "llama"; a llama file with attention.sliding_window is read as
// Mistral. smollm3 files skip RoPE on every fourth layer (llama.cpp fixes the interval at 4);
// phi3 files give partial rotary as rope.dimension_count, a sliding window of 0 for none, and
// LongRoPE as the rope_factors_long/short tensors beside rope.scaling.original_context_length and
// rope.scaling.attn_factor. gemma3 files are read as llama.cpp reads them: every sixth layer global
// and the others local (attention.sliding_window, RoPE base 10000: both fixed there), scores scaled
// by 1/√key_length (the 27B, 62 layers, by 1/√(hidden/heads)), and the norms stored as 1 + w
// already (normOffset 0).

import {
  type Architecture,
  ARCHITECTURES,
  type LlamaConfig,
  parseLlamaConfig,
} from "../model/config.ts";
import { ModelLoadError } from "../model/errors.ts";
import type { GgufFile, GgufTensor, GgufValue } from "./gguf.ts";
import { readTensorInto } from "./safetensors.ts";

/** GGUF architectures Sluice loads, and the config.json model_type each stands for. */
const GGUF_ARCHITECTURES: Record<string, Architecture> = {
  llama: "llama",
  qwen2: "qwen2",
  qwen3: "qwen3",
  smollm3: "smollm3",
  phi3: "phi3",
  gemma3: "gemma3",
};

/** llama.cpp's fixed gemma3 layout: layer i is global when (i + 1) % 6 == 0, local base 10000. */
export const GEMMA3_GGUF_PATTERN = 6;
export const GEMMA3_GGUF_LOCAL_THETA = 10000;
/** Gemma 3 27B's layer count: llama.cpp scales its scores by 1/√(hidden/heads), not 1/√head_dim. */
const GEMMA3_27B_LAYERS = 62;

export async function ggufLlamaConfig(gguf: GgufFile): Promise<LlamaConfig> {
  const fail = (problem: string): never => {
    throw new ModelLoadError(gguf.path, problem);
  };
  const md = gguf.metadata;
  const arch = md["general.architecture"];
  if (typeof arch !== "string" || !Object.hasOwn(GGUF_ARCHITECTURES, arch)) {
    fail(
      `general.architecture is ${JSON.stringify(arch ?? null)}: supported GGUF architectures ` +
        `are ${Object.keys(GGUF_ARCHITECTURES).join(", ")}`,
    );
  }
  const num = (key: string): number | undefined => scalar(md, `${arch}.${key}`, fail);
  const need = (key: string): number => {
    const v = num(key);
    return v === undefined ? fail(`metadata key ${arch}.${key} is missing`) : v;
  };

  const embed = gguf.tensors.get("token_embd.weight") ?? fail(`missing tensor "token_embd.weight"`);
  const hidden = need("embedding_length");
  const numHeads = need("attention.head_count");
  const headDim = num("attention.key_length") ?? hidden / numHeads;
  const valueLength = num("attention.value_length");
  if (valueLength !== undefined && valueLength !== headDim) {
    fail(`attention.value_length ${valueLength} differs from key_length ${headDim}`);
  }
  const ropeDims = num("rope.dimension_count");
  if (ropeDims !== undefined && ropeDims !== headDim && arch !== "phi3") {
    fail(`rope.dimension_count ${ropeDims} is not the head dim ${headDim} (partial RoPE)`);
  }

  const window = num("attention.sliding_window") || undefined; // phi3 writes 0 for none
  const family = window !== undefined && arch === "llama"
    ? "mistral"
    : GGUF_ARCHITECTURES[arch as string];
  const phi3 = family === "phi3"
    ? {
      partial_rotary_factor: (ropeDims ?? headDim) / headDim,
      sliding_window: window ?? null,
      ...await longRope(gguf, arch as string, fail),
    }
    : {};
  const layers = need("block_count");
  const gemma3 = family === "gemma3"
    ? {
      sliding_window: window ?? fail(`metadata key ${arch}.attention.sliding_window is missing`),
      sliding_window_pattern: GEMMA3_GGUF_PATTERN,
      rope_local_base_freq: GEMMA3_GGUF_LOCAL_THETA,
      query_pre_attn_scalar: layers === GEMMA3_27B_LAYERS ? hidden / numHeads : headDim,
    }
    : {};
  const hfConfig = {
    architectures: [ARCHITECTURES[family]],
    model_type: family,
    ...(family === "mistral" ? { sliding_window: window } : {}),
    ...phi3,
    ...gemma3,
    hidden_size: hidden,
    intermediate_size: need("feed_forward_length"),
    num_hidden_layers: layers,
    num_attention_heads: numHeads,
    num_key_value_heads: num("attention.head_count_kv") ?? numHeads,
    head_dim: headDim,
    // The embedding's rows are the model's vocabulary (the tokenizer may list fewer).
    vocab_size: embed.dims[1],
    rms_norm_eps: num("attention.layer_norm_rms_epsilon") ?? 1e-5,
    rope_theta: num("rope.freq_base") ?? 10000,
    rope_scaling: family === "phi3" && "rope_scaling" in phi3
      ? phi3.rope_scaling
      : ropeScaling(md, arch as string, fail),
    max_position_embeddings: num("context_length") ?? 2048,
    tie_word_embeddings: !gguf.tensors.has("output.weight"),
    bos_token_id: scalar(md, "tokenizer.ggml.bos_token_id", fail) ?? null,
    eos_token_id: stopTokenIds(md, fail),
  };
  const config = parseLlamaConfig(hfConfig, gguf.path);
  // llama.cpp's converter stores Gemma's norms as 1 + w: nothing to add at load.
  config.normOffset = 0;
  const freqs = gguf.tensors.get("rope_freqs.weight");
  if (freqs && config.ropeScaling === null) {
    config.ropeScaling = { type: "freq_factors", factors: await ropeFactors(gguf, headDim) };
  }
  return config;
}

/**
 * A phi3 file's LongRoPE as config.json fields: its factors from the two tensors, the original
 * context, and the attention factor llama.cpp's converter computed (nothing without the tensors).
 */
async function longRope(
  gguf: GgufFile,
  arch: string,
  fail: (p: string) => never,
): Promise<Record<string, unknown>> {
  const long = gguf.tensors.get("rope_factors_long.weight");
  const short = gguf.tensors.get("rope_factors_short.weight");
  if (!long && !short) return {};
  if (!long || !short) fail(`rope_factors_long and rope_factors_short come together`);
  const original = scalar(gguf.metadata, `${arch}.rope.scaling.original_context_length`, fail) ??
    fail(`metadata key ${arch}.rope.scaling.original_context_length is missing`);
  const attentionFactor = scalar(gguf.metadata, `${arch}.rope.scaling.attn_factor`, fail);
  return {
    original_max_position_embeddings: original,
    rope_scaling: {
      rope_type: "longrope",
      long_factor: await f32Vector(gguf, long!),
      short_factor: await f32Vector(gguf, short!),
      ...(attentionFactor !== undefined ? { attention_factor: attentionFactor } : {}),
    },
  };
}

async function f32Vector(gguf: GgufFile, t: GgufTensor): Promise<number[]> {
  if (t.typeName !== "F32" || t.dims.length !== 1) {
    throw new ModelLoadError(gguf.path, `tensor "${t.name}" is ${t.typeName}, expected F32 [n]`);
  }
  const bytes = new Uint8Array(t.byteLength);
  await readTensorInto({ ...t, dtype: "F32", shape: t.dims }, bytes);
  return [...new Float32Array(bytes.buffer)];
}

/**
 * End-of-generation ids: eos, and llama.cpp's end-of-turn and end-of-message tokens (Llama 3 chat
 * models end a turn with <|eot_id|> while eos is <|end_of_text|>).
 */
function stopTokenIds(md: Record<string, GgufValue>, fail: (p: string) => never): number[] {
  const ids = ["eos", "eot", "eom"]
    .map((kind) => scalar(md, `tokenizer.ggml.${kind}_token_id`, fail))
    .filter((id): id is number => id !== undefined);
  return [...new Set(ids)];
}

/** llama.cpp writes linear scaling as metadata; llama3 scaling arrives as rope_freqs instead. */
function ropeScaling(
  md: Record<string, GgufValue>,
  arch: string,
  fail: (p: string) => never,
): Record<string, unknown> | null {
  const type = md[`${arch}.rope.scaling.type`];
  const factor = scalar(md, `${arch}.rope.scaling.factor`, fail) ??
    scalar(md, `${arch}.rope.scale_linear`, fail);
  if (type === undefined || type === "none") {
    return type === undefined && factor !== undefined && factor !== 1
      ? { rope_type: "linear", factor }
      : null;
  }
  if (type === "linear") return { rope_type: "linear", factor };
  return fail(`${arch}.rope.scaling.type "${String(type)}" is not supported (none, linear)`);
}

async function ropeFactors(gguf: GgufFile, headDim: number): Promise<number[]> {
  const t = gguf.tensors.get("rope_freqs.weight")!;
  if (t.typeName !== "F32" || t.dims.length !== 1 || t.dims[0] !== headDim / 2) {
    throw new ModelLoadError(
      gguf.path,
      `tensor "rope_freqs.weight" is ${t.typeName} [${t.dims.join(", ")}], expected F32 ` +
        `[${headDim / 2}]`,
    );
  }
  const bytes = new Uint8Array(t.byteLength);
  await readTensorInto({ ...t, dtype: "F32", shape: t.dims }, bytes);
  return [...new Float32Array(bytes.buffer)];
}

/** A numeric metadata value (u64s arrive as bigint), or undefined when absent. */
function scalar(
  md: Record<string, GgufValue>,
  key: string,
  fail: (p: string) => never,
): number | undefined {
  const v = md[key];
  if (v === undefined) return undefined;
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "number") return v;
  if (Array.isArray(v) && v.length > 0 && v.every((x) => x === v[0])) {
    return Number(v[0]); // a per-layer list that is the same on every layer
  }
  return fail(`metadata key ${key} is ${JSON.stringify(v)}, expected a number`);
}
