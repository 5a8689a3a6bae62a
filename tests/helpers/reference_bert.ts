// A float64 forward pass of a BERT-family encoder (BERT, XLM-RoBERTa, NomicBERT) straight from its
// config.json and model.safetensors, one input at a time (no packing, no batching): what the GPU
// encoder is checked against. Written from the transformers modelling code, not from the engine's:
// its own tensor names, its own GELU (exact erf), its own rotary.

import { join } from "node:path";
import { readSafetensorsHeader, readTensorF64 } from "../../engine/formats/safetensors.ts";

export interface ReferenceBert {
  hidden: number;
  /** The final hidden states of one input, [tokens][hidden]. */
  states(ids: number[], typeIds?: number[]): Float64Array[];
  /** Pooled (first, mean or last row), not normalised. */
  pooled(ids: number[], mode: "first" | "mean" | "last", typeIds?: number[]): Float64Array;
  /** Classifier logits (SequenceClassification models). */
  logits(ids: number[], typeIds?: number[]): Float64Array;
}

export async function loadReferenceBert(dir: string): Promise<ReferenceBert> {
  const cfg = JSON.parse(await Deno.readTextFile(join(dir, "config.json")));
  const header = await readSafetensorsHeader(join(dir, "model.safetensors"));
  const t = new Map<string, Float64Array>();
  for (const [name, info] of header) t.set(name, await readTensorF64(info));
  const get = (name: string) => {
    const v = t.get(name);
    if (!v) throw new Error(`reference: no tensor ${name}`);
    return v;
  };
  const arch: string = cfg.architectures[0];
  const nomic = cfg.model_type === "nomic_bert";
  const xlmr = cfg.model_type === "xlm-roberta";
  const H: number = nomic ? cfg.n_embd : cfg.hidden_size;
  const heads: number = nomic ? cfg.n_head : cfg.num_attention_heads;
  const layers: number = nomic ? cfg.n_layer : cfg.num_hidden_layers;
  const eps: number = nomic ? cfg.layer_norm_epsilon : cfg.layer_norm_eps;
  const hd = H / heads;
  const prefix = [...t.keys()].find((k) => k.endsWith("embeddings.word_embeddings.weight"))!
    .replace("embeddings.word_embeddings.weight", "");

  const linear = (x: Float64Array, w: Float64Array, b: Float64Array | null, out: number) => {
    const k = x.length;
    const y = new Float64Array(out);
    for (let o = 0; o < out; o++) {
      let s = b ? b[o] : 0;
      for (let i = 0; i < k; i++) s += w[o * k + i] * x[i];
      y[o] = s;
    }
    return y;
  };
  const lin = (x: Float64Array, name: string, out: number, bias = true) =>
    linear(x, get(`${name}.weight`), bias ? get(`${name}.bias`) : null, out);
  const layerNorm = (x: Float64Array, name: string) => {
    const g = get(`${name}.weight`), b = get(`${name}.bias`);
    const mean = x.reduce((a, v) => a + v, 0) / x.length;
    const variance = x.reduce((a, v) => a + (v - mean) ** 2, 0) / x.length;
    return x.map((v, i) => (v - mean) / Math.sqrt(variance + eps) * g[i] + b[i]);
  };
  const gelu = (v: number) =>
    cfg.hidden_act === "gelu_new"
      ? 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)))
      : 0.5 * v * (1 + erf(v / Math.SQRT2));
  const rotary = (v: Float64Array, pos: number) => {
    const rot = Math.floor(hd * (cfg.rotary_emb_fraction ?? 1));
    const half = rot / 2;
    const out = Float64Array.from(v);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < half; i++) {
        const theta = pos * Math.pow(cfg.rotary_emb_base, -2 * i / rot);
        const a = v[h * hd + i], b = v[h * hd + i + half];
        out[h * hd + i] = a * Math.cos(theta) - b * Math.sin(theta);
        out[h * hd + i + half] = b * Math.cos(theta) + a * Math.sin(theta);
      }
    }
    return out;
  };

  const states = (ids: number[], typeIds?: number[]): Float64Array[] => {
    const n = ids.length;
    const word = get(`${prefix}embeddings.word_embeddings.weight`);
    const types = get(`${prefix}embeddings.token_type_embeddings.weight`);
    const offset = xlmr ? cfg.pad_token_id + 1 : 0;
    let x = ids.map((id, i) => {
      const v = word.slice(id * H, (id + 1) * H);
      const type = typeIds?.[i] ?? 0;
      for (let d = 0; d < H; d++) v[d] += types[type * H + d];
      if (!nomic) {
        const pos = get(`${prefix}embeddings.position_embeddings.weight`);
        for (let d = 0; d < H; d++) v[d] += pos[(offset + i) * H + d];
      }
      return layerNorm(v, nomic ? "emb_ln" : `${prefix}embeddings.LayerNorm`);
    });
    for (let l = 0; l < layers; l++) {
      let q: Float64Array[], k: Float64Array[], v: Float64Array[];
      if (nomic) {
        const qkv = x.map((r) => lin(r, `encoder.layers.${l}.attn.Wqkv`, 3 * H, false));
        q = qkv.map((r, i) => rotary(r.slice(0, H), i));
        k = qkv.map((r, i) => rotary(r.slice(H, 2 * H), i));
        v = qkv.map((r) => r.slice(2 * H));
      } else {
        const a = `${prefix}encoder.layer.${l}.attention.self.`;
        q = x.map((r) => lin(r, a + "query", H));
        k = x.map((r) => lin(r, a + "key", H));
        v = x.map((r) => lin(r, a + "value", H));
      }
      const ctx = x.map(() => new Float64Array(H));
      for (let h = 0; h < heads; h++) {
        for (let i = 0; i < n; i++) {
          const s = k.map((kj) => {
            let dot = 0;
            for (let d = 0; d < hd; d++) dot += q[i][h * hd + d] * kj[h * hd + d];
            return dot / Math.sqrt(hd);
          });
          const max = Math.max(...s);
          const e = s.map((z) => Math.exp(z - max));
          const sum = e.reduce((a, b) => a + b, 0);
          for (let d = 0; d < hd; d++) {
            let acc = 0;
            for (let j = 0; j < n; j++) acc += e[j] * v[j][h * hd + d];
            ctx[i][h * hd + d] = acc / sum;
          }
        }
      }
      if (nomic) {
        const L = `encoder.layers.${l}.`;
        const I: number = cfg.n_inner;
        x = x.map((r, i) => {
          const attn = lin(ctx[i], L + "attn.out_proj", H, false);
          const h1 = layerNorm(r.map((z, d) => z + attn[d]), L + "norm1");
          const up = lin(h1, L + "mlp.fc11", I, false);
          const gate = lin(h1, L + "mlp.fc12", I, false);
          const act = up.map((u, j) => u * gate[j] / (1 + Math.exp(-gate[j])));
          const down = lin(act, L + "mlp.fc2", H, false);
          return layerNorm(h1.map((z, d) => z + down[d]), L + "norm2");
        });
      } else {
        const L = `${prefix}encoder.layer.${l}.`;
        const I: number = cfg.intermediate_size;
        x = x.map((r, i) => {
          const attn = lin(ctx[i], L + "attention.output.dense", H);
          const h1 = layerNorm(r.map((z, d) => z + attn[d]), L + "attention.output.LayerNorm");
          const up = lin(h1, L + "intermediate.dense", I).map(gelu);
          const down = lin(up, L + "output.dense", H);
          return layerNorm(h1.map((z, d) => z + down[d]), L + "output.LayerNorm");
        });
      }
    }
    return x;
  };

  const pooled = (ids: number[], mode: "first" | "mean" | "last", typeIds?: number[]) => {
    const s = states(ids, typeIds);
    if (mode === "first") return s[0];
    if (mode === "last") return s[s.length - 1];
    const out = new Float64Array(H);
    for (const r of s) for (let d = 0; d < H; d++) out[d] += r[d] / s.length;
    return out;
  };

  const logits = (ids: number[], typeIds?: number[]) => {
    const cls = states(ids, typeIds)[0];
    const labels: number = cfg.num_labels;
    if (arch === "BertForSequenceClassification") {
      const pooledOut = lin(cls, `${prefix}pooler.dense`, H).map(Math.tanh);
      return lin(pooledOut, "classifier", labels);
    }
    const dense = lin(cls, "classifier.dense", H).map(Math.tanh);
    return lin(dense, "classifier.out_proj", labels);
  };

  return { hidden: H, states, pooled, logits };
}

/** erf to double precision: its Taylor series near 0, Lentz's continued fraction for erfc beyond. */
export function erf(z: number): number {
  const a = Math.abs(z);
  if (a > 6) return Math.sign(z);
  if (a < 2.5) {
    let sum = 0;
    let term = a;
    for (let n = 0; n < 100; n++) {
      sum += term / (2 * n + 1);
      term *= -a * a / (n + 1);
    }
    return Math.sign(z) * 2 / Math.sqrt(Math.PI) * sum;
  }
  let f = a, c = a, d = 0;
  for (let n = 1; n < 200; n++) {
    d = 1 / (a + (n / 2) * d);
    c = a + (n / 2) / c;
    f *= c * d;
  }
  return Math.sign(z) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
}
