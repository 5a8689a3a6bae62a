// A plain float64 Llama forward pass on the CPU with Hugging Face semantics: the oracle for GPU
// logits. Written for obviousness, not speed: one token at a time, full causal attention over
// the tokens before it, no caches shared between calls. The other families' options, as
// transformers' Qwen2, Qwen3, Mistral, SmolLM3 and Phi3 models apply them: q, k, v biases after
// the projections, per-head q and k RMSNorm before RoPE, a sliding window (positions t - W + 1..t),
// no RoPE on SmolLM3's no_rope_layers, RoPE on the first rotaryDim values of a head only (Phi-3's
// partial rotary: rotate-half within them, the rest passed through) with cos and sin scaled by
// LongRoPE's attention factor. Phi-3's fused tensors are read through the views the model's
// opening made (formats/fused_tensors.ts), like every other name. Gemma 3, as transformers'
// Gemma3ForCausalLM: the embedding times √hidden, every norm x·(1 + w), a norm of attention's and
// of the MLP's output before each joins the residual, GELU-tanh gating, q·k scaled by
// query_pre_attn_scalar^-½, and local layers with a window and RoPE of their own base (unscaled).

import type { ModelFiles } from "../../engine/formats/model_files.ts";
import { ropeAttentionScale, ropeInvFreq } from "../../engine/model/rope_freqs.ts";
import { readTensorF64 } from "../../engine/formats/safetensors.ts";
import { type LayerTensor, layerTensor } from "../../engine/model/tensors.ts";

export interface ReferenceOptions {
  /** Position of ids[0] (default 0): positions are positionOffset + index. */
  positionOffset?: number;
  /**
   * The context the model is served with (EngineInfo.maxContext), which picks LongRoPE's short
   * or long factors as the engine does (model/rope_freqs.ts); default max_position_embeddings.
   */
  context?: number;
}

/** Raw logits (vocabSize values) at every position of `ids`. */
export async function referenceForward(
  files: ModelFiles,
  ids: number[],
  options: ReferenceOptions = {},
): Promise<Float64Array[]> {
  const w = await loadWeights(files);
  return (await referenceFinalHidden(files, ids, options)).map((x) => matVec(w.lmHead, x));
}

/** The LM head's rows `ids` (its logits of those ids are these rows · the final hidden state). */
export async function referenceLmHeadRows(
  files: ModelFiles,
  ids: number[],
): Promise<Float64Array[]> {
  const { lmHead } = await loadWeights(files);
  return ids.map((id) => lmHead.data.slice(id * lmHead.cols, (id + 1) * lmHead.cols));
}

/** The final-normed hidden state (what the LM head reads) at every position of `ids`. */
export async function referenceFinalHidden(
  files: ModelFiles,
  ids: number[],
  { positionOffset = 0, context }: ReferenceOptions = {},
): Promise<Float64Array[]> {
  const cfg = files.config;
  const w = await loadWeights(files);
  const globalFreq = ropeInvFreq(cfg, context);
  const local = cfg.localLayers;
  const localFreq = local
    ? ropeInvFreq({ ...cfg, ropeTheta: local.ropeTheta, ropeScaling: null }, context)
    : globalFreq;
  const ropeScale = ropeAttentionScale(cfg);
  const { hiddenSize: h, numHeads, numKvHeads, headDim, numLayers } = cfg;
  const group = numHeads / numKvHeads;

  // Residual stream per position.
  const xs = ids.map((id) => {
    if (!Number.isInteger(id) || id < 0 || id >= cfg.vocabSize) {
      throw new RangeError(`bad id ${id}`);
    }
    return w.embed.slice(id * h, (id + 1) * h).map((v) => v * cfg.embedScale);
  });

  for (let l = 0; l < numLayers; l++) {
    const L = w.layers[l];
    const isLocal = local?.layers[l] ?? false;
    const invFreq = isLocal ? localFreq : globalFreq;
    const window = isLocal ? local!.window : cfg.slidingWindow ?? Infinity;
    const keys: Float64Array[] = [];
    const values: Float64Array[] = [];
    const queries: Float64Array[] = [];
    for (let t = 0; t < xs.length; t++) {
      const normed = rmsNorm(xs[t], L.inputNorm, cfg.rmsNormEps);
      const q = matVec(L.q, normed);
      const k = matVec(L.k, normed);
      const v = matVec(L.v, normed);
      if (L.bias) {
        addInPlace(q, L.bias.q);
        addInPlace(k, L.bias.k);
        addInPlace(v, L.bias.v);
      }
      const rope = (v: Float64Array, head: number) => {
        if (!cfg.ropeLayers[l]) return;
        applyRope(v, head * headDim, cfg.rotaryDim, positionOffset + t, invFreq, ropeScale);
      };
      for (let hd = 0; hd < numHeads; hd++) {
        if (L.qkNorm) normHeadInPlace(q, hd * headDim, headDim, L.qkNorm.q, cfg.rmsNormEps);
        rope(q, hd);
      }
      for (let hd = 0; hd < numKvHeads; hd++) {
        if (L.qkNorm) normHeadInPlace(k, hd * headDim, headDim, L.qkNorm.k, cfg.rmsNormEps);
        rope(k, hd);
      }
      queries.push(q);
      keys.push(k);
      values.push(v);
    }
    for (let t = 0; t < xs.length; t++) {
      const attn = new Float64Array(numHeads * headDim);
      for (let hd = 0; hd < numHeads; hd++) {
        const kvOff = Math.floor(hd / group) * headDim; // GQA: consecutive heads share a kv head
        const qOff = hd * headDim;
        // Causal: positions first..t only (first = 0 without a window).
        const first = Math.max(0, t - window + 1);
        const scores = new Float64Array(t + 1 - first);
        for (let s = first; s <= t; s++) {
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += queries[t][qOff + d] * keys[s][kvOff + d];
          scores[s - first] = dot * cfg.attentionScale;
        }
        softmaxInPlace(scores);
        for (let s = first; s <= t; s++) {
          for (let d = 0; d < headDim; d++) {
            attn[qOff + d] += scores[s - first] * values[s][kvOff + d];
          }
        }
      }
      const attnOut = matVec(L.o, attn);
      addInPlace(xs[t], L.attnOutNorm ? rmsNorm(attnOut, L.attnOutNorm, cfg.rmsNormEps) : attnOut);

      const normed = rmsNorm(xs[t], L.postNorm, cfg.rmsNormEps);
      const gate = matVec(L.gate, normed);
      const up = matVec(L.up, normed);
      const act = new Float64Array(gate.length);
      const gateAct = cfg.activation === "gelu_tanh" ? geluTanh : silu;
      for (let i = 0; i < act.length; i++) act[i] = gateAct(gate[i]) * up[i];
      const mlpOut = matVec(L.down, act);
      addInPlace(xs[t], L.mlpOutNorm ? rmsNorm(mlpOut, L.mlpOutNorm, cfg.rmsNormEps) : mlpOut);
    }
  }
  return xs.map((x) => rmsNorm(x, w.finalNorm, cfg.rmsNormEps));
}

interface Matrix {
  rows: number;
  cols: number;
  data: Float64Array;
}

interface LayerWeights {
  inputNorm: Float64Array;
  q: Matrix;
  k: Matrix;
  v: Matrix;
  o: Matrix;
  postNorm: Float64Array;
  gate: Matrix;
  up: Matrix;
  down: Matrix;
  /** Qwen2. */
  bias?: { q: Float64Array; k: Float64Array; v: Float64Array };
  /** Qwen3, Gemma 3: per-head norm weights of q and of k. */
  qkNorm?: { q: Float64Array; k: Float64Array };
  /** Gemma 3: the norms of attention's and the MLP's outputs. */
  attnOutNorm?: Float64Array;
  mlpOutNorm?: Float64Array;
}

interface Weights {
  embed: Float64Array;
  layers: LayerWeights[];
  finalNorm: Float64Array;
  lmHead: Matrix;
}

const cache = new WeakMap<ModelFiles, Promise<Weights>>();

function loadWeights(files: ModelFiles): Promise<Weights> {
  let w = cache.get(files);
  if (!w) {
    w = readWeights(files);
    cache.set(files, w);
  }
  return w;
}

async function readWeights(files: ModelFiles): Promise<Weights> {
  const cfg = files.config;
  const vector = (name: string) => readTensorF64(info(files, name));
  // Gemma's checkpoints hold w of a norm scaling by 1 + w.
  const norm = async (name: string) => (await vector(name)).map((v) => v + cfg.normOffset);
  const matrix = async (name: string): Promise<Matrix> => {
    const t = info(files, name);
    return { rows: t.shape[0], cols: t.shape[1], data: await readTensorF64(t) };
  };
  const layers: LayerWeights[] = [];
  for (let i = 0; i < files.config.numLayers; i++) {
    const p = `model.layers.${i}`;
    const named = (tensor: LayerTensor) => layerTensor(i, tensor, cfg);
    layers.push({
      inputNorm: await norm(`${p}.input_layernorm.weight`),
      q: await matrix(`${p}.self_attn.q_proj.weight`),
      k: await matrix(`${p}.self_attn.k_proj.weight`),
      v: await matrix(`${p}.self_attn.v_proj.weight`),
      o: await matrix(`${p}.self_attn.o_proj.weight`),
      postNorm: await norm(named("mlpNorm")),
      gate: await matrix(`${p}.mlp.gate_proj.weight`),
      up: await matrix(`${p}.mlp.up_proj.weight`),
      down: await matrix(`${p}.mlp.down_proj.weight`),
      ...(files.config.qkvBias
        ? {
          bias: {
            q: await vector(`${p}.self_attn.q_proj.bias`),
            k: await vector(`${p}.self_attn.k_proj.bias`),
            v: await vector(`${p}.self_attn.v_proj.bias`),
          },
        }
        : {}),
      ...(files.config.qkNorm
        ? {
          qkNorm: {
            q: await norm(`${p}.self_attn.q_norm.weight`),
            k: await norm(`${p}.self_attn.k_norm.weight`),
          },
        }
        : {}),
      ...(files.config.sandwichNorms
        ? {
          attnOutNorm: await norm(named("attnOutNorm")),
          mlpOutNorm: await norm(named("mlpOutNorm")),
        }
        : {}),
    });
  }
  const embed = await matrix("model.embed_tokens.weight");
  return {
    embed: embed.data,
    layers,
    finalNorm: await norm("model.norm.weight"),
    lmHead: files.config.tieWordEmbeddings ? embed : await matrix("lm_head.weight"),
  };
}

function info(files: ModelFiles, name: string) {
  const t = files.tensors.get(name);
  if (!t) throw new Error(`reference: missing tensor ${name}`);
  return t;
}

/** x · rsqrt(mean(x²) + eps) · w */
export function rmsNorm(x: Float64Array, w: Float64Array, eps: number): Float64Array {
  let sumSq = 0;
  for (const v of x) sumSq += v * v;
  const scale = 1 / Math.sqrt(sumSq / x.length + eps);
  return x.map((v, i) => v * scale * w[i]);
}

/** Weight rows are output features ([out, in], as nn.Linear stores them). */
function matVec(m: Matrix, x: Float64Array): Float64Array {
  if (x.length !== m.cols) throw new Error(`matVec: ${m.rows}x${m.cols} times ${x.length}`);
  const out = new Float64Array(m.rows);
  for (let r = 0; r < m.rows; r++) {
    let acc = 0;
    const base = r * m.cols;
    for (let c = 0; c < m.cols; c++) acc += m.data[base + c] * x[c];
    out[r] = acc;
  }
  return out;
}

/** RMSNorm of one head (values offset..offset + headDim) in place, as Qwen3's q_norm and k_norm. */
function normHeadInPlace(
  v: Float64Array,
  offset: number,
  headDim: number,
  w: Float64Array,
  eps: number,
): void {
  v.set(rmsNorm(v.subarray(offset, offset + headDim), w, eps), offset);
}

/**
 * HF's rotate_half RoPE on the first `rotaryDim` values of one head (in place): value i pairs with
 * i + rotaryDim/2, both rotated by the angle pos · invFreq[i], cos and sin scaled by `scale`.
 */
export function applyRope(
  v: Float64Array,
  offset: number,
  rotaryDim: number,
  pos: number,
  invFreq: Float64Array,
  scale = 1,
): void {
  const half = rotaryDim / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos * invFreq[i];
    const cos = Math.cos(angle) * scale;
    const sin = Math.sin(angle) * scale;
    const a = v[offset + i];
    const b = v[offset + i + half];
    v[offset + i] = a * cos - b * sin;
    v[offset + i + half] = b * cos + a * sin;
  }
}

function softmaxInPlace(x: Float64Array): void {
  let max = -Infinity;
  for (const v of x) max = Math.max(max, v);
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    x[i] = Math.exp(x[i] - max);
    sum += x[i];
  }
  for (let i = 0; i < x.length; i++) x[i] /= sum;
}

function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

/** GELU's tanh approximation (transformers' gelu_pytorch_tanh). */
function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

function addInPlace(x: Float64Array, y: Float64Array): void {
  for (let i = 0; i < x.length; i++) x[i] += y[i];
}
