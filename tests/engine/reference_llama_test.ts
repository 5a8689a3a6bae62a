// The float64 reference forward pass is the oracle for GPU logits, so it is tested on properties
// that any correct Llama forward must have and that typical mistakes break: causality, GQA head
// sharing, tied embeddings, head layout, RoPE depending only on relative position, residual
// connections, dtype decoding; and the other families' options: Qwen2's biases (zero ones change
// nothing), Qwen3's q/k norms (scale-invariance of q and k), Mistral's window (a receptive field
// of layers × (W - 1) positions). Plus: generated models decode to varied tokens, not one repeated.

import { join } from "node:path";
import { assert, assertEquals } from "../helpers/testing.ts";
import { assertClose, relativeError } from "../helpers/compare.ts";
import { rng, testSeed } from "../helpers/random.ts";
import { applyRope, referenceForward, rmsNorm } from "../helpers/reference_llama.ts";
import type { ModelFiles } from "../../engine/formats/model_files.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import {
  decodeTensor,
  encodeTensor,
  readTensorF64,
  type StDtype,
  writeSafetensors,
} from "../../engine/formats/safetensors.ts";
import { DEMO_SPEC } from "../../engine/sources/demo.ts";
import { type TinyModelSpec, writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { Tokenizer } from "../../engine/text/tokenizer.ts";

const GQA: TinyModelSpec = {
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: false,
  dtype: "F32",
  vocabSize: 300,
  seed: 5,
};

interface Dense {
  shape: number[];
  values: Float64Array;
}

const tempDirs: string[] = [];

async function tinyModel(spec: TinyModelSpec): Promise<ModelFiles> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-ref-test-" });
  tempDirs.push(dir);
  await writeTinyModel(dir, spec);
  return await openModelDir(dir);
}

/** A copy of `files` with config.json and the weights edited, written as `dtype`. */
async function derive(
  files: ModelFiles,
  edit: { config?: (c: any) => void; tensors?: (t: Map<string, Dense>) => void; dtype?: StDtype },
): Promise<ModelFiles> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-ref-test-" });
  tempDirs.push(dir);
  for (const name of ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]) {
    await Deno.copyFile(join(files.dir, name), join(dir, name));
  }
  const config = JSON.parse(await Deno.readTextFile(join(files.dir, "config.json")));
  edit.config?.(config);
  await Deno.writeTextFile(join(dir, "config.json"), JSON.stringify(config));
  const tensors = new Map<string, Dense>();
  for (const [name, info] of files.tensors) {
    tensors.set(name, { shape: info.shape, values: await readTensorF64(info) });
  }
  edit.tensors?.(tensors);
  const dtype = edit.dtype ?? "F32";
  await writeSafetensors(
    join(dir, "model.safetensors"),
    [...tensors].map(([name, t]) => ({
      name,
      dtype,
      shape: t.shape,
      data: encodeTensor(t.values, dtype),
    })),
  );
  return await openModelDir(dir);
}

/** Row blocks of a [rows, cols] matrix, `block` rows each, reordered: out block i = in block from[i]. */
function permuteRowBlocks(t: Dense, block: number, from: number[]): Dense {
  const cols = t.shape[1];
  const out = new Float64Array(from.length * block * cols);
  from.forEach((src, dst) => {
    out.set(t.values.subarray(src * block * cols, (src + 1) * block * cols), dst * block * cols);
  });
  return { shape: [from.length * block, cols], values: out };
}

/** Column blocks of a [rows, cols] matrix reordered the same way. */
function permuteColBlocks(t: Dense, block: number, from: number[]): Dense {
  const [rows, cols] = t.shape;
  const out = new Float64Array(t.values.length);
  for (let r = 0; r < rows; r++) {
    from.forEach((src, dst) => {
      for (let c = 0; c < block; c++) {
        out[r * cols + dst * block + c] = t.values[r * cols + src * block + c];
      }
    });
  }
  return { shape: t.shape, values: out };
}

function randomIds(next: () => number, n: number, vocab: number): number[] {
  return Array.from({ length: n }, () => Math.floor(next() * vocab));
}

function assertSameLogits(got: Float64Array[], want: Float64Array[], bound: number, what: string) {
  assertEquals(got.length, want.length);
  got.forEach((g, i) => assertClose(g, want[i], bound, `${what} at position ${i}`));
}

Deno.test("reference forward", async (t) => {
  const seed = testSeed();
  const next = rng(seed);
  const note = `(seed ${seed})`;
  try {
    const gqa = await tinyModel(GQA);
    const ids = randomIds(next, 12, GQA.vocabSize!);
    const base = await referenceForward(gqa, ids);

    await t.step("logits are finite and spread out", () => {
      assertEquals(base.length, ids.length);
      for (const row of base) {
        assertEquals(row.length, GQA.vocabSize);
        assert(row.every(Number.isFinite));
        const mean = row.reduce((a, b) => a + b, 0) / row.length;
        const std = Math.sqrt(row.reduce((a, b) => a + (b - mean) ** 2, 0) / row.length);
        assert(std > 1 && std < 10, `logit std ${std} ${note}`);
      }
    });

    await t.step("causal: changing later tokens leaves earlier logits alone", async () => {
      // Every later token moved by a nonzero offset: random ids could draw position 6's own.
      const V = GQA.vocabSize!;
      const changed = [
        ...ids.slice(0, 6),
        ...ids.slice(6).map((id) => (id + 1 + Math.floor(next() * (V - 1))) % V),
      ];
      const other = await referenceForward(gqa, changed);
      assertSameLogits(other.slice(0, 6), base.slice(0, 6), 1e-12, `prefix ${note}`);
      assert(relativeError(other[6], base[6]).maxRelError > 1e-3, "later positions must change");
      // And a prefix run alone gives the same logits as inside the longer run.
      assertSameLogits(
        await referenceForward(gqa, ids.slice(0, 5)),
        base.slice(0, 5),
        1e-12,
        `short ${note}`,
      );
    });

    await t.step("GQA and MQA equal MHA with the kv heads repeated", async () => {
      for (const kvHeads of [2, 1]) {
        const shared = kvHeads === 2 ? gqa : await tinyModel({ ...GQA, numKvHeads: 1 });
        const group = GQA.numHeads / kvHeads;
        const headDim = GQA.hiddenSize / GQA.numHeads;
        // transformers' repeat_kv: query head h reads kv head floor(h / group).
        const from = Array.from({ length: GQA.numHeads }, (_, h) => Math.floor(h / group));
        const mha = await derive(shared, {
          config: (c) => (c.num_key_value_heads = GQA.numHeads),
          tensors: (ts) => {
            for (let l = 0; l < GQA.numLayers; l++) {
              for (const p of ["k_proj", "v_proj"]) {
                const name = `model.layers.${l}.self_attn.${p}.weight`;
                ts.set(name, permuteRowBlocks(ts.get(name)!, headDim, from));
              }
            }
          },
        });
        assertEquals(mha.config.numKvHeads, GQA.numHeads);
        const want = kvHeads === 2 ? base : await referenceForward(shared, ids);
        assertSameLogits(await referenceForward(mha, ids), want, 1e-12, `kv=${kvHeads} ${note}`);
      }
    });

    await t.step("swapping heads consistently in q, k, v and o changes nothing", async () => {
      const headDim = GQA.hiddenSize / GQA.numHeads;
      // Swap the two kv heads together with their query groups, and the two queries of a group.
      const kvFrom = [1, 0];
      const qFrom = [3, 2, 0, 1];
      const swapped = await derive(gqa, {
        tensors: (ts) => {
          for (let l = 0; l < GQA.numLayers; l++) {
            const p = `model.layers.${l}.self_attn`;
            ts.set(
              `${p}.q_proj.weight`,
              permuteRowBlocks(ts.get(`${p}.q_proj.weight`)!, headDim, qFrom),
            );
            ts.set(
              `${p}.k_proj.weight`,
              permuteRowBlocks(ts.get(`${p}.k_proj.weight`)!, headDim, kvFrom),
            );
            ts.set(
              `${p}.v_proj.weight`,
              permuteRowBlocks(ts.get(`${p}.v_proj.weight`)!, headDim, kvFrom),
            );
            ts.set(
              `${p}.o_proj.weight`,
              permuteColBlocks(ts.get(`${p}.o_proj.weight`)!, headDim, qFrom),
            );
          }
        },
      });
      assertSameLogits(await referenceForward(swapped, ids), base, 1e-10, `heads ${note}`);
    });

    await t.step("tied embeddings equal an untied head that copies them", async () => {
      const tied = await tinyModel({ ...GQA, tied: true });
      const untied = await derive(tied, {
        config: (c) => (c.tie_word_embeddings = false),
        tensors: (ts) => ts.set("lm_head.weight", ts.get("model.embed_tokens.weight")!),
      });
      assertSameLogits(
        await referenceForward(untied, ids),
        await referenceForward(tied, ids),
        1e-12,
        note,
      );
      // …and an untied model really reads lm_head, not the embeddings.
      const retied = await derive(gqa, {
        config: (c) => (c.tie_word_embeddings = true),
        tensors: (ts) => ts.delete("lm_head.weight"),
      });
      assert(relativeError((await referenceForward(retied, ids))[0], base[0]).maxRelError > 1e-3);
    });

    await t.step(
      "RoPE depends on relative positions only, and it does depend on them",
      async () => {
        const shifted = await referenceForward(gqa, ids, { positionOffset: 37 });
        assertSameLogits(shifted, base, 1e-9, `shifted ${note}`);
        const otherTheta = await derive(gqa, { config: (c) => (c.rope_theta = 100) });
        const moved = await referenceForward(otherTheta, ids);
        assertSameLogits(moved.slice(0, 1), base.slice(0, 1), 1e-12, "position 0 is not rotated");
        assert(
          relativeError(moved[5], base[5]).maxRelError > 1e-3,
          "theta must matter after position 0",
        );
        const scaled = await derive(gqa, {
          config: (c) => (c.rope_scaling = { rope_type: "linear", factor: 4 }),
        });
        assert(relativeError((await referenceForward(scaled, ids))[5], base[5]).maxRelError > 1e-3);
      },
    );

    await t.step("a layer whose outputs are zero is an identity (residuals)", async () => {
      const last = GQA.numLayers - 1;
      const zeroed = await derive(gqa, {
        tensors: (ts) => {
          for (const p of ["self_attn.o_proj", "mlp.down_proj"]) {
            const tensor = ts.get(`model.layers.${last}.${p}.weight`)!;
            ts.set(`model.layers.${last}.${p}.weight`, {
              ...tensor,
              values: tensor.values.map(() => 0),
            });
          }
        },
      });
      const shorter = await derive(gqa, {
        config: (c) => (c.num_hidden_layers = last),
        tensors: (ts) => {
          for (const name of [...ts.keys()]) {
            if (name.startsWith(`model.layers.${last}.`)) ts.delete(name);
          }
        },
      });
      assertSameLogits(
        await referenceForward(zeroed, ids),
        await referenceForward(shorter, ids),
        1e-12,
        note,
      );
    });

    await t.step("F16 and BF16 weights decode to the values F32 holds", async () => {
      for (const dtype of ["F16", "BF16"] as const) {
        const round = (ts: Map<string, Dense>) => {
          for (const [name, t] of ts) {
            ts.set(name, { ...t, values: decodeTensor(encodeTensor(t.values, dtype), dtype) });
          }
        };
        const asF32 = await derive(gqa, { tensors: round });
        const asHalf = await derive(gqa, { tensors: round, dtype });
        assertEquals([...asHalf.tensors.values()][0].dtype, dtype);
        const want = await referenceForward(asF32, ids);
        assertSameLogits(await referenceForward(asHalf, ids), want, 0, `${dtype} ${note}`);
        assert(
          relativeError(want[3], base[3]).maxRelError > 0,
          "rounding must have changed something",
        );
      }
    });

    /** `gqa` as another family (same tensors, plus `extra`). */
    const asFamily = (
      type: string,
      cls: string,
      fields: Record<string, unknown>,
      extra?: (t: Map<string, Dense>) => void,
    ) =>
      derive(gqa, {
        config: (c) => Object.assign(c, { architectures: [cls], model_type: type }, fields),
        tensors: extra,
      });
    const kvDim = GQA.numKvHeads * (GQA.hiddenSize / GQA.numHeads);

    await t.step("qwen2: zero biases change nothing, a v bias does", async () => {
      const biases = (scale: number) => (t: Map<string, Dense>) => {
        for (let l = 0; l < GQA.numLayers; l++) {
          for (const [p, n] of [["q", GQA.hiddenSize], ["k", kvDim], ["v", kvDim]] as const) {
            const values = Float64Array.from({ length: n }, () => scale * (next() * 2 - 1));
            t.set(`model.layers.${l}.self_attn.${p}_proj.bias`, { shape: [n], values });
          }
        }
      };
      const zero = await asFamily("qwen2", "Qwen2ForCausalLM", {}, biases(0));
      assertEquals(zero.config.qkvBias, true);
      assertSameLogits(await referenceForward(zero, ids), base, 1e-12, `zero biases ${note}`);
      const some = await asFamily("qwen2", "Qwen2ForCausalLM", {}, biases(0.5));
      assert(relativeError((await referenceForward(some, ids))[5], base[5]).maxRelError > 1e-3);
    });

    await t.step("qwen3: q and k norms make q and k projections scale-free", async () => {
      const headDim = GQA.hiddenSize / GQA.numHeads;
      const normWeights = Array.from(
        { length: 2 * GQA.numLayers },
        () => Float64Array.from({ length: headDim }, () => 1 + 0.3 * (next() - 0.5)),
      );
      const norms = (t: Map<string, Dense>) => {
        for (let l = 0; l < GQA.numLayers; l++) {
          ["q", "k"].forEach((p, i) => {
            t.set(`model.layers.${l}.self_attn.${p}_norm.weight`, {
              shape: [headDim],
              values: normWeights[2 * l + i],
            });
          });
        }
      };
      const scaled = (inner: (t: Map<string, Dense>) => void) => (t: Map<string, Dense>) => {
        inner(t);
        for (let l = 0; l < GQA.numLayers; l++) {
          for (const p of ["q", "k"]) {
            const w = t.get(`model.layers.${l}.self_attn.${p}_proj.weight`)!;
            w.values = w.values.map((v) => 3 * v);
          }
        }
      };
      const normed = await asFamily("qwen3", "Qwen3ForCausalLM", { head_dim: headDim }, norms);
      assertEquals(normed.config.qkNorm, true);
      const plain = await referenceForward(normed, ids);
      const tripled = await asFamily(
        "qwen3",
        "Qwen3ForCausalLM",
        { head_dim: headDim },
        scaled(norms),
      );
      // Up to eps (1e-5 against mean squares of order 1): the norm cancels the factor.
      assertSameLogits(await referenceForward(tripled, ids), plain, 1e-4, `q/k scaled ${note}`);
      // Without the norms the same scaling changes the attention.
      const llamaTripled = await derive(gqa, { tensors: scaled(() => {}) });
      assert(
        relativeError((await referenceForward(llamaTripled, ids))[8], base[8]).maxRelError > 1e-3,
      );
    });

    await t.step(
      "mistral: a window past the prompt changes nothing; W = 3 sees 2 × 2 back",
      async () => {
        const wide = await asFamily("mistral", "MistralForCausalLM", { sliding_window: 1000 });
        assertEquals(wide.config.slidingWindow, 1000);
        assertSameLogits(await referenceForward(wide, ids), base, 1e-12, `wide window ${note}`);
        const narrow = await asFamily("mistral", "MistralForCausalLM", { sliding_window: 3 });
        const windowed = await referenceForward(narrow, ids);
        // Two layers of window 3: position 11 reads positions 7..11 of the input, no earlier.
        const early = [...ids];
        early[6] = (early[6] + 1) % GQA.vocabSize!;
        assertClose(
          (await referenceForward(narrow, early))[11],
          windowed[11],
          1e-12,
          `pos 6 ${note}`,
        );
        const inside = [...ids];
        inside[7] = (inside[7] + 1) % GQA.vocabSize!;
        assert(
          relativeError((await referenceForward(narrow, inside))[11], windowed[11]).maxRelError >
            1e-6,
          "position 7 is within reach",
        );
        assert(relativeError(windowed[11], base[11]).maxRelError > 1e-3, "the window bites");
      },
    );
  } finally {
    for (const dir of tempDirs.splice(0)) await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("reference forward: a 2-dimensional model against a hand derivation", async () => {
  // hidden 2, one head of dim 2 (a single RoPE pair with inverse frequency 1: position p turns
  // by p radians), intermediate 1, vocab 2, identity embeddings, v, o and lm_head, tiny eps.
  // Sequence [0, 1]. Values are exact in f32, so the file holds exactly these numbers.
  const [s, ga, gb, ua, ub, d0, d1] = [1.5, 0.75, -0.375, 0.25, 0.875, 0.5, -1.25];
  const inNorm = [1.25, 0.75];
  const postNorm = [0.5, 1.5];
  const finalNorm = [1, 2];
  const dir = await Deno.makeTempDir({ prefix: "sluice-ref-test-" });
  try {
    const donor = await Deno.makeTempDir({ prefix: "sluice-ref-test-" });
    await writeTinyModel(donor, { ...GQA, numLayers: 1 });
    for (const name of ["tokenizer.json", "tokenizer_config.json"]) {
      await Deno.copyFile(join(donor, name), join(dir, name));
    }
    await Deno.remove(donor, { recursive: true });
    await Deno.writeTextFile(
      join(dir, "config.json"),
      JSON.stringify({
        architectures: ["LlamaForCausalLM"],
        hidden_size: 2,
        intermediate_size: 1,
        num_hidden_layers: 1,
        num_attention_heads: 1,
        vocab_size: 2,
        rms_norm_eps: 1e-30,
      }),
    );
    const f32 = (name: string, shape: number[], values: number[]) => ({
      name,
      dtype: "F32" as const,
      shape,
      data: encodeTensor(values, "F32"),
    });
    const p = "model.layers.0";
    await writeSafetensors(join(dir, "model.safetensors"), [
      f32("model.embed_tokens.weight", [2, 2], [1, 0, 0, 1]),
      f32(`${p}.input_layernorm.weight`, [2], inNorm),
      f32(`${p}.self_attn.q_proj.weight`, [2, 2], [0, s, 0, 0]),
      f32(`${p}.self_attn.k_proj.weight`, [2, 2], [1, 0, 1, 0]),
      f32(`${p}.self_attn.v_proj.weight`, [2, 2], [1, 0, 0, 1]),
      f32(`${p}.self_attn.o_proj.weight`, [2, 2], [1, 0, 0, 1]),
      f32(`${p}.post_attention_layernorm.weight`, [2], postNorm),
      f32(`${p}.mlp.gate_proj.weight`, [1, 2], [ga, gb]),
      f32(`${p}.mlp.up_proj.weight`, [1, 2], [ua, ub]),
      f32(`${p}.mlp.down_proj.weight`, [2, 1], [d0, d1]),
      f32("model.norm.weight", [2], finalNorm),
      f32("lm_head.weight", [2, 2], [1, 0, 0, 1]),
    ]);
    const files = await openModelDir(dir);
    const logits = await referenceForward(files, [0, 1]);

    const r2 = Math.SQRT2;
    const norm = (v: number[], w: number[]) => {
      const rms = Math.sqrt((v[0] ** 2 + v[1] ** 2) / 2);
      return [(v[0] / rms) * w[0], (v[1] / rms) * w[1]];
    };
    const mlp = (x: number[]) => {
      const n = norm(x, postNorm);
      const gate = ga * n[0] + gb * n[1];
      const act = (gate / (1 + Math.exp(-gate))) * (ua * n[0] + ub * n[1]); // silu(gate)·up
      return [x[0] + d0 * act, x[1] + d1 * act];
    };
    // Normalized tokens: n(0) = [√2·in₀, 0], n(1) = [0, √2·in₁].
    // Position 0 attends only to itself, so attention returns v₀ = n(0).
    const x0 = mlp([1 + r2 * inNorm[0], 0]);
    assertClose(logits[0], norm(x0, finalNorm), 1e-12, "position 0");
    // Position 1: q₁ = [a, 0] with a = s·√2·in₁, turned by 1 radian to [a·cos 1, a·sin 1];
    // k₀ = [c, c] with c = √2·in₀ at position 0 (not turned); k₁ = 0. Scores are q·k / √2.
    const a = s * r2 * inNorm[1];
    const c = r2 * inNorm[0];
    const score0 = (a * c * (Math.cos(1) + Math.sin(1))) / Math.sqrt(2);
    const w0 = Math.exp(score0) / (Math.exp(score0) + 1);
    // v₀ = n(0), v₁ = n(1); o is the identity; the residual adds the embedding [0, 1].
    const x1 = mlp([w0 * r2 * inNorm[0], 1 + (1 - w0) * r2 * inNorm[1]]);
    assertClose(logits[1], norm(x1, finalNorm), 1e-12, "position 1");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("reference helpers: rotate_half RoPE pairing and RMSNorm", () => {
  // Dimension i rotates with i + headDim/2 (not with its neighbour), by pos · invFreq[i].
  const v = new Float64Array([9, 1, 2, 3, 4, 9]);
  applyRope(v, 1, 4, 2, new Float64Array([0.5, 0.25]));
  const [c1, s1, c2, s2] = [Math.cos(1), Math.sin(1), Math.cos(0.5), Math.sin(0.5)];
  const want = [9, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2, 9];
  assertClose(v, want, 1e-15, "rope");
  // x / sqrt(mean(x²) + eps) · w with mean(x²) = (9 + 16) / 2.
  const n = rmsNorm(new Float64Array([3, 4]), new Float64Array([1, 2]), 0.5);
  assertClose(n, [3 / Math.sqrt(13), 8 / Math.sqrt(13)], 1e-15, "rmsnorm");
});

Deno.test("generated models decode to varied tokens, not one token repeated", async () => {
  const specs: [string, TinyModelSpec][] = [
    ["demo", DEMO_SPEC],
    ["small tied", { ...GQA, tied: true, vocabSize: undefined }],
    ["small untied", { ...GQA, vocabSize: undefined, numLayers: 3 }],
  ];
  for (const [label, spec] of specs) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-ref-test-" });
    try {
      await writeTinyModel(dir, spec);
      const files = await openModelDir(dir);
      const tok = new Tokenizer(files);
      const seq = tok.encodeChat([{ role: "user", content: "Tell me about the river." }]);
      const generated: number[] = [];
      for (let i = 0; i < 8; i++) {
        const logits = (await referenceForward(files, seq)).at(-1)!;
        const best = logits.indexOf(Math.max(...logits));
        generated.push(best);
        seq.push(best);
      }
      assert(new Set(generated).size >= 5, `${label}: greedy output ${generated} is degenerate`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
