// GPU sampler against float64 CPU references: greedy and top-K logprobs exactly as the order and
// log-softmax say; temperature / top-k / top-p draws inside the allowed set with frequencies that
// pass a chi-square test against the renormalized distribution; draws reproducible per (seed, pos).
// The greedy sampler (sample_greedy.ts) writes the full sampler's K = 0 records bit for bit, ties,
// NaN and -inf rows included, and its ids are the float64 reference's.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import {
  createStorage,
  readU32,
  uploadStorage,
  writeBytes,
} from "../../../../engine/gpu/buffers.ts";
import {
  bindSampler,
  decodeSampleRecords,
  SAMPLER_PARAMS_BYTES,
  type SampleRecord,
  samplerParamsBytes,
  type SamplingParams,
} from "../../../../engine/gpu/kernels/sample.ts";
import { bindGreedySampler } from "../../../../engine/gpu/kernels/sample_greedy.ts";
import { assert, assertEquals } from "../../../helpers/testing.ts";
import { POISON_F32 } from "../../../helpers/compare.ts";
import { testGpus } from "../../../helpers/gpu.ts";
import { rng, testSeed } from "../../../helpers/random.ts";

/** |GPU logprob - float64 logprob|: f32 log-softmax of logits of magnitude <= ~20 (both dtype paths: logits are f32). */
const LOGPROB_ABS_BOUND = 2e-5;

interface SampleRow {
  /** Index of this row's logits in the `logits` list. */
  logits: number;
  slot: number;
  pos: number;
}

interface RunResult {
  records: SampleRecord[];
  nextIds: Uint32Array;
}

const NO_ID = 0xffffffff;

/** Runs one sampler dispatch over `rows` (logits rows copied in order) with per-slot params. */
async function runSampler(
  gpu: Gpu,
  V: number,
  logits: Float32Array[],
  rows: SampleRow[],
  slots: SamplingParams[],
  K: number,
): Promise<RunResult> {
  const data = new Float32Array(rows.length * V);
  rows.forEach((r, s) => data.set(logits[r.logits], s * V));
  const params = new Uint8Array(slots.length * SAMPLER_PARAMS_BYTES);
  slots.forEach((p, i) => params.set(samplerParamsBytes(p), i * SAMPLER_PARAMS_BYTES));
  const recordWords = rows.length * (2 + 2 * K);
  const out = createStorage(gpu, recordWords * 4);
  writeBytes(gpu, out, 0, new Uint32Array(recordWords).fill(POISON_F32));
  const nextIds = uploadStorage(gpu, new Uint32Array(slots.length).fill(NO_ID - 1));
  const buffers = [
    uploadStorage(gpu, data),
    uploadStorage(gpu, Uint32Array.from(rows, (r) => r.slot)),
    uploadStorage(gpu, Uint32Array.from(rows, (r) => r.pos)),
    uploadStorage(gpu, params),
  ];
  const sampler = bindSampler(gpu, {
    logits: buffers[0],
    V,
    sampleSlot: buffers[1],
    samplePos: buffers[2],
    params: buffers[3],
    nextIds,
    out,
    topLogprobs: K,
  });
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  sampler.encode(pass, rows.length);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  const words = await readU32(gpu, out, recordWords);
  const ids = await readU32(gpu, nextIds, slots.length);
  for (const b of [...buffers, out, nextIds]) b.destroy();
  return { records: decodeSampleRecords(words, rows.length, K), nextIds: ids };
}

// ---- CPU references (float64 over the f32 logits) ----

/** Ids in sampler order: logit descending, ties to the lower id. */
function order(x: Float32Array): number[] {
  return Array.from(x.keys()).sort((a, b) => x[b] - x[a] || a - b);
}

function logSoftmax(x: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of x) max = Math.max(max, v);
  let z = 0;
  for (const v of x) z += Math.exp(v - max);
  const logZ = max + Math.log(z);
  return Float64Array.from(x, (v) => v - logZ);
}

/**
 * The sampler's candidate set and its renormalized probabilities: top-k by logit (ties with the
 * k-th kept), then the shortest prefix reaching topP of the top-k mass (ties with its last kept).
 */
function allowedDistribution(x: Float32Array, p: SamplingParams): Map<number, number> {
  const sorted = order(x);
  const V = x.length;
  let cut = -Infinity;
  if (p.topK > 0 && p.topK < V) cut = x[sorted[p.topK - 1]];
  const max = x[sorted[0]];
  const weight = (i: number) => Math.exp((x[i] - max) / p.temperature);
  let candidates = sorted.filter((i) => x[i] >= cut);
  if (p.topP < 1) {
    const total = candidates.reduce((s, i) => s + weight(i), 0);
    let cum = 0;
    let last = candidates[candidates.length - 1];
    for (const i of candidates) {
      cum += weight(i);
      if (cum >= p.topP * total) {
        last = i;
        break;
      }
    }
    const nucleusCut = x[last];
    candidates = candidates.filter((i) => x[i] >= nucleusCut);
  }
  const total = candidates.reduce((s, i) => s + weight(i), 0);
  return new Map(candidates.map((i) => [i, weight(i) / total]));
}

/**
 * A topP that puts the nucleus cutoff at exactly `size` ids of the top-k set, halfway between the
 * cumulative masses of size-1 and size ids so that f32 rounding cannot move it.
 */
function topPForSize(x: Float32Array, temperature: number, topK: number, size: number): number {
  const sorted = order(x);
  const candidates = topK > 0 ? sorted.slice(0, topK) : sorted;
  const max = x[sorted[0]];
  const w = candidates.map((i) => Math.exp((x[i] - max) / temperature));
  const total = w.reduce((a, b) => a + b, 0);
  const before = w.slice(0, size - 1).reduce((a, b) => a + b, 0) / total;
  const at = before + w[size - 1] / total;
  assert(at - before > 1e-4, "test logits leave too little mass gap at the nucleus cutoff");
  return (before + at) / 2;
}

/** Upper critical value of chi-square with `df` degrees of freedom at z standard deviations (Wilson-Hilferty). */
function chiSquareCritical(df: number, z: number): number {
  const a = 2 / (9 * df);
  return df * (1 - a + z * Math.sqrt(a)) ** 3;
}

/** Chi-square statistic of `counts` against `probs` (bins with expectation < 5 pooled). */
function chiSquare(
  counts: Map<number, number>,
  probs: Map<number, number>,
  n: number,
): { stat: number; df: number } {
  let stat = 0;
  let bins = 0;
  let pooledObserved = 0;
  let pooledExpected = 0;
  for (const [id, p] of probs) {
    const expected = n * p;
    const observed = counts.get(id) ?? 0;
    if (expected < 5) {
      pooledObserved += observed;
      pooledExpected += expected;
      continue;
    }
    stat += (observed - expected) ** 2 / expected;
    bins++;
  }
  if (pooledExpected > 0) {
    stat += (pooledObserved - pooledExpected) ** 2 / Math.max(pooledExpected, 1e-9);
    bins++;
  }
  return { stat, df: Math.max(1, bins - 1) };
}

function randomLogits(next: () => number, V: number, scale: number): Float32Array {
  return Float32Array.from({ length: V }, () => (next() * 2 - 1) * scale);
}

// ---- tests ----

Deno.test("greedy and top-K logprobs match the float64 reference", async (t) => {
  const shapes = [
    { V: 1000, K: 20 },
    { V: 50257, K: 5 }, // odd V: rows straddle vec4s, the buffer ends in a partial vec4
    { V: 7, K: 10 }, // fewer ids than K: missing entries are reported as such
  ];
  for (const { label, gpu } of await testGpus()) {
    for (const { V, K } of shapes) {
      await t.step(`${label}: V=${V} K=${K}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const logits: Float32Array[] = [];
        for (let r = 0; r < 5; r++) {
          const x = randomLogits(next, V, 8);
          if (V > 4) {
            // Ties: the max twice (a lower and a higher id), and a tie inside the top list.
            const [a, b, c, d] = [3, V - 2, 1, V - 1].map((i) => Math.min(i + r, V - 1));
            x[a] = x[b] = 9;
            x[c] = x[d] = 8.5;
          }
          logits.push(x);
        }
        const rows = logits.map((_, i) => ({ logits: i, slot: 4 - i, pos: i }));
        const greedy = { temperature: 0, topK: 0, topP: 1, seed: 1 };
        const { records, nextIds } = await runSampler(
          gpu,
          V,
          logits,
          rows,
          new Array(5).fill(greedy),
          K,
        );
        rows.forEach((row, s) => {
          const x = logits[row.logits];
          const want = order(x);
          const lp = logSoftmax(x);
          const rec = records[s];
          const where = `seed ${seed}, row ${s}`;
          assertEquals(rec.id, want[0], `${where}: greedy id`);
          assertEquals(nextIds[row.slot], want[0], `${where}: nextIds[slot]`);
          assert(
            Math.abs(rec.logprob - lp[want[0]]) <= LOGPROB_ABS_BOUND,
            `${where}: logprob ${rec.logprob} vs ${lp[want[0]]}`,
          );
          rec.top.forEach(([id, logprob], k) => {
            if (k >= V) {
              assertEquals(id, NO_ID, `${where}: top[${k}] beyond V`);
              assertEquals(logprob, -Infinity, `${where}: top[${k}] logprob beyond V`);
              return;
            }
            assertEquals(id, want[k], `${where}: top[${k}] id`);
            assert(
              Math.abs(logprob - lp[id]) <= LOGPROB_ABS_BOUND,
              `${where}: top[${k}] logprob ${logprob} vs ${lp[id]}`,
            );
          });
        });
      });
    }
  }
});

/** Sampling cases over one V=300 row set, each its own slot; cutoffs beyond the merged list included. */
function samplingCases(next: () => number) {
  const V = 300;
  const base = randomLogits(next, V, 3);
  const tied = new Float32Array(base);
  const s = order(tied);
  tied[s[5]] = tied[s[4]]; // top-5 cutoff tied with the 6th: both kept
  const cases: { name: string; x: Float32Array; p: SamplingParams }[] = [
    { name: "T=0.7, whole vocab", x: base, p: { temperature: 0.7, topK: 0, topP: 1, seed: 11 } },
    {
      name: "top-k 5 with a tie at the cutoff",
      x: tied,
      p: { temperature: 1, topK: 5, topP: 1, seed: 12 },
    },
    {
      name: "top-k 50 (beyond the list)",
      x: base,
      p: { temperature: 1.3, topK: 50, topP: 1, seed: 13 },
    },
    {
      name: "top-p, nucleus of 40",
      x: base,
      p: { temperature: 1, topK: 0, topP: topPForSize(base, 1, 0, 40), seed: 14 },
    },
    {
      name: "top-k 100 + top-p nucleus of 30",
      x: base,
      p: { temperature: 0.8, topK: 100, topP: topPForSize(base, 0.8, 100, 30), seed: 15 },
    },
    {
      name: "top-p nucleus of 3 (inside the list)",
      x: base,
      p: { temperature: 2, topK: 0, topP: topPForSize(base, 2, 0, 3), seed: 16 },
    },
    {
      name: "top-k 1 at T=1 is greedy",
      x: base,
      p: { temperature: 1, topK: 1, topP: 1, seed: 17 },
    },
  ];
  return { V, cases };
}

Deno.test("sampling draws from the allowed set with the renormalized distribution", async (t) => {
  // Fixed seeds: the statistical check is deterministic (and loose: ~5 sigma).
  const { V, cases } = samplingCases(rng(20240601));
  const draws = 3000;
  for (const { label, gpu } of await testGpus()) {
    await t.step(label, async () => {
      // All cases in one dispatch, rows interleaved: each slot must use its own parameters.
      const rows: SampleRow[] = [];
      for (let d = 0; d < draws; d++) {
        cases.forEach((_, c) => rows.push({ logits: c, slot: c, pos: 1000 + d }));
      }
      const { records } = await runSampler(
        gpu,
        V,
        cases.map((c) => c.x),
        rows,
        cases.map((c) => c.p),
        0,
      );
      cases.forEach((c, ci) => {
        const probs = allowedDistribution(c.x, c.p);
        const counts = new Map<number, number>();
        rows.forEach((row, s) => {
          if (row.slot !== ci) return;
          const id = records[s].id;
          assert(
            probs.has(id),
            `${c.name}: drew id ${id} outside the allowed set of ${probs.size}`,
          );
          counts.set(id, (counts.get(id) ?? 0) + 1);
        });
        const { stat, df } = chiSquare(counts, probs, draws);
        const critical = chiSquareCritical(df, 5);
        assert(
          stat <= critical,
          `${c.name}: chi-square ${stat.toFixed(1)} > ${critical.toFixed(1)} (df ${df})`,
        );
      });
    });
  }
});

Deno.test("a draw depends only on (logits, params, seed, pos), not on the batch", async (t) => {
  const seed = testSeed();
  const { V, cases } = samplingCases(rng(seed));
  for (const { label, gpu } of await testGpus()) {
    await t.step(label, async () => {
      const xs = cases.map((c) => c.x);
      const ps = cases.map((c) => c.p);
      const rows: SampleRow[] = [];
      for (let d = 0; d < 40; d++) {
        cases.forEach((_, c) => rows.push({ logits: c, slot: c, pos: d }));
      }
      const full = await runSampler(gpu, V, xs, rows, ps, 3);
      // The same rows alone and reversed, in a different slot layout with the same params.
      const picked = rows.filter((_, i) => i % 7 === 3).reverse();
      const moved = picked.map((r) => ({ ...r, slot: cases.length + r.slot }));
      const again = await runSampler(gpu, V, xs, moved, [...ps, ...ps], 3);
      picked.forEach((r, i) => {
        const s = rows.indexOf(r);
        assertEquals(
          again.records[i],
          full.records[s],
          `seed ${seed}: row ${s} (${cases[r.slot].name}) changed`,
        );
      });
      // Different positions give different draws for a spread-out distribution.
      const wide = rows.filter((r) => r.slot === 0).map((r) => full.records[rows.indexOf(r)].id);
      assert(
        new Set(wide).size > 10,
        `seed ${seed}: 40 positions drew only ${new Set(wide).size} distinct ids`,
      );
    });
  }
});

Deno.test("large vocabulary (128256): greedy, logprobs and top-k / top-p draws", async (t) => {
  const V = 128256;
  const shapes = ["random", "ascending"] as const;
  for (const { label, gpu } of await testGpus()) {
    for (const shape of shapes) {
      await t.step(`${label}: ${shape}`, () => largeVocabCase(gpu, V, shape));
    }
  }
});

async function largeVocabCase(gpu: Gpu, V: number, shape: "random" | "ascending") {
  const seed = testSeed();
  const next = rng(seed);
  // A spread-out tail and 80 clearly separated leaders, so the nucleus of 60 has a clear edge.
  // "ascending" logits make every logit enter each lane's top list (the insertion worst case).
  const x = shape === "random"
    ? randomLogits(next, V, 4)
    : Float32Array.from({ length: V }, (_, i) => i * 4e-5);
  for (let k = 0; k < 80; k++) x[Math.floor(next() * V)] = 14 - 0.05 * k;
  const topP = topPForSize(x, 1, 0, 60);
  const slots = [
    { temperature: 0, topK: 0, topP: 1, seed: 0 },
    { temperature: 1, topK: 0, topP, seed: 99 },
    { temperature: 1.5, topK: 200, topP: 1, seed: 98 },
  ];
  const rows = slots.map((_, i) => ({ logits: 0, slot: i, pos: 7 }));
  const { records } = await runSampler(gpu, V, [x], rows, slots, 20);
  const want = order(x);
  const lp = logSoftmax(x);
  assertEquals(records[0].id, want[0], `seed ${seed}: greedy`);
  records[0].top.forEach(([id, logprob], k) => {
    assertEquals(id, want[k], `seed ${seed}: top[${k}]`);
    assert(
      Math.abs(logprob - lp[id]) <= LOGPROB_ABS_BOUND,
      `seed ${seed}: top[${k}] logprob ${logprob} vs ${lp[id]}`,
    );
  });
  for (const s of [1, 2]) {
    const allowed = allowedDistribution(x, slots[s]);
    assert(
      allowed.has(records[s].id),
      `seed ${seed}: slot ${s} drew ${records[s].id} outside its ${allowed.size} ids`,
    );
    assert(
      Math.abs(records[s].logprob - lp[records[s].id]) <= LOGPROB_ABS_BOUND,
      `seed ${seed}: slot ${s} logprob`,
    );
  }
}

// ---- the greedy sampler ----

/** Runs the greedy sampler over `rows` (logits rows copied in order); `maxRows` sizes its buffer. */
async function runGreedySampler(
  gpu: Gpu,
  V: number,
  logits: Float32Array[],
  rows: SampleRow[],
  slots: number,
): Promise<{ words: Uint32Array; nextIds: Uint32Array }> {
  const data = new Float32Array(rows.length * V);
  rows.forEach((r, s) => data.set(logits[r.logits], s * V));
  const out = createStorage(gpu, rows.length * 2 * 4);
  writeBytes(gpu, out, 0, new Uint32Array(rows.length * 2).fill(POISON_F32));
  const nextIds = uploadStorage(gpu, new Uint32Array(slots).fill(NO_ID - 1));
  const logitsBuffer = uploadStorage(gpu, data);
  const sampleSlot = uploadStorage(gpu, Uint32Array.from(rows, (r) => r.slot));
  const sampler = bindGreedySampler(gpu, {
    logits: logitsBuffer,
    V,
    maxRows: rows.length + 3,
    sampleSlot,
    nextIds,
    out,
  });
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  sampler.encode(pass, rows.length);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  const words = await readU32(gpu, out, rows.length * 2);
  const ids = await readU32(gpu, nextIds, slots);
  for (const b of [out, nextIds, logitsBuffer, sampleSlot]) b.destroy();
  sampler.destroy();
  return { words, nextIds: ids };
}

/**
 * The float64 reference's greedy id: the largest logit, the lowest id among equals; NaN below
 * -inf (chosen only when the row is all NaN); +0 above -0 (the samplers order the f32 values).
 */
function greedyReference(x: Float32Array): number {
  const rank = (v: number) => Number.isNaN(v) ? -Infinity : v;
  let best = 0;
  for (let i = 1; i < x.length; i++) {
    const a = x[i], b = x[best];
    if (Number.isNaN(a)) continue;
    if (
      Number.isNaN(b) || rank(a) > rank(b) ||
      (a === 0 && b === 0 && Object.is(b, -0) && !Object.is(a, -0))
    ) {
      best = i;
    }
  }
  return best;
}

/** Rows that stress the greedy path's order: ties across chunks, NaN, -inf, signed zeros. */
function greedyCases(next: () => number, V: number): { name: string; x: Float32Array }[] {
  const random = () => randomLogits(next, V, 8);
  const cases = [{ name: "random", x: random() }, {
    name: "random, small scale",
    x: randomLogits(next, V, 0.01),
  }];
  const tie = random();
  // The max at a high id first written, then at a lower one: far apart, in different chunks.
  tie[V - 1] = 20;
  tie[Math.floor(V / 3)] = 20;
  cases.push({ name: "tied max", x: tie });
  const nan = random();
  for (let i = 0; i < V; i += 5) nan[i] = NaN;
  cases.push({ name: "NaN among the logits", x: nan });
  const masked = random().fill(-Infinity);
  masked[V - 1] = 1;
  if (V > 2) masked[Math.floor(V / 2)] = -3;
  cases.push({ name: "all -inf but a few", x: masked });
  cases.push({ name: "all -inf", x: new Float32Array(V).fill(-Infinity) });
  cases.push({ name: "all NaN", x: new Float32Array(V).fill(NaN) });
  const zeros = new Float32Array(V).fill(-1);
  zeros[0] = -0;
  zeros[V - 1] = 0;
  cases.push({ name: "-0 and +0 at the top", x: zeros });
  return cases;
}

Deno.test("the greedy sampler writes the full sampler's records bit for bit", async (t) => {
  // V = 1 and 7: less than a chunk; 1001 and 50257: rows straddle vec4s; 49152: SmolLM2's
  // vocabulary (many chunks); 4099: one id past a chunk boundary.
  for (const { label, gpu } of await testGpus()) {
    for (const V of [1, 7, 1001, 4099, 49152, 50257]) {
      await t.step(`${label}: V=${V}`, async () => {
        const seed = testSeed();
        const cases = greedyCases(rng(seed), V);
        const logits = cases.map((c) => c.x);
        const slots = cases.length + 2;
        // Slots out of order, so each row's id must land in its own slot.
        const rows = logits.map((_, i) => ({ logits: i, slot: slots - 1 - i, pos: i }));
        const greedy = { temperature: 0, topK: 0, topP: 1, seed: 1 };
        const full = await runSampler(gpu, V, logits, rows, new Array(slots).fill(greedy), 0);
        const fast = await runGreedySampler(gpu, V, logits, rows, slots);
        const fastRecords = decodeSampleRecords(fast.words, rows.length, 0);
        assertEquals(Array.from(fast.nextIds), Array.from(full.nextIds), `seed ${seed}: nextIds`);
        rows.forEach((row, s) => {
          const where = `seed ${seed}, V ${V}, ${cases[s].name}`;
          const x = logits[row.logits];
          const want = greedyReference(x);
          assertEquals(fastRecords[s].id, want, `${where}: id`);
          assertEquals(full.records[s].id, want, `${where}: the full sampler's id`);
          assertEquals(fast.nextIds[row.slot], want, `${where}: nextIds[slot]`);
          // Bit for bit, NaN included: both samplers compute the logprob in the same order.
          const bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];
          assertEquals(
            bits(fastRecords[s].logprob),
            bits(full.records[s].logprob),
            `${where}: logprob ${fastRecords[s].logprob} vs the full sampler's ${
              full.records[s].logprob
            }`,
          );
          if (x.every((v) => Number.isFinite(v))) {
            const lp = logSoftmax(x)[want];
            assert(
              Math.abs(fastRecords[s].logprob - lp) <= LOGPROB_ABS_BOUND,
              `${where}: logprob ${fastRecords[s].logprob} vs ${lp}`,
            );
          }
        });
      });
    }
  }
});
