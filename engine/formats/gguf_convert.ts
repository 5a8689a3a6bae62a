// Converts a Hugging Face Llama, Qwen2, Qwen3, Mistral, SmolLM3 or Phi-3 directory into a GGUF file
// the way llama.cpp's convert_hf_to_gguf.py (then llama-quantize) does: <arch>.* metadata (Mistral
// as "llama", with attention.sliding_window when it has one), ggml tensor names and dimension
// order, attn_q and attn_k rows permuted for interleaved RoPE in llama and smollm3 files, llama3
// RoPE scaling as a rope_freqs tensor, Phi-3's fused attn_qkv and ffn_up (gate + up) and its
// LongRoPE factors as rope_factors_long/short tensors, Gemma 3's norms as 1 + w (its local layers
// must be llama.cpp's fixed pattern), the tokenizer as tokenizer.ggml.* metadata, and each matrix in the type the
// caller picks (norms stay F32, as llama.cpp keeps them). Tests build fixtures with it, the decode
// benchmark its quantized models; the quantizers are round-to-nearest (quant/formats.ts).

import type { RopeScaling } from "../model/config.ts";
import { GGML, type GgmlTypeName } from "./gguf.ts";
import { ggufTensorName } from "../model/tensors.ts";
import { type GgufMeta, type GgufTensorToWrite, meta, writeGguf } from "./gguf_writer.ts";
import { ggufTokenizerMetadata } from "./gguf_tokenizer_metadata.ts";
import type { ModelFiles } from "./model_files.ts";
import { openModelDir } from "./open_model.ts";
import { isQuantType, quantize } from "../quant/formats.ts";
import { ropeInvFreq } from "../model/rope_freqs.ts";
import { GEMMA3_GGUF_LOCAL_THETA, GEMMA3_GGUF_PATTERN } from "./gguf_config.ts";
import { permutedHeads, permuteRows } from "./rope_permutation.ts";
import { encodeTensor, readTensorF64, type StDtype, type TensorInfo } from "./safetensors.ts";

export interface GgufConversion {
  /** Type of a matrix, by its GGUF name and ggml dims ([cols, rows]). */
  typeOf: (ggufName: string, dims: number[]) => GgmlTypeName;
  version?: 2 | 3;
  /** Each tensor as written: its HF name and shape, the rows as stored (permuted), its bytes. */
  onTensor?: (t: ConvertedTensor) => void;
}

export interface ConvertedTensor {
  hfName: string;
  shape: number[];
  type: GgmlTypeName;
  /** Values in stored row order, before encoding. */
  stored: Float64Array;
  data: Uint8Array;
  /** Heads whose rows were permuted (attn_q, attn_k), else 0. */
  heads: number;
  /** What was added to every value before storing (Gemma's norms: 1), else 0. */
  added: number;
}

export async function convertToGguf(
  sourceDir: string,
  path: string,
  options: GgufConversion,
): Promise<void> {
  const files = await openModelDir(sourceDir);
  const cfg = files.config;
  const tensors: GgufTensorToWrite[] = [];
  // Phi-3's fused tensors, gathered part by part: llama.cpp's phi3 files keep attn_qkv and ffn_up
  // (gate then up) whole.
  const fusing = new Map<string, { info: TensorInfo; values: Float64Array }[]>();
  for (const info of files.tensors.values()) {
    const fused = cfg.architecture === "phi3" ? phi3FusedName(info.name) : null;
    if (fused) {
      const parts = fusing.get(fused.name) ?? [];
      parts[fused.index] = { info, values: await readTensorF64(info) };
      fusing.set(fused.name, parts);
      if (parts.filter(Boolean).length < fused.of) continue;
      const rows = parts.reduce((n, p) => n + p.info.shape[0], 0);
      const cols = info.shape[1];
      const values = new Float64Array(rows * cols);
      parts.reduce((at, p) => (values.set(p.values, at), at + p.values.length), 0);
      const dims = [cols, rows];
      const type = options.typeOf(fused.name, dims);
      const data = encode(type, values);
      tensors.push({ name: fused.name, ggmlType: GGML[type], dims, data });
      const rowBytes = data.length / rows;
      let row = 0;
      for (const p of parts) {
        const n = p.info.shape[0];
        options.onTensor?.({
          hfName: p.info.name,
          shape: p.info.shape,
          type,
          stored: p.values,
          data: data.subarray(row * rowBytes, (row + n) * rowBytes),
          heads: 0,
          added: 0,
        });
        row += n;
      }
      continue;
    }
    const name = ggufTensorName(info.name, cfg);
    const dims = [...info.shape].reverse();
    const type = info.shape.length === 2 ? options.typeOf(name, dims) : "F32";
    const [rows, cols] = info.shape.length === 2 ? info.shape : [1, info.shape[0]];
    const heads = permutedHeads(cfg, name);
    const values = await readTensorF64(info);
    // llama.cpp's Gemma converter stores every norm (q and k norms too) as 1 + w.
    const added = cfg.normOffset !== 0 && /norm\.weight$/.test(name) ? cfg.normOffset : 0;
    if (added) { for (let i = 0; i < values.length; i++) values[i] += added; }
    const stored = heads ? permuteRows(values, heads, rows / heads, cols) : values;
    const data = encode(type, stored);
    tensors.push({ name, ggmlType: GGML[type], dims, data });
    options.onTensor?.({ hfName: info.name, shape: info.shape, type, stored, data, heads, added });
  }
  const scaling = cfg.ropeScaling ?? null;
  if (scaling?.type === "llama3") {
    // llama.cpp keeps llama3 scaling as per-frequency divisors, not as parameters.
    const plain = ropeInvFreq({ ...cfg, ropeScaling: null });
    const scaled = ropeInvFreq(cfg);
    const factors = new Float32Array(plain.map((f, i) => f / scaled[i]));
    tensors.push({
      name: "rope_freqs.weight",
      ggmlType: GGML.F32,
      dims: [factors.length],
      data: new Uint8Array(factors.buffer),
    });
  }
  if (scaling?.type === "longrope") {
    // llama.cpp's phi3 files carry LongRoPE's factors as two tensors.
    for (
      const [name, factors] of [
        ["rope_factors_long.weight", scaling.longFactor],
        ["rope_factors_short.weight", scaling.shortFactor],
      ] as const
    ) {
      const data = new Float32Array(factors);
      tensors.push({
        name,
        ggmlType: GGML.F32,
        dims: [data.length],
        data: new Uint8Array(data.buffer),
      });
    }
  }
  await writeGguf(path, {
    version: options.version ?? 3,
    metadata: {
      ...archMetadata(cfg, scaling),
      ...ggufTokenizerMetadata(files.tokenizerJson, files.tokenizerConfig, {
        vocabSize: cfg.vocabSize,
      }),
    },
    tensors,
  });
}

/** llama.cpp's architecture name for a family: Mistral's files say "llama". */
const GGUF_ARCH = {
  llama: "llama",
  mistral: "llama",
  qwen2: "qwen2",
  qwen3: "qwen3",
  smollm3: "smollm3",
  phi3: "phi3",
  gemma3: "gemma3",
} as const;

/** The phi3 GGUF tensor a Hugging Face q/k/v or gate/up tensor is fused into, and its place. */
function phi3FusedName(hfName: string): { name: string; index: number; of: number } | null {
  const m = /^model\.layers\.(\d+)\.(self_attn\.([qkv])_proj|mlp\.(gate|up)_proj)\.weight$/
    .exec(hfName);
  if (!m) return null;
  return m[3]
    ? { name: `blk.${m[1]}.attn_qkv.weight`, index: "qkv".indexOf(m[3]), of: 3 }
    : { name: `blk.${m[1]}.ffn_up.weight`, index: m[4] === "gate" ? 0 : 1, of: 2 };
}

function archMetadata(cfg: ModelFiles["config"], scaling: RopeScaling): Record<string, GgufMeta> {
  const arch = GGUF_ARCH[cfg.architecture];
  // llama.cpp reads no no-RoPE list from a smollm3 file: it skips RoPE on every fourth layer.
  if (cfg.ropeLayers.some((rope, i) => rope !== (arch !== "smollm3" || (i + 1) % 4 !== 0))) {
    throw new Error(
      `${cfg.architecture}: layers without RoPE other than every fourth have no GGUF form`,
    );
  }
  const local = cfg.localLayers;
  if (local) {
    // llama.cpp reads neither a layer list nor a local base from a gemma3 file.
    const fixed = local.layers.every((isLocal, i) =>
      isLocal === ((i + 1) % GEMMA3_GGUF_PATTERN !== 0)
    );
    if (!fixed || local.ropeTheta !== GEMMA3_GGUF_LOCAL_THETA) {
      throw new Error(
        `gemma3: local layers other than five of every six, or a local RoPE base other than ` +
          `${GEMMA3_GGUF_LOCAL_THETA}, have no GGUF form`,
      );
    }
    if (Math.abs(cfg.attentionScale * Math.sqrt(cfg.headDim) - 1) > 1e-12) {
      throw new Error(`gemma3: a query_pre_attn_scalar other than head_dim has no GGUF form`);
    }
  }
  const md: Record<string, GgufMeta> = {
    "general.architecture": meta.str(arch),
    "general.name": meta.str("sluice tiny"),
    [`${arch}.block_count`]: meta.u32(cfg.numLayers),
    [`${arch}.context_length`]: meta.u32(cfg.maxPositionEmbeddings),
    [`${arch}.embedding_length`]: meta.u32(cfg.hiddenSize),
    [`${arch}.feed_forward_length`]: meta.u32(cfg.intermediateSize),
    [`${arch}.attention.head_count`]: meta.u32(cfg.numHeads),
    [`${arch}.attention.head_count_kv`]: meta.u32(cfg.numKvHeads),
    [`${arch}.attention.key_length`]: meta.u32(cfg.headDim),
    [`${arch}.attention.value_length`]: meta.u32(cfg.headDim),
    [`${arch}.rope.dimension_count`]: meta.u32(cfg.rotaryDim),
    [`${arch}.rope.freq_base`]: meta.f32(cfg.ropeTheta),
    [`${arch}.attention.layer_norm_rms_epsilon`]: meta.f32(cfg.rmsNormEps),
  };
  if (cfg.slidingWindow !== null || arch === "phi3") {
    // phi3 files say 0 for none (convert_hf_to_gguf.py: how it tells Phi-4 apart).
    md[`${arch}.attention.sliding_window`] = meta.u32(cfg.slidingWindow ?? 0);
  }
  if (local) md[`${arch}.attention.sliding_window`] = meta.u32(local.window);
  if (scaling?.type === "longrope") {
    md[`${arch}.rope.scaling.original_context_length`] = meta.u32(
      scaling.originalMaxPositionEmbeddings,
    );
    md[`${arch}.rope.scaling.attn_factor`] = meta.f32(scaling.attentionFactor);
  }
  if (scaling?.type === "linear") {
    md[`${arch}.rope.scaling.type`] = meta.str("linear");
    md[`${arch}.rope.scaling.factor`] = meta.f32(scaling.factor);
  }
  return md;
}

function encode(type: GgmlTypeName, values: Float64Array): Uint8Array {
  const quant = type.toLowerCase();
  if (isQuantType(quant)) return quantize(quant, new Float32Array(values));
  return encodeTensor(values, type as StDtype);
}
