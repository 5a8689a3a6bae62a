// Writes small but complete Hugging Face encoder directories: BERT (WordPiece), XLM-RoBERTa
// (Unigram) and NomicBERT (WordPiece), as a base model or with a sequence-classification head,
// optionally with sentence-transformers' modules.json naming a Pooling mode. Random weights,
// deterministic from a seed (the tensors and config.json keys as each family's transformers class
// writes them). Tests and the embeddings bench use them; no model is downloaded.

import { join } from "node:path";
import {
  encodeTensor,
  numElements,
  type StDtype,
  writeSafetensors,
} from "../formats/safetensors.ts";
import {
  unigramTokenizerJson,
  unigramVocab,
  wordPieceTokenizerJson,
  wordPieceVocab,
} from "./tiny_encoder_tokenizers.ts";
import { gaussian, tensorSeed } from "./tiny_model.ts";

export type TinyEncoderFamily = "bert" | "xlm-roberta" | "nomic_bert";

export interface TinyEncoderSpec {
  family: TinyEncoderFamily;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  intermediateSize: number;
  /** Defaults to the tokenizer's vocabulary; larger pads the embedding (as real checkpoints do). */
  vocabSize?: number;
  /** Learned positions (BERT, XLM-R; XLM-R's first two are padding) or NomicBERT's n_positions. */
  maxPositions?: number;
  /** A SequenceClassification head with this many labels (not for nomic_bert). */
  numLabels?: number;
  /** BERT's hidden_act (default gelu). */
  hiddenAct?: "gelu" | "gelu_new";
  /** NomicBERT's rotary_emb_fraction (default 1). */
  rotaryFraction?: number;
  /** Writes modules.json and 1_Pooling/config.json with this mode (and a Normalize module). */
  pooling?: "cls" | "mean" | "last";
  dtype: StDtype;
  seed: number;
}

const ARCHITECTURES: Record<TinyEncoderFamily, [string, string]> = {
  bert: ["BertModel", "BertForSequenceClassification"],
  "xlm-roberta": ["XLMRobertaModel", "XLMRobertaForSequenceClassification"],
  nomic_bert: ["NomicBertModel", "NomicBertModel"],
};

export async function writeTinyEncoder(dir: string, spec: TinyEncoderSpec): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  const unigram = spec.family === "xlm-roberta";
  const tokenizerVocab = unigram ? unigramVocab().length : Object.keys(wordPieceVocab()).length;
  const vocab = spec.vocabSize ?? tokenizerVocab;
  if (vocab < tokenizerVocab) {
    throw new RangeError(`vocabSize ${vocab} < the tokenizer's ${tokenizerVocab}`);
  }
  if (spec.numLabels && spec.family === "nomic_bert") {
    throw new RangeError("NomicBERT has no classification head here");
  }
  const arch = ARCHITECTURES[spec.family][spec.numLabels ? 1 : 0];
  const maxPositions = spec.maxPositions ?? 128;
  const typeVocab = unigram ? 1 : 2;
  const config: Record<string, unknown> = spec.family === "nomic_bert"
    ? {
      architectures: [arch],
      model_type: "nomic_bert",
      n_embd: spec.hiddenSize,
      n_layer: spec.numLayers,
      n_head: spec.numHeads,
      n_inner: spec.intermediateSize,
      n_positions: maxPositions,
      vocab_size: vocab,
      type_vocab_size: typeVocab,
      layer_norm_epsilon: 1e-12,
      activation_function: "swiglu",
      rotary_emb_fraction: spec.rotaryFraction ?? 1,
      rotary_emb_base: 1000,
      rotary_emb_interleaved: false,
      qkv_proj_bias: false,
      mlp_fc1_bias: false,
      mlp_fc2_bias: false,
      prenorm: false,
      use_rms_norm: false,
      causal: false,
    }
    : {
      architectures: [arch],
      model_type: spec.family,
      hidden_size: spec.hiddenSize,
      num_hidden_layers: spec.numLayers,
      num_attention_heads: spec.numHeads,
      intermediate_size: spec.intermediateSize,
      hidden_act: spec.hiddenAct ?? "gelu",
      max_position_embeddings: maxPositions,
      type_vocab_size: typeVocab,
      vocab_size: vocab,
      layer_norm_eps: 1e-12,
      position_embedding_type: "absolute",
      pad_token_id: unigram ? 1 : 0,
      ...(spec.numLabels ? { num_labels: spec.numLabels } : {}),
    };
  config.torch_dtype = { F32: "float32", F16: "float16", BF16: "bfloat16" }[spec.dtype];
  await writeJson(join(dir, "config.json"), config);
  await writeJson(
    join(dir, "tokenizer.json"),
    unigram ? unigramTokenizerJson() : wordPieceTokenizerJson(),
  );
  await writeJson(join(dir, "tokenizer_config.json"), {
    model_max_length: unigram ? maxPositions - 2 : maxPositions,
  });
  if (spec.pooling) {
    await writeJson(join(dir, "modules.json"), [
      { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
      { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
      { idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" },
    ]);
    await Deno.mkdir(join(dir, "1_Pooling"), { recursive: true });
    await writeJson(join(dir, "1_Pooling", "config.json"), {
      word_embedding_dimension: spec.hiddenSize,
      pooling_mode_cls_token: spec.pooling === "cls",
      pooling_mode_mean_tokens: spec.pooling === "mean",
      pooling_mode_max_tokens: false,
      pooling_mode_lasttoken: spec.pooling === "last",
    });
  }
  const tensors = planTensors(spec, vocab, maxPositions, typeVocab).map(
    ({ name, shape, std, center }) => {
      const values = gaussian(tensorSeed(spec.seed, name), numElements(shape));
      for (let i = 0; i < values.length; i++) values[i] = center + std * values[i];
      return { name, dtype: spec.dtype, shape, data: encodeTensor(values, spec.dtype) };
    },
  );
  await writeSafetensors(join(dir, "model.safetensors"), tensors, { format: "pt" });
}

interface PlannedTensor {
  name: string;
  shape: number[];
  std: number;
  center: number;
}

/** Each tensor by its Hugging Face name; linear weights ~N(0, 1/fan_in), norms around 1. */
function planTensors(
  s: TinyEncoderSpec,
  vocab: number,
  positions: number,
  types: number,
): PlannedTensor[] {
  const H = s.hiddenSize;
  const I = s.intermediateSize;
  const out: PlannedTensor[] = [];
  const linear = (name: string, rows: number, cols: number, bias: boolean) => {
    out.push({ name: `${name}.weight`, shape: [rows, cols], std: 1 / Math.sqrt(cols), center: 0 });
    if (bias) out.push({ name: `${name}.bias`, shape: [rows], std: 0.2, center: 0 });
  };
  const norm = (name: string) => {
    out.push({ name: `${name}.weight`, shape: [H], std: 0.1, center: 1 });
    out.push({ name: `${name}.bias`, shape: [H], std: 0.1, center: 0 });
  };
  const base = s.numLabels ? (s.family === "bert" ? "bert." : "roberta.") : "";
  const table = (name: string, rows: number) =>
    out.push({ name: `${base}embeddings.${name}.weight`, shape: [rows, H], std: 1, center: 0 });
  table("word_embeddings", vocab);
  table("token_type_embeddings", types);
  if (s.family === "nomic_bert") {
    norm("emb_ln");
    for (let i = 0; i < s.numLayers; i++) {
      const l = `encoder.layers.${i}.`;
      linear(`${l}attn.Wqkv`, 3 * H, H, false);
      linear(`${l}attn.out_proj`, H, H, false);
      norm(`${l}norm1`);
      linear(`${l}mlp.fc11`, I, H, false);
      linear(`${l}mlp.fc12`, I, H, false);
      linear(`${l}mlp.fc2`, H, I, false);
      norm(`${l}norm2`);
    }
    return out;
  }
  table("position_embeddings", positions);
  norm(`${base}embeddings.LayerNorm`);
  for (let i = 0; i < s.numLayers; i++) {
    const l = `${base}encoder.layer.${i}.`;
    for (const p of ["query", "key", "value"]) linear(`${l}attention.self.${p}`, H, H, true);
    linear(`${l}attention.output.dense`, H, H, true);
    norm(`${l}attention.output.LayerNorm`);
    linear(`${l}intermediate.dense`, I, H, true);
    linear(`${l}output.dense`, H, I, true);
    norm(`${l}output.LayerNorm`);
  }
  if (s.numLabels) {
    if (s.family === "bert") {
      linear(`${base}pooler.dense`, H, H, true);
      linear("classifier", s.numLabels, H, true);
    } else {
      linear("classifier.dense", H, H, true);
      linear("classifier.out_proj", s.numLabels, H, true);
    }
  }
  return out;
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify(value, null, 2) + "\n");
}
