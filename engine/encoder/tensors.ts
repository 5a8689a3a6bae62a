// Which checkpoint tensors make each of an encoder's weights, by Hugging Face name, and their
// shapes. A weight made of several tensors is their rows stacked: BERT's q, k and v become one
// fused qkv matrix; NomicBERT's gate (fc12) and up (fc11) one SwiGLU matrix, gate rows first, as
// the matmul's glu mode reads it.

import type { EncoderConfig } from "./config.ts";

/** Rows of these tensors stacked, each [rows_i, cols]. */
export interface WeightSpec {
  names: string[];
  shape: [number, number] | [number];
}

export interface LayerWeights<T> {
  qkv: T;
  qkvBias: T | null;
  o: T;
  oBias: T | null;
  attnNormGain: T;
  attnNormBias: T;
  up: T;
  upBias: T | null;
  down: T;
  downBias: T | null;
  mlpNormGain: T;
  mlpNormBias: T;
}

export interface EncoderWeights<T> {
  word: T;
  position: T | null;
  tokenType: T | null;
  embNormGain: T;
  embNormBias: T;
  layers: LayerWeights<T>[];
  /** The classification head: dense (+tanh) on CLS, then out to numLabels. */
  headDense: T | null;
  headDenseBias: T | null;
  headOut: T | null;
  headOutBias: T | null;
}

/** Prefixes under which checkpoints save the base model ("bert." under a task head, ...). */
const PREFIXES = ["", "bert.", "roberta.", "model."];

/** The prefix under which `names` holds the base model, or null. */
export function basePrefix(names: Set<string>): string | null {
  const word = "embeddings.word_embeddings.weight";
  return PREFIXES.find((p) => names.has(p + word)) ?? null;
}

export function encoderWeightSpecs(c: EncoderConfig, prefix: string): EncoderWeights<WeightSpec> {
  const H = c.hiddenSize;
  const I = c.intermediateSize;
  const w = (names: string[], shape: [number, number] | [number]): WeightSpec => ({
    names: names.map((n) => prefix + n),
    shape,
  });
  const vec = (name: string, n = H) => w([name], [n]);
  const nomic = c.family === "nomic_bert";
  const layers = Array.from({ length: c.numLayers }, (_, i): LayerWeights<WeightSpec> => {
    if (nomic) {
      const l = `encoder.layers.${i}.`;
      return {
        qkv: w([`${l}attn.Wqkv.weight`], [3 * H, H]),
        qkvBias: c.attentionBias ? vec(`${l}attn.Wqkv.bias`, 3 * H) : null,
        o: w([`${l}attn.out_proj.weight`], [H, H]),
        oBias: c.attentionBias ? vec(`${l}attn.out_proj.bias`) : null,
        attnNormGain: vec(`${l}norm1.weight`),
        attnNormBias: vec(`${l}norm1.bias`),
        up: w([`${l}mlp.fc12.weight`, `${l}mlp.fc11.weight`], [2 * I, H]),
        upBias: null,
        down: w([`${l}mlp.fc2.weight`], [H, I]),
        downBias: c.mlpDownBias ? vec(`${l}mlp.fc2.bias`) : null,
        mlpNormGain: vec(`${l}norm2.weight`),
        mlpNormBias: vec(`${l}norm2.bias`),
      };
    }
    const l = `encoder.layer.${i}.`;
    const qkv = ["query", "key", "value"].map((p) => `${l}attention.self.${p}`);
    return {
      qkv: w(qkv.map((n) => `${n}.weight`), [3 * H, H]),
      qkvBias: w(qkv.map((n) => `${n}.bias`), [3 * H]),
      o: w([`${l}attention.output.dense.weight`], [H, H]),
      oBias: vec(`${l}attention.output.dense.bias`),
      attnNormGain: vec(`${l}attention.output.LayerNorm.weight`),
      attnNormBias: vec(`${l}attention.output.LayerNorm.bias`),
      up: w([`${l}intermediate.dense.weight`], [I, H]),
      upBias: vec(`${l}intermediate.dense.bias`, I),
      down: w([`${l}output.dense.weight`], [H, I]),
      downBias: vec(`${l}output.dense.bias`),
      mlpNormGain: vec(`${l}output.LayerNorm.weight`),
      mlpNormBias: vec(`${l}output.LayerNorm.bias`),
    };
  });
  const cls = c.classifier;
  // The head lives outside the base model's prefix.
  const head = (name: string, shape: [number, number] | [number]): WeightSpec => ({
    names: [name],
    shape,
  });
  return {
    word: w(["embeddings.word_embeddings.weight"], [c.vocabSize, H]),
    position: c.positionRows > 0
      ? w(["embeddings.position_embeddings.weight"], [c.positionRows, H])
      : null,
    tokenType: c.typeVocabSize > 0
      ? w(["embeddings.token_type_embeddings.weight"], [c.typeVocabSize, H])
      : null,
    embNormGain: vec(nomic ? "emb_ln.weight" : "embeddings.LayerNorm.weight"),
    embNormBias: vec(nomic ? "emb_ln.bias" : "embeddings.LayerNorm.bias"),
    layers,
    headDense: !cls
      ? null
      : cls.head === "bert"
      ? w(["pooler.dense.weight"], [H, H])
      : head("classifier.dense.weight", [H, H]),
    headDenseBias: !cls
      ? null
      : cls.head === "bert"
      ? vec("pooler.dense.bias")
      : head("classifier.dense.bias", [H]),
    headOut: !cls
      ? null
      : head(cls.head === "bert" ? "classifier.weight" : "classifier.out_proj.weight", [
        cls.numLabels,
        H,
      ]),
    headOutBias: !cls
      ? null
      : head(cls.head === "bert" ? "classifier.bias" : "classifier.out_proj.bias", [cls.numLabels]),
  };
}

/** Applies `f` to every weight of `w`, keeping its structure (nulls stay null). */
export function mapWeights<A, B>(w: EncoderWeights<A>, f: (a: A) => B): EncoderWeights<B> {
  const g = (a: A | null) => a === null ? null : f(a);
  return {
    word: f(w.word),
    position: g(w.position),
    tokenType: g(w.tokenType),
    embNormGain: f(w.embNormGain),
    embNormBias: f(w.embNormBias),
    layers: w.layers.map((l) => ({
      qkv: f(l.qkv),
      qkvBias: g(l.qkvBias),
      o: f(l.o),
      oBias: g(l.oBias),
      attnNormGain: f(l.attnNormGain),
      attnNormBias: f(l.attnNormBias),
      up: f(l.up),
      upBias: g(l.upBias),
      down: f(l.down),
      downBias: g(l.downBias),
      mlpNormGain: f(l.mlpNormGain),
      mlpNormBias: f(l.mlpNormBias),
    })),
    headDense: g(w.headDense),
    headDenseBias: g(w.headDenseBias),
    headOut: g(w.headOut),
    headOutBias: g(w.headOutBias),
  };
}
