// What an encoder is, read from config.json: BERT (BertModel, BertForSequenceClassification),
// XLM-RoBERTa (its positions start past padding_idx) and NomicBERT (rotary positions, SwiGLU,
// fused Wqkv, its own key names). Every family is a post-LayerNorm stack of bidirectional
// attention and an MLP; the differences are options here, not code paths in the forward pass.

import { ModelLoadError } from "../model/errors.ts";

export type EncoderFamily = "bert" | "xlm-roberta" | "nomic_bert";
/** gelu (erf), gelu_tanh, or swiglu (a gated MLP: silu(x·Wgate) · x·Wup). */
export type EncoderActivation = "gelu" | "gelu_tanh" | "swiglu";

export interface EncoderClassifier {
  numLabels: number;
  /** bert: pooler (dense + tanh on CLS) then classifier; roberta: classifier.dense + tanh, out_proj. */
  head: "bert" | "roberta";
}

export interface EncoderConfig {
  family: EncoderFamily;
  architecture: string;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  intermediateSize: number;
  vocabSize: number;
  /** Learned position rows (0 for rotary models). */
  positionRows: number;
  /** Position of an input's first token (XLM-R: padding_idx + 1; else 0). */
  positionOffset: number;
  typeVocabSize: number;
  layerNormEps: number;
  activation: EncoderActivation;
  /** Rotary dims per head (0: learned absolute positions) and base. */
  rotaryDim: number;
  rotaryBase: number;
  /** Biases on q/k/v and the attention output; on the MLP's up (gate) and down projections. */
  attentionBias: boolean;
  mlpUpBias: boolean;
  mlpDownBias: boolean;
  /** The longest input, in tokens (positions available, or NomicBERT's n_positions). */
  maxInputTokens: number;
  classifier: EncoderClassifier | null;
}

const ENCODER_ARCHITECTURES = [
  "BertModel",
  "BertForSequenceClassification",
  "XLMRobertaModel",
  "XLMRobertaForSequenceClassification",
  "NomicBertModel",
];

/** Whether config.json describes an encoder this engine runs (by architectures, else model_type). */
export function isEncoderConfig(json: Record<string, unknown>): boolean {
  const archs = json.architectures;
  if (Array.isArray(archs) && archs.length > 0) {
    return archs.some((a) => ENCODER_ARCHITECTURES.includes(String(a)));
  }
  return ["bert", "xlm-roberta", "nomic_bert"].includes(String(json.model_type));
}

export function parseEncoderConfig(json: Record<string, unknown>, file: string): EncoderConfig {
  const num = (key: string, fallback?: number): number => {
    const v = json[key] ?? fallback;
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new ModelLoadError(file, `${key} is missing or not a number`);
    }
    return v;
  };
  const archs = Array.isArray(json.architectures) ? json.architectures.map(String) : [];
  const modelType = String(json.model_type ?? "");
  const architecture = archs.find((a) => ENCODER_ARCHITECTURES.includes(a)) ??
    { bert: "BertModel", "xlm-roberta": "XLMRobertaModel", nomic_bert: "NomicBertModel" }[
      modelType
    ];
  if (!architecture) {
    throw new ModelLoadError(
      file,
      `not an encoder this engine runs (${archs.join(", ") || modelType})`,
    );
  }
  const family: EncoderFamily = architecture.startsWith("Nomic")
    ? "nomic_bert"
    : architecture.startsWith("XLMRoberta")
    ? "xlm-roberta"
    : "bert";
  const classifier = architecture.endsWith("ForSequenceClassification")
    ? { numLabels: numLabels(json), head: family === "bert" ? "bert" as const : "roberta" as const }
    : null;

  if (family === "nomic_bert") {
    const hiddenSize = num("n_embd");
    const numHeads = num("n_head");
    const headDim = hiddenSize / numHeads;
    const fraction = num("rotary_emb_fraction", 1);
    const rotaryDim = Math.floor(headDim * fraction);
    if (json.rotary_emb_interleaved === true) {
      throw new ModelLoadError(file, "interleaved rotary embeddings are not supported");
    }
    if (json.prenorm === true || json.use_rms_norm === true) {
      throw new ModelLoadError(file, "only post-LayerNorm NomicBERT is supported");
    }
    const act = String(json.activation_function ?? "swiglu");
    if (act !== "swiglu") throw new ModelLoadError(file, `activation ${act} is not supported`);
    if (rotaryDim <= 0 || rotaryDim % 2 !== 0) {
      throw new ModelLoadError(file, `rotary dims ${rotaryDim} must be even and positive`);
    }
    return {
      family,
      architecture,
      hiddenSize,
      numLayers: num("n_layer"),
      numHeads,
      headDim,
      intermediateSize: num("n_inner", 4 * hiddenSize),
      vocabSize: num("vocab_size"),
      positionRows: 0,
      positionOffset: 0,
      typeVocabSize: num("type_vocab_size", 2),
      layerNormEps: num("layer_norm_epsilon", 1e-12),
      activation: "swiglu",
      rotaryDim,
      rotaryBase: num("rotary_emb_base", 10000),
      attentionBias: json.qkv_proj_bias !== false,
      mlpUpBias: json.mlp_fc1_bias !== false,
      mlpDownBias: json.mlp_fc2_bias !== false,
      maxInputTokens: num("n_positions", 2048),
      classifier: null,
    };
  }

  const hiddenSize = num("hidden_size");
  const numHeads = num("num_attention_heads");
  const positionRows = num("max_position_embeddings");
  const positionOffset = family === "xlm-roberta" ? num("pad_token_id", 1) + 1 : 0;
  const act = String(json.hidden_act ?? "gelu");
  const activation: EncoderActivation = act === "gelu"
    ? "gelu"
    : ["gelu_new", "gelu_pytorch_tanh", "gelu_fast"].includes(act)
    ? "gelu_tanh"
    : (() => {
      throw new ModelLoadError(file, `hidden_act ${act} is not supported`);
    })();
  if (json.position_embedding_type !== undefined && json.position_embedding_type !== "absolute") {
    throw new ModelLoadError(
      file,
      `position_embedding_type ${json.position_embedding_type} is not supported`,
    );
  }
  return {
    family,
    architecture,
    hiddenSize,
    numLayers: num("num_hidden_layers"),
    numHeads,
    headDim: hiddenSize / numHeads,
    intermediateSize: num("intermediate_size"),
    vocabSize: num("vocab_size"),
    positionRows,
    positionOffset,
    typeVocabSize: num("type_vocab_size", 2),
    layerNormEps: num("layer_norm_eps", 1e-12),
    activation,
    rotaryDim: 0,
    rotaryBase: 0,
    attentionBias: true,
    mlpUpBias: true,
    mlpDownBias: true,
    maxInputTokens: positionRows - positionOffset,
    classifier,
  };
}

/** num_labels, else the size of id2label, else 2 (transformers' default). */
function numLabels(json: Record<string, unknown>): number {
  if (typeof json.num_labels === "number") return json.num_labels;
  if (json.id2label && typeof json.id2label === "object") {
    return Object.keys(json.id2label).length;
  }
  return 2;
}
