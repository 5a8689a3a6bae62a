// Writes a generated encoder directory (engine/sources/tiny_encoder.ts, BERT or NomicBERT) as a
// GGUF file the way llama.cpp's converter does: its tensor names and metadata keys, the WordPiece
// vocabulary in "phantom space" form, and (optionally) BERT's q, k and v fused into one attn_qkv.
// Written from llama.cpp's naming, not from the loader's table, so the loader is checked
// (tests/engine/encoder/gguf_encoder_test.ts) and llama.cpp reads the same file (bench
// embeddings-llamacpp).

import { join } from "node:path";
import { readSafetensorsHeader, readTensorF64 } from "../formats/safetensors.ts";
import { encodeTensor } from "../formats/safetensors.ts";
import { type GgufMeta, meta, writeGguf } from "../formats/gguf_writer.ts";

export interface TinyEncoderGgufOptions {
  type: "F32" | "F16";
  /** BERT only: q, k and v as one blk.N.attn_qkv. */
  fusedQkv?: boolean;
  /** llama.cpp's pooling_type: 1 mean, 2 cls, 3 last. */
  poolingType?: number;
}

export async function writeTinyEncoderGguf(
  dir: string,
  path: string,
  options: TinyEncoderGgufOptions,
): Promise<void> {
  const cfg = JSON.parse(await Deno.readTextFile(join(dir, "config.json")));
  const tok = JSON.parse(await Deno.readTextFile(join(dir, "tokenizer.json")));
  const header = await readSafetensorsHeader(join(dir, "model.safetensors"));
  const values = new Map<string, { shape: number[]; data: Float64Array }>();
  for (const [name, info] of header) {
    values.set(name, { shape: info.shape, data: await readTensorF64(info) });
  }
  const nomic = cfg.model_type === "nomic_bert";
  const arch = nomic ? "nomic-bert" : "bert";
  const ggmlType = options.type === "F32" ? 0 : 1;
  const tensors: { name: string; ggmlType: number; dims: number[]; data: Uint8Array }[] = [];
  const put = (gguf: string, ...hf: string[]) => {
    const parts = hf.map((n) => {
      const v = values.get(n);
      if (!v) throw new Error(`no ${n}`);
      return v;
    });
    const rows = parts.reduce((a, p) => a + p.shape[0], 0);
    const data = new Float64Array(parts.reduce((a, p) => a + p.data.length, 0));
    let at = 0;
    for (const p of parts) {
      data.set(p.data, at);
      at += p.data.length;
    }
    const shape = [rows, ...parts[0].shape.slice(1)];
    // llama.cpp's converter keeps norms and biases (1-D), token types and learned positions in
    // F32 (its BERT graph adds a row of token_types as it is, so an F16 one is refused there).
    const alwaysF32 = gguf === "token_types.weight" || gguf === "position_embd.weight";
    const type = shape.length === 1 || alwaysF32 ? 0 : ggmlType;
    tensors.push({
      name: gguf,
      ggmlType: type,
      dims: [...shape].reverse(),
      data: encodeTensor(data, type === 0 ? "F32" : "F16"),
    });
  };
  put("token_embd.weight", "embeddings.word_embeddings.weight");
  put("token_types.weight", "embeddings.token_type_embeddings.weight");
  const embNorm = nomic ? "emb_ln" : "embeddings.LayerNorm";
  put("token_embd_norm.weight", `${embNorm}.weight`);
  put("token_embd_norm.bias", `${embNorm}.bias`);
  if (!nomic) put("position_embd.weight", "embeddings.position_embeddings.weight");
  const layers = nomic ? cfg.n_layer : cfg.num_hidden_layers;
  for (let i = 0; i < layers; i++) {
    const b = `blk.${i}.`;
    if (nomic) {
      const l = `encoder.layers.${i}.`;
      put(b + "attn_qkv.weight", l + "attn.Wqkv.weight");
      put(b + "attn_output.weight", l + "attn.out_proj.weight");
      put(b + "attn_output_norm.weight", l + "norm1.weight");
      put(b + "attn_output_norm.bias", l + "norm1.bias");
      put(b + "ffn_up.weight", l + "mlp.fc11.weight");
      put(b + "ffn_gate.weight", l + "mlp.fc12.weight");
      put(b + "ffn_down.weight", l + "mlp.fc2.weight");
      put(b + "layer_output_norm.weight", l + "norm2.weight");
      put(b + "layer_output_norm.bias", l + "norm2.bias");
      continue;
    }
    const l = `encoder.layer.${i}.`;
    const qkv = ["query", "key", "value"].map((p) => `${l}attention.self.${p}`);
    if (options.fusedQkv) {
      put(b + "attn_qkv.weight", ...qkv.map((n) => n + ".weight"));
      put(b + "attn_qkv.bias", ...qkv.map((n) => n + ".bias"));
    } else {
      ["attn_q", "attn_k", "attn_v"].forEach((g, j) => {
        put(`${b}${g}.weight`, `${qkv[j]}.weight`);
        put(`${b}${g}.bias`, `${qkv[j]}.bias`);
      });
    }
    for (
      const [g, hf] of [
        ["attn_output", "attention.output.dense"],
        ["attn_output_norm", "attention.output.LayerNorm"],
        ["ffn_up", "intermediate.dense"],
        ["ffn_down", "output.dense"],
        ["layer_output_norm", "output.LayerNorm"],
      ]
    ) {
      put(`${b}${g}.weight`, `${l}${hf}.weight`);
      put(`${b}${g}.bias`, `${l}${hf}.bias`);
    }
  }
  // WordPiece in llama.cpp's phantom-space form.
  const vocab = Object.entries(tok.model.vocab as Record<string, number>).sort((a, b) =>
    a[1] - b[1]
  );
  const phantom = (t: string) =>
    t.startsWith("[") && t.endsWith("]") ? t : t.startsWith("##") ? t.slice(2) : "\u2581" + t;
  const tokens = vocab.map(([t]) => phantom(t));
  const idOf = (t: string) => vocab.findIndex(([v]) => v === t);
  const metadata: Record<string, GgufMeta> = {
    "general.architecture": meta.str(arch),
    [`${arch}.embedding_length`]: meta.u32(nomic ? cfg.n_embd : cfg.hidden_size),
    [`${arch}.block_count`]: meta.u32(layers),
    [`${arch}.feed_forward_length`]: meta.u32(nomic ? cfg.n_inner : cfg.intermediate_size),
    [`${arch}.attention.head_count`]: meta.u32(nomic ? cfg.n_head : cfg.num_attention_heads),
    [`${arch}.attention.layer_norm_epsilon`]: meta.f32(1e-12),
    [`${arch}.context_length`]: meta.u32(nomic ? cfg.n_positions : cfg.max_position_embeddings),
    [`${arch}.attention.causal`]: meta.bool(false),
    [`${arch}.pooling_type`]: meta.u32(options.poolingType ?? 1),
    "tokenizer.ggml.model": meta.str("bert"),
    // llama.cpp refuses a BERT without it: the rows of token_types.weight.
    "tokenizer.ggml.token_type_count": meta.u32(cfg.type_vocab_size ?? 2),
    "tokenizer.ggml.tokens": meta.strs(tokens),
    "tokenizer.ggml.token_type": meta.i32s(tokens.map((t) => (/^\[.*\]$/.test(t) ? 3 : 1))),
    "tokenizer.ggml.cls_token_id": meta.u32(idOf("[CLS]")),
    "tokenizer.ggml.seperator_token_id": meta.u32(idOf("[SEP]")),
    "tokenizer.ggml.unknown_token_id": meta.u32(idOf("[UNK]")),
    "tokenizer.ggml.padding_token_id": meta.u32(idOf("[PAD]")),
  };
  if (nomic) metadata[`${arch}.rope.freq_base`] = meta.f32(cfg.rotary_emb_base);
  await writeGguf(path, { metadata, tensors });
}
