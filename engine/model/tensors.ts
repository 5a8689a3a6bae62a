// The tensors of a Llama-family checkpoint, written once: their Hugging Face names, llama.cpp's
// GGUF names, their [out, in] shapes from the config, and what each one is. Qwen2's q, k, v
// biases, Qwen3's and Gemma 3's q and k norms and Gemma 3's norms after attention and after the MLP
// are optional entries of the same list, present where the config says so. Gemma 3 names two norms
// differently (its post_attention_layernorm follows attention; the MLP's is
// pre_feedforward_layernorm), so names are looked up with the config's sandwichNorms. Checking a
// checkpoint
// (formats/hf_dir.ts, formats/gguf_model.ts), loading it (weights/load_weights.ts), converting it
// to GGUF and generating a tiny one (sources/tiny_model.ts) all walk this list.

import type { LlamaConfig } from "./config.ts";

/**
 * Each layer's tensors in checkpoint order: model.layers.N.<hf>.<suffix>, blk.N.<gguf>.<suffix>
 * (suffix "weight" unless given).
 */
const LAYER_TENSORS = {
  inputNorm: { hf: "input_layernorm", gguf: "attn_norm" },
  q: { hf: "self_attn.q_proj", gguf: "attn_q" },
  k: { hf: "self_attn.k_proj", gguf: "attn_k" },
  v: { hf: "self_attn.v_proj", gguf: "attn_v" },
  qBias: { hf: "self_attn.q_proj", gguf: "attn_q", suffix: "bias" },
  kBias: { hf: "self_attn.k_proj", gguf: "attn_k", suffix: "bias" },
  vBias: { hf: "self_attn.v_proj", gguf: "attn_v", suffix: "bias" },
  qNorm: { hf: "self_attn.q_norm", gguf: "attn_q_norm" },
  kNorm: { hf: "self_attn.k_norm", gguf: "attn_k_norm" },
  o: { hf: "self_attn.o_proj", gguf: "attn_output" },
  /** Gemma 3: the norm of attention's output, before it joins the residual stream. */
  attnOutNorm: { hf: "post_attention_layernorm", gguf: "post_attention_norm" },
  /** The norm before the MLP. */
  mlpNorm: { hf: "post_attention_layernorm", gguf: "ffn_norm" },
  gate: { hf: "mlp.gate_proj", gguf: "ffn_gate" },
  up: { hf: "mlp.up_proj", gguf: "ffn_up" },
  down: { hf: "mlp.down_proj", gguf: "ffn_down" },
  /** Gemma 3: the norm of the MLP's output, before it joins the residual stream. */
  mlpOutNorm: { hf: "post_feedforward_layernorm", gguf: "post_ffw_norm" },
} as const satisfies Record<string, { hf: string; gguf: string; suffix?: "bias" }>;

export type LayerTensor = keyof typeof LAYER_TENSORS;

/** Gemma 3's name for the MLP's norm (its post_attention_layernorm is attnOutNorm). */
const SANDWICH_MLP_NORM = "pre_feedforward_layernorm";

/** Norms only a sandwich has (a plain post_attention_layernorm is the MLP's norm). */
const SANDWICH_ONLY: readonly LayerTensor[] = ["attnOutNorm", "mlpOutNorm"];

/** Whether the checkpoint names its norms as Gemma 3's sandwich of four does. */
export type TensorNaming = Pick<LlamaConfig, "sandwichNorms">;

/** The Hugging Face name of `tensor` (without layer prefix and suffix) under `naming`. */
function hfPart(tensor: LayerTensor, naming: TensorNaming): string {
  return tensor === "mlpNorm" && naming.sandwichNorms
    ? SANDWICH_MLP_NORM
    : LAYER_TENSORS[tensor].hf;
}

export const EMBED = "model.embed_tokens.weight";
export const FINAL_NORM = "model.norm.weight";
/** Absent from a tied checkpoint (or ignored there): the embedding serves as the LM head. */
export const LM_HEAD = "lm_head.weight";

/** The Hugging Face name of `tensor` of layer `layer`. */
export function layerTensor(layer: number, tensor: LayerTensor, naming: TensorNaming): string {
  return `model.layers.${layer}.${hfPart(tensor, naming)}.${suffixOf(tensor)}`;
}

function suffixOf(tensor: LayerTensor): "weight" | "bias" {
  const entry = LAYER_TENSORS[tensor];
  return "suffix" in entry ? entry.suffix : "weight";
}

/** Tensors a layer has only when the config says so. */
const OPTIONAL: Partial<Record<LayerTensor, (cfg: LlamaShape) => boolean>> = {
  qBias: (cfg) => cfg.qkvBias,
  kBias: (cfg) => cfg.qkvBias,
  vBias: (cfg) => cfg.qkvBias,
  qNorm: (cfg) => cfg.qkNorm,
  kNorm: (cfg) => cfg.qkNorm,
  attnOutNorm: (cfg) => cfg.sandwichNorms,
  mlpOutNorm: (cfg) => cfg.sandwichNorms,
};

/** What the list depends on: a model's config, or the spec of a tiny model being written. */
export type LlamaShape = Pick<
  LlamaConfig,
  | "hiddenSize"
  | "intermediateSize"
  | "numLayers"
  | "numHeads"
  | "numKvHeads"
  | "headDim"
  | "vocabSize"
  | "tieWordEmbeddings"
  | "qkvBias"
  | "qkNorm"
  | "sandwichNorms"
>;

export interface ExpectedTensor {
  name: string;
  shape: number[];
  /** What the tensor is: one of a layer's, or the embedding, the final norm, the LM head. */
  role: LayerTensor | "embed" | "finalNorm" | "lmHead";
}

/** The tensors a Llama forward pass reads, with Hugging Face names and [out, in] shapes. */
export function expectedTensors(cfg: LlamaShape): ExpectedTensor[] {
  const h = cfg.hiddenSize;
  const qDim = cfg.numHeads * cfg.headDim;
  const kvDim = cfg.numKvHeads * cfg.headDim;
  const inter = cfg.intermediateSize;
  const shapes: Record<LayerTensor, number[]> = {
    inputNorm: [h],
    q: [qDim, h],
    k: [kvDim, h],
    v: [kvDim, h],
    qBias: [qDim],
    kBias: [kvDim],
    vBias: [kvDim],
    qNorm: [cfg.headDim],
    kNorm: [cfg.headDim],
    o: [h, qDim],
    attnOutNorm: [h],
    mlpNorm: [h],
    gate: [inter, h],
    up: [inter, h],
    down: [h, inter],
    mlpOutNorm: [h],
  };
  const out: ExpectedTensor[] = [{ name: EMBED, shape: [cfg.vocabSize, h], role: "embed" }];
  for (let i = 0; i < cfg.numLayers; i++) {
    for (const role of Object.keys(LAYER_TENSORS) as LayerTensor[]) {
      if (OPTIONAL[role] && !OPTIONAL[role](cfg)) continue;
      out.push({ name: layerTensor(i, role, cfg), shape: shapes[role], role });
    }
  }
  out.push({ name: FINAL_NORM, shape: [h], role: "finalNorm" });
  if (!cfg.tieWordEmbeddings) {
    out.push({ name: LM_HEAD, shape: [cfg.vocabSize, h], role: "lmHead" });
  }
  return out;
}

/** llama.cpp's name for a Hugging Face Llama tensor ("model.layers.3.mlp.up_proj.weight"). */
export function ggufTensorName(hfName: string, naming: TensorNaming): string {
  if (hfName === EMBED) return "token_embd.weight";
  if (hfName === FINAL_NORM) return "output_norm.weight";
  if (hfName === LM_HEAD) return "output.weight";
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hfName);
  const role = m &&
    (Object.keys(LAYER_TENSORS) as LayerTensor[]).find((t) =>
      hfPart(t, naming) === m[2] && suffixOf(t) === m[3] &&
      (naming.sandwichNorms || !SANDWICH_ONLY.includes(t))
    );
  if (!role) throw new Error(`no GGUF name for tensor ${hfName}`);
  return `blk.${m![1]}.${LAYER_TENSORS[role].gguf}.${m![3]}`;
}
