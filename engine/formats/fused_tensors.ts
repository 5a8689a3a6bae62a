// Phi-3 checkpoints fuse each layer's q, k and v projections into one qkv_proj and its gate and up
// projections into gate_up_proj (gate first); llama.cpp's phi3 GGUF files keep them fused as
// attn_qkv and ffn_up (of 2 × intermediate rows). Opening such a model splits them here into row
// views under the separate tensors' names: the same file and bytes, a later offset, fewer rows. The
// tensor list, the loader, the GGUF converter and the float64 reference then see a Llama layer, and
// the loader fuses q, k, v (and gate, up) again into the forward pass's own layout as it does for
// every family. Whole rows move, which holds for quantized rows too (a block never spans two).

import { ModelLoadError } from "../model/errors.ts";
import type { LlamaConfig } from "../model/config.ts";
import type { TensorInfo } from "./safetensors.ts";
import type { GgufFile, GgufTensor } from "./gguf.ts";

type Shape = Pick<
  LlamaConfig,
  "numLayers" | "numHeads" | "numKvHeads" | "headDim" | "intermediateSize"
>;

/** Each fused tensor of a layer, and the tensors it stacks with their row counts, in order. */
function fusedOf(cfg: Shape, layer: number, names: "hf" | "gguf") {
  const q = cfg.numHeads * cfg.headDim, kv = cfg.numKvHeads * cfg.headDim;
  const ff = cfg.intermediateSize;
  const hf = (part: string) => `model.layers.${layer}.${part}.weight`;
  const gg = (part: string) => `blk.${layer}.${part}.weight`;
  return names === "hf"
    ? [
      {
        fused: hf("self_attn.qkv_proj"),
        parts: [[hf("self_attn.q_proj"), q], [hf("self_attn.k_proj"), kv], [
          hf("self_attn.v_proj"),
          kv,
        ]],
      },
      {
        fused: hf("mlp.gate_up_proj"),
        parts: [[hf("mlp.gate_proj"), ff], [hf("mlp.up_proj"), ff]],
      },
    ] as const
    : [
      { fused: gg("attn_qkv"), parts: [[gg("attn_q"), q], [gg("attn_k"), kv], [gg("attn_v"), kv]] },
      // ffn_up of 2 × intermediate rows: gate then up; an ffn_up of intermediate rows is plain.
      { fused: gg("ffn_up"), parts: [[gg("ffn_gate"), ff], [gg("ffn_up"), ff]] },
    ] as const;
}

/** Adds row views of a Phi-3 directory's fused tensors to `tensors` (nothing for other models). */
export function splitFusedSafetensors(cfg: Shape, tensors: Map<string, TensorInfo>): void {
  for (let layer = 0; layer < cfg.numLayers; layer++) {
    for (const { fused, parts } of fusedOf(cfg, layer, "hf")) {
      const t = tensors.get(fused);
      if (!t) continue;
      const rows = parts.reduce((n, [, r]) => n + r, 0);
      if (t.shape.length !== 2 || t.shape[0] !== rows) {
        throw new ModelLoadError(
          t.file,
          `tensor "${fused}" has shape [${t.shape.join(", ")}], expected ${rows} rows ` +
            `(${parts.map(([name]) => name.split(".").at(-2)).join(" + ")}) from config.json`,
        );
      }
      const rowBytes = t.byteLength / rows;
      let row = 0;
      for (const [name, n] of parts) {
        tensors.set(name, {
          ...t,
          name,
          shape: [n, t.shape[1]],
          dataOffset: t.dataOffset + row * rowBytes,
          byteLength: n * rowBytes,
        });
        row += n;
      }
      tensors.delete(fused);
    }
  }
}

/**
 * Replaces a phi3 GGUF file's fused attn_qkv and ffn_up (gate + up) with row views named as
 * llama.cpp names the separate tensors.
 */
export function splitFusedGguf(cfg: Shape, gguf: GgufFile): void {
  for (let layer = 0; layer < cfg.numLayers; layer++) {
    for (const { fused, parts } of fusedOf(cfg, layer, "gguf")) {
      const t = gguf.tensors.get(fused);
      // A separate ffn_gate means ffn_up is up alone.
      if (!t || (fused.endsWith("ffn_up.weight") && gguf.tensors.has(parts[0][0]))) continue;
      const rows = parts.reduce((n, [, r]) => n + r, 0);
      if (t.dims.length !== 2 || t.dims[1] !== rows) {
        throw new ModelLoadError(
          gguf.path,
          `tensor "${fused}" has ggml dims [${t.dims.join(", ")}], expected ${rows} rows`,
        );
      }
      const rowBytes = t.byteLength / rows;
      let row = 0;
      const views: GgufTensor[] = parts.map(([name, n]) => {
        const view = {
          ...t,
          name,
          dims: [t.dims[0], n],
          dataOffset: t.dataOffset + row * rowBytes,
          byteLength: n * rowBytes,
        };
        row += n;
        return view;
      });
      gguf.tensors.delete(fused);
      for (const v of views) gguf.tensors.set(v.name, v);
    }
  }
}
