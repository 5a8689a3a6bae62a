// An encoder from a GGUF file as llama.cpp writes one (architectures "bert" and "nomic-bert"):
// its metadata read as the config.json the family would have, its tensors renamed to Hugging Face
// names (so the safetensors path loads them unchanged: a GGUF tensor is a byte range like any
// other), a fused attn_qkv of a "bert" file split into q, k and v row ranges, its pooling_type as
// sentence-transformers' Pooling, and its WordPiece vocabulary rebuilt as tokenizer.json.
// F32, F16 and BF16 tensors only; a quantized encoder is refused by name. llama.cpp stores WordPiece
// tokens in "phantom space" form (a word start "▁x", a continuation "x", specials "[X]"), and its
// tokenizer lowercases whatever the model: both undone or kept here as llama.cpp runs them.

import type { GgufFile, GgufTensor } from "../formats/gguf.ts";
import type { PoolingConfig } from "../formats/pooling_config.ts";
import type { StDtype, TensorInfo } from "../formats/safetensors.ts";
import { ModelLoadError } from "../model/errors.ts";

export const GGUF_ENCODER_ARCHITECTURES = ["bert", "nomic-bert"];

export interface GgufEncoder {
  configJson: Record<string, unknown>;
  tensors: Map<string, TensorInfo>;
  pooling: PoolingConfig | null;
  tokenizerJson: Record<string, unknown>;
}

export function ggufEncoder(gguf: GgufFile): GgufEncoder {
  const md = gguf.metadata;
  const fail = (problem: string): never => {
    throw new ModelLoadError(gguf.path, problem);
  };
  const arch = String(md["general.architecture"] ?? "");
  if (!GGUF_ENCODER_ARCHITECTURES.includes(arch)) fail(`architecture ${arch} is not an encoder`);
  const num = (key: string, fallback?: number): number => {
    const v = md[`${arch}.${key}`] ?? fallback;
    if (typeof v !== "number" && typeof v !== "bigint") fail(`metadata ${arch}.${key} is missing`);
    return Number(v);
  };
  const rows = (name: string) => {
    const t = gguf.tensors.get(name);
    return t ? t.dims[t.dims.length - 1] : 0;
  };
  const nomic = arch === "nomic-bert";
  const H = num("embedding_length");
  const common = {
    vocab_size: rows("token_embd.weight") || fail("has no token_embd.weight"),
    type_vocab_size: rows("token_types.weight"),
  };
  const configJson: Record<string, unknown> = nomic
    ? {
      architectures: ["NomicBertModel"],
      model_type: "nomic_bert",
      n_embd: H,
      n_layer: num("block_count"),
      n_head: num("attention.head_count"),
      n_inner: num("feed_forward_length"),
      n_positions: num("context_length"),
      layer_norm_epsilon: num("attention.layer_norm_epsilon", 1e-12),
      rotary_emb_base: num("rope.freq_base", 10000),
      rotary_emb_fraction: 1,
      activation_function: "swiglu",
      qkv_proj_bias: gguf.tensors.has("blk.0.attn_qkv.bias"),
      mlp_fc1_bias: gguf.tensors.has("blk.0.ffn_up.bias"),
      mlp_fc2_bias: gguf.tensors.has("blk.0.ffn_down.bias"),
      ...common,
    }
    : {
      architectures: ["BertModel"],
      model_type: "bert",
      hidden_size: H,
      num_hidden_layers: num("block_count"),
      num_attention_heads: num("attention.head_count"),
      intermediate_size: num("feed_forward_length"),
      max_position_embeddings: rows("position_embd.weight") || num("context_length"),
      layer_norm_eps: num("attention.layer_norm_epsilon", 1e-12),
      hidden_act: "gelu",
      ...common,
    };
  const pooling = poolingOf(Number(md[`${arch}.pooling_type`] ?? 0), gguf.path);

  const tensors = new Map<string, TensorInfo>();
  for (const t of gguf.tensors.values()) {
    const dtype = t.typeName as StDtype;
    if (!["F32", "F16", "BF16"].includes(dtype)) {
      fail(`tensor ${t.name} is ${t.typeName}; encoders load F32, F16 or BF16 only`);
    }
    const info = (name: string, offset = 0, rowsTaken?: number): TensorInfo => {
      const shape = [...t.dims].reverse();
      if (rowsTaken !== undefined) shape[0] = rowsTaken;
      const bytes = shape.reduce((a, b) => a * b, 1) * (dtype === "F32" ? 4 : 2);
      return {
        name,
        dtype,
        shape,
        file: t.file,
        dataOffset: t.dataOffset + offset,
        byteLength: bytes,
      };
    };
    const hf = hfName(t.name, nomic);
    if (hf === null) continue;
    if (Array.isArray(hf)) {
      // "bert" with a fused qkv: q, k and v are its thirds, by rows.
      const third = t.dims[t.dims.length - 1] / 3;
      const rowBytes = t.byteLength / (3 * third);
      hf.forEach((name, i) => tensors.set(name, info(name, i * third * rowBytes, third)));
    } else {
      tensors.set(hf, info(hf));
    }
  }
  return { configJson, tensors, pooling, tokenizerJson: wordPieceFromGguf(gguf) };
}

/** llama.cpp's pooling_type: 1 mean, 2 cls, 3 last; 0 (none) and 4 (rank) have no vector pooling. */
function poolingOf(type: number, file: string): PoolingConfig | null {
  if (type === 0) return null;
  const mode = ({ 1: "mean", 2: "cls", 3: "last" } as const)[type as 1 | 2 | 3];
  if (!mode) throw new ModelLoadError(file, `pooling_type ${type} is not supported`);
  return { mode, normalize: true };
}

const BERT_LAYER: Record<string, string> = {
  attn_q: "attention.self.query",
  attn_k: "attention.self.key",
  attn_v: "attention.self.value",
  attn_output: "attention.output.dense",
  attn_output_norm: "attention.output.LayerNorm",
  ffn_up: "intermediate.dense",
  ffn_down: "output.dense",
  layer_output_norm: "output.LayerNorm",
};
const NOMIC_LAYER: Record<string, string> = {
  attn_qkv: "attn.Wqkv",
  attn_output: "attn.out_proj",
  attn_output_norm: "norm1",
  ffn_up: "mlp.fc11",
  ffn_gate: "mlp.fc12",
  ffn_down: "mlp.fc2",
  layer_output_norm: "norm2",
};

/** The Hugging Face name of a GGUF tensor (three for a "bert" attn_qkv), or null: not loaded. */
function hfName(name: string, nomic: boolean): string | string[] | null {
  const global: Record<string, string> = {
    token_embd: "embeddings.word_embeddings",
    position_embd: "embeddings.position_embeddings",
    token_types: "embeddings.token_type_embeddings",
    token_embd_norm: nomic ? "emb_ln" : "embeddings.LayerNorm",
  };
  const g = /^([a-z_]+)\.(weight|bias)$/.exec(name);
  if (g && global[g[1]]) return `${global[g[1]]}.${g[2]}`;
  const m = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(name);
  if (!m) return null;
  const [, layer, part, kind] = m;
  if (nomic) {
    const hf = NOMIC_LAYER[part];
    return hf ? `encoder.layers.${layer}.${hf}.${kind}` : null;
  }
  if (part === "attn_qkv") {
    return ["query", "key", "value"].map((p) =>
      `encoder.layer.${layer}.attention.self.${p}.${kind}`
    );
  }
  const hf = BERT_LAYER[part];
  return hf ? `encoder.layer.${layer}.${hf}.${kind}` : null;
}

/** tokenizer.json for llama.cpp's "bert" (WordPiece) vocabulary, as llama.cpp tokenizes it. */
function wordPieceFromGguf(gguf: GgufFile): Record<string, unknown> {
  const md = gguf.metadata;
  if (md["tokenizer.ggml.model"] !== "bert") {
    throw new ModelLoadError(
      gguf.path,
      `tokenizer ${String(md["tokenizer.ggml.model"])} is not supported for encoders (only bert)`,
    );
  }
  const tokens = md["tokenizer.ggml.tokens"];
  if (!Array.isArray(tokens)) throw new ModelLoadError(gguf.path, "has no tokenizer.ggml.tokens");
  const id = (key: string): number | null => {
    const v = md[`tokenizer.ggml.${key}`];
    return typeof v === "number" || typeof v === "bigint" ? Number(v) : null;
  };
  const vocab: Record<string, number> = {};
  const specials: string[] = [];
  tokens.forEach((raw, i) => {
    const t = String(raw);
    let piece: string;
    if (t.startsWith("[") && t.endsWith("]") && t.length > 2) {
      piece = t;
      specials.push(t);
    } else if (t.startsWith("\u2581")) piece = t.slice(1);
    else piece = "##" + t;
    if (!(piece in vocab)) vocab[piece] = i;
  });
  const name = (key: string, fallback: string) => {
    const i = id(key);
    return i === null ? fallback : String(tokens[i]);
  };
  const cls = name("cls_token_id", "[CLS]");
  const sep = name("seperator_token_id", "[SEP]");
  const unk = name("unknown_token_id", "[UNK]");
  const step = (kind: "SpecialToken" | "Sequence", which: string, type: number) => ({
    [kind]: { id: which, type_id: type },
  });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: specials.map((s) => ({
      id: vocab[s],
      content: s,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [
        step("SpecialToken", cls, 0),
        step("Sequence", "A", 0),
        step("SpecialToken", sep, 0),
      ],
      pair: [
        step("SpecialToken", cls, 0),
        step("Sequence", "A", 0),
        step("SpecialToken", sep, 0),
        step("Sequence", "B", 1),
        step("SpecialToken", sep, 1),
      ],
      special_tokens: Object.fromEntries(
        [cls, sep].map((t) => [t, { id: t, ids: [vocab[t]], tokens: [t] }]),
      ),
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: unk,
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab,
    },
  };
}

/** Whether `gguf` holds an encoder this engine runs. */
export function isGgufEncoder(gguf: GgufFile): boolean {
  return GGUF_ENCODER_ARCHITECTURES.includes(String(gguf.metadata["general.architecture"] ?? ""));
}

export type { GgufTensor };
