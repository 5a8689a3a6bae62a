// The tensors of a Llama checkpoint, with Hugging Face names and [out, in] shapes from the config.

import type { LlamaConfig } from "./config.ts";

export interface ExpectedTensor {
  name: string;
  shape: number[];
}

/** The tensors a Llama forward pass reads, with Hugging Face names and [out, in] shapes. */
export function expectedTensors(cfg: LlamaConfig): ExpectedTensor[] {
  const h = cfg.hiddenSize;
  const qDim = cfg.numHeads * cfg.headDim;
  const kvDim = cfg.numKvHeads * cfg.headDim;
  const out: ExpectedTensor[] = [{ name: "model.embed_tokens.weight", shape: [cfg.vocabSize, h] }];
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}`;
    out.push(
      { name: `${p}.input_layernorm.weight`, shape: [h] },
      { name: `${p}.self_attn.q_proj.weight`, shape: [qDim, h] },
      { name: `${p}.self_attn.k_proj.weight`, shape: [kvDim, h] },
      { name: `${p}.self_attn.v_proj.weight`, shape: [kvDim, h] },
      { name: `${p}.self_attn.o_proj.weight`, shape: [h, qDim] },
      { name: `${p}.post_attention_layernorm.weight`, shape: [h] },
      { name: `${p}.mlp.gate_proj.weight`, shape: [cfg.intermediateSize, h] },
      { name: `${p}.mlp.up_proj.weight`, shape: [cfg.intermediateSize, h] },
      { name: `${p}.mlp.down_proj.weight`, shape: [h, cfg.intermediateSize] },
    );
  }
  out.push({ name: "model.norm.weight", shape: [h] });
  if (!cfg.tieWordEmbeddings) out.push({ name: "lm_head.weight", shape: [cfg.vocabSize, h] });
  return out;
}
