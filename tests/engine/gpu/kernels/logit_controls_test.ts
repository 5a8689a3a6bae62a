// The sampling controls (logit_controls.wgsl through forward/sampling_controls.ts, then the
// sampler) against float64 CPU references: logit bias, repetition / frequency / presence
// penalties and token masks on random logits of odd widths, several slots per dispatch; greedy ids,
// sampled candidate sets and logprobs of the adjusted logits; min-p's cutoff and distribution;
// defaults that change nothing and encode no pass; penalized decoding over pipelined steps with
// the counts kept on the GPU, reseeded into another slot midway as a resumed request would be.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { createStorage, readF32, readU32, writeBytes } from "../../../../engine/gpu/buffers.ts";
import {
  bindSampler,
  decodeSampleRecords,
  SAMPLER_PARAMS_BYTES,
  type SampleRecord,
  samplerParamsBytes,
  type SamplingParams,
} from "../../../../engine/gpu/kernels/sample.ts";
import {
  type PenaltySeed,
  SamplingControls,
} from "../../../../engine/forward/sampling_controls.ts";
import type { StepMask } from "../../../../engine/forward/step.ts";
import { assert, assertEquals } from "../../../helpers/testing.ts";
import { testGpuF32 } from "../../../helpers/gpu.ts";
import { rng, testSeed } from "../../../helpers/random.ts";

/** |GPU logprob - float64 logprob| (as sample_test.ts), logits of magnitude up to ~120. */
const LOGPROB_ABS_BOUND = 1e-4;
const F32_MAX = 3.4028234663852886e38;

/**
 * A sampler with its controls over `maxSlots` slots, run step after step without reading back in
 * between (each step's records are copied aside), as the forward pass runs them.
 */
class Rig {
  private readonly logits: GPUBuffer;
  private readonly sampleSlot: GPUBuffer;
  private readonly samplePos: GPUBuffer;
  private readonly params: GPUBuffer;
  readonly nextIds: GPUBuffer;
  private readonly out: GPUBuffer;
  private readonly sampler;
  readonly controls: SamplingControls;
  private readonly pending: { copy: GPUBuffer; rows: number }[] = [];

  /** `maxRows` beyond `maxSlots`: rows sharing a slot (only where no slot counts penalties). */
  constructor(
    private gpu: Gpu,
    readonly V: number,
    readonly maxSlots: number,
    readonly K: number,
    maxRows = maxSlots,
  ) {
    this.logits = createStorage(gpu, maxRows * V * 4);
    this.sampleSlot = createStorage(gpu, maxRows * 4);
    this.samplePos = createStorage(gpu, maxRows * 4);
    this.params = createStorage(gpu, maxSlots * SAMPLER_PARAMS_BYTES);
    this.nextIds = createStorage(gpu, maxSlots * 4);
    this.out = createStorage(gpu, maxRows * (2 + 2 * K) * 4);
    const io = { logits: this.logits, sampleSlot: this.sampleSlot, nextIds: this.nextIds };
    this.sampler = bindSampler(gpu, {
      ...io,
      V,
      samplePos: this.samplePos,
      params: this.params,
      out: this.out,
      topLogprobs: K,
    });
    this.controls = new SamplingControls(gpu, { ...io, V, maxSlots });
  }

  set(slot: number, p: SamplingParams, seed?: PenaltySeed): void {
    this.controls.set(slot, p);
    if (seed) this.controls.seed(seed);
    writeBytes(this.gpu, this.params, slot * SAMPLER_PARAMS_BYTES, samplerParamsBytes(p));
  }

  /** Submits one step: row s samples logits[s] for slots[s] at positions[s]. */
  submit(logits: Float32Array[], slots: number[], positions: number[], masks?: StepMask[]): void {
    const data = new Float32Array(logits.length * this.V);
    logits.forEach((x, s) => data.set(x, s * this.V));
    writeBytes(this.gpu, this.logits, 0, data);
    writeBytes(this.gpu, this.sampleSlot, 0, Uint32Array.from(slots));
    writeBytes(this.gpu, this.samplePos, 0, Uint32Array.from(positions));
    const encoder = this.gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    this.controls.encodeAdjust(pass, slots, masks);
    this.sampler.encode(pass, slots.length);
    this.controls.encodeCount(pass);
    pass.end();
    const bytes = slots.length * (2 + 2 * this.K) * 4;
    const copy = createStorage(this.gpu, bytes);
    encoder.copyBufferToBuffer(this.out, 0, copy, 0, bytes);
    this.gpu.device.queue.submit([encoder.finish()]);
    this.pending.push({ copy, rows: slots.length });
  }

  /** Records of every step submitted since the last call, in order. */
  async records(): Promise<SampleRecord[][]> {
    const all: SampleRecord[][] = [];
    for (const { copy, rows } of this.pending.splice(0)) {
      const words = await readU32(this.gpu, copy, rows * (2 + 2 * this.K));
      all.push(decodeSampleRecords(words, rows, this.K));
      copy.destroy();
    }
    return all;
  }

  /** The logits as the last step left them (adjusted in place). */
  async adjusted(rows: number): Promise<Float32Array[]> {
    const all = await readF32(this.gpu, this.logits, rows * this.V);
    return Array.from({ length: rows }, (_, s) => all.slice(s * this.V, (s + 1) * this.V));
  }

  destroy(): void {
    this.controls.destroy();
    for (const b of [this.logits, this.sampleSlot, this.samplePos, this.params, this.nextIds]) {
      b.destroy();
    }
    this.out.destroy();
  }
}

// ---- CPU references (float64) ----

/** The logits the sampler must see: bias, repetition, frequency / presence, then the mask. */
function adjustRef(
  x: Float32Array,
  p: SamplingParams,
  prompt: readonly number[],
  generated: readonly number[],
  mask?: Uint32Array,
): Float64Array {
  const y = Float64Array.from(x);
  for (const [id, b] of p.logitBias ?? []) y[id] += b;
  const n = new Map<number, number>();
  for (const id of generated) n.set(id, (n.get(id) ?? 0) + 1);
  const seen = new Set([...prompt, ...generated]);
  const r = p.repetitionPenalty ?? 1, f = p.frequencyPenalty ?? 0, pr = p.presencePenalty ?? 0;
  for (const id of seen) {
    y[id] = y[id] > 0 ? y[id] / r : y[id] * r;
    const c = n.get(id) ?? 0;
    y[id] -= f * c + (c > 0 ? pr : 0);
  }
  if (mask) {
    for (let id = 0; id < y.length; id++) {
      if (!allowed(mask, id)) y[id] = -Infinity;
      else if (y[id] === -Infinity) y[id] = -F32_MAX;
    }
  }
  return y;
}

function allowed(mask: Uint32Array, id: number): boolean {
  return ((mask[id >>> 5] >>> (id & 31)) & 1) === 1;
}

function randomMask(next: () => number, V: number, density: number): Uint32Array {
  const bits = new Uint32Array(Math.ceil(V / 32));
  for (let id = 0; id < V; id++) if (next() < density) bits[id >>> 5] |= 1 << (id & 31);
  bits[0] |= 1; // never empty
  return bits;
}

/** Ids in sampler order: logit descending, ties to the lower id. */
function order(x: ArrayLike<number>): number[] {
  return Array.from({ length: x.length }, (_, i) => i).sort((a, b) => x[b] - x[a] || a - b);
}

function logSoftmax(x: ArrayLike<number>): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) max = Math.max(max, x[i]);
  let z = 0;
  for (let i = 0; i < x.length; i++) z += Math.exp(x[i] - max);
  return Float64Array.from({ length: x.length }, (_, i) => x[i] - max - Math.log(z));
}

/**
 * The candidate set and its probabilities: ids at or above the top-k and min-p cutoffs, then the
 * shortest prefix reaching topP of their mass (ties with a cutoff kept), as sample.wgsl says.
 */
function candidates(x: ArrayLike<number>, p: SamplingParams): Map<number, number> {
  const sorted = order(x);
  const max = x[sorted[0]];
  let cut = -Infinity;
  if (p.topK > 0 && p.topK < x.length) cut = x[sorted[p.topK - 1]];
  if ((p.minP ?? 0) > 0) cut = Math.max(cut, max + p.temperature * Math.log(p.minP!));
  const weight = (i: number) => Math.exp((x[i] - max) / p.temperature);
  let ids = sorted.filter((i) => x[i] >= cut);
  if (p.topP < 1) {
    const total = ids.reduce((s, i) => s + weight(i), 0);
    let cum = 0;
    let last = ids[ids.length - 1];
    for (const i of ids) {
      cum += weight(i);
      if (cum >= p.topP * total) {
        last = i;
        break;
      }
    }
    ids = ids.filter((i) => x[i] >= x[last]);
  }
  const total = ids.reduce((s, i) => s + weight(i), 0);
  return new Map(ids.map((i) => [i, weight(i) / total]));
}

function randomLogits(next: () => number, V: number, scale: number): Float32Array {
  return Float32Array.from({ length: V }, () => (next() * 2 - 1) * scale);
}

/** A pass encoder that only counts what would be dispatched. */
function countingPass(): { pass: GPUComputePassEncoder; dispatches: () => number } {
  let n = 0;
  const pass = {
    setPipeline() {},
    setBindGroup() {},
    dispatchWorkgroups() {
      n++;
    },
  } as unknown as GPUComputePassEncoder;
  return { pass, dispatches: () => n };
}

// ---- tests ----

/** One slot's case: its params, its request's ids so far, and whether its row is masked. */
interface ControlCase {
  name: string;
  p: SamplingParams;
  prompt: number[];
  generated: number[];
  masked: boolean;
}

function controlCases(next: () => number, V: number): ControlCase[] {
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(next() * V));
  const bias = (n: number): [number, number][] =>
    [...new Set(ids(n))].map((id) => [id, (next() * 2 - 1) * 100]);
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 3 };
  const sampled = { temperature: 0.9, topK: 0, topP: 0.95, seed: 4 };
  const prompt = ids(Math.min(40, V));
  const generated = [...ids(12), ...ids(3), ...ids(3)].slice(0, 18);
  generated.push(generated[0], generated[0], generated[1]); // counts above 1
  return [
    { name: "bias", p: { ...greedy, logitBias: bias(20) }, prompt, generated, masked: false },
    {
      name: "repetition",
      p: { ...greedy, repetitionPenalty: 1.7 },
      prompt,
      generated,
      masked: false,
    },
    {
      name: "frequency + presence",
      p: { ...greedy, frequencyPenalty: 1.3, presencePenalty: -0.6 },
      prompt,
      generated,
      masked: false,
    },
    { name: "mask only", p: greedy, prompt, generated, masked: true },
    {
      name: "everything, sampled",
      p: {
        ...sampled,
        logitBias: bias(30),
        repetitionPenalty: 0.8,
        frequencyPenalty: -1.1,
        presencePenalty: 2,
        minP: 0.05,
      },
      prompt,
      generated,
      masked: true,
    },
    {
      name: "bias -100 and +100",
      p: { ...sampled, logitBias: [[1, -100], [V - 1, 100]] },
      prompt: [],
      generated: [],
      masked: false,
    },
    { name: "defaults", p: greedy, prompt, generated, masked: false },
  ];
}

Deno.test("bias, penalties and masks: adjusted logits, ids and logprobs match the float64 reference", async (t) => {
  const gpu = await testGpuF32(); // the logits are f32 on both dtype paths
  for (const V of [37, 300, 1001]) {
    await t.step(`V=${V}`, async () => {
      const seed = testSeed();
      const next = rng(seed);
      const cases = controlCases(next, V);
      const K = Math.min(5, V);
      const rig = new Rig(gpu, V, cases.length + 2, K);
      // Slots out of row order, some slots unused.
      const slots = cases.map((_, i) => (i * 2 + 3) % (cases.length + 2)); // 9 slots: distinct
      cases.forEach((c, i) => {
        rig.set(slots[i], c.p, { slot: slots[i], prompt: c.prompt, generated: c.generated });
      });
      const logits = cases.map(() => randomLogits(next, V, 8));
      const maskBits = cases.map((c) => c.masked ? randomMask(next, V, 0.3) : undefined);
      const masks = maskBits.flatMap((bits, sample) => bits ? [{ sample, bits }] : []);
      rig.submit(logits, slots, cases.map((_, i) => 100 + i), masks);
      const [records] = await rig.records();
      const adjusted = await rig.adjusted(cases.length);
      cases.forEach((c, s) => {
        const where = `seed ${seed}, ${c.name}`;
        const ref = adjustRef(logits[s], c.p, c.prompt, c.generated, maskBits[s]);
        const gpuX = adjusted[s];
        for (let id = 0; id < V; id++) {
          const bound = 2e-6 * (8 + 100 + 2 * 21 + 2);
          assert(
            ref[id] === gpuX[id] || Math.abs(ref[id] - gpuX[id]) <= bound,
            `${where}: logit ${id} is ${gpuX[id]}, want ${ref[id]}`,
          );
        }
        const rec = records[s];
        if (maskBits[s]) {
          assert(allowed(maskBits[s]!, rec.id), `${where}: drew masked id ${rec.id}`);
        }
        if (c.p.temperature === 0) {
          assertEquals(rec.id, order(gpuX)[0], `${where}: greedy id`);
        } else {
          assert(candidates(gpuX, c.p).has(rec.id), `${where}: ${rec.id} is not a candidate`);
        }
        const lp = logSoftmax(ref);
        // A masked id among the top K has logprob -Infinity on both sides: equal, not NaN apart.
        const near = (a: number, b: number) => a === b || Math.abs(a - b) <= LOGPROB_ABS_BOUND;
        assert(near(rec.logprob, lp[rec.id]), `${where}: logprob`);
        rec.top.forEach(([id, logprob], k) => {
          assertEquals(id, order(gpuX)[k], `${where}: top[${k}]`);
          assert(near(logprob, lp[id]), `${where}: top[${k}] logprob ${logprob}, want ${lp[id]}`);
        });
        if (c.name.startsWith("bias -100")) {
          assertEquals(rec.id, V - 1, `${where}: +100 forces`);
        }
      });
      rig.destroy();
    });
  }
});

Deno.test("defaults change nothing and encode no pass; a mask alone encodes one", async () => {
  const gpu = await testGpuF32();
  const V = 300;
  const next = rng(77);
  const x = randomLogits(next, V, 4);
  const bare = { temperature: 0.8, topK: 40, topP: 0.9, seed: 9 };
  const defaults = {
    ...bare,
    logitBias: [],
    frequencyPenalty: 0,
    presencePenalty: 0,
    repetitionPenalty: 1,
    minP: 0,
  };
  const greedy = { ...bare, temperature: 0 };
  const rig = new Rig(gpu, V, 4, 5);
  [bare, defaults, greedy, { ...defaults, temperature: 0 }].forEach((p, slot) => rig.set(slot, p));
  const counted = countingPass();
  rig.controls.encodeAdjust(counted.pass, [0, 1, 2, 3]);
  rig.controls.encodeCount(counted.pass);
  assertEquals(counted.dispatches(), 0, "no pass for rows at their defaults");
  for (let pos = 0; pos < 20; pos++) rig.submit([x, x, x, x], [0, 1, 2, 3], [pos, pos, pos, pos]);
  for (const [a, b, c, d] of await rig.records()) {
    assertEquals(b, a, "sampled: explicit defaults give the same record");
    assertEquals(d, c, "greedy: explicit defaults give the same record");
    assertEquals(c.id, order(x)[0]);
  }
  assertEquals(await rig.adjusted(4), [x, x, x, x], "logits untouched");
  const masked = countingPass();
  const bits = new Uint32Array(Math.ceil(V / 32)).fill(0xffffffff);
  rig.controls.encodeAdjust(masked.pass, [0, 1, 2, 3], [{ sample: 2, bits }]);
  rig.controls.encodeCount(masked.pass);
  assertEquals(masked.dispatches(), 1, "one adjust pass, no count pass (no penalties)");
  rig.destroy();
});

Deno.test("a mask that allows nothing gives id 0; one that allows a single id gives it", async () => {
  const gpu = await testGpuF32();
  const V = 37;
  const x = randomLogits(rng(5), V, 4);
  x[20] = -Infinity; // allowed, but -inf: still outranks every banned id
  const rig = new Rig(gpu, V, 4, 0);
  const sampled = { temperature: 1, topK: 0, topP: 1, seed: 1 };
  const greedy = { ...sampled, temperature: 0 };
  [greedy, sampled, greedy, sampled].forEach((p, slot) => rig.set(slot, p));
  const none = new Uint32Array(2);
  const one = new Uint32Array(2);
  one[0] = 1 << 20;
  const masks = [none, none, one, one].map((bits, sample) => ({ sample, bits }));
  rig.submit([x, x, x, x], [0, 1, 2, 3], [0, 0, 0, 0], masks);
  const [records] = await rig.records();
  assertEquals(records.map((r) => r.id), [0, 0, 20, 20]);
  rig.destroy();
});

Deno.test("min-p keeps ids with p >= minP · p_max, alone and with top-k / top-p", async () => {
  const gpu = await testGpuF32();
  const V = 300;
  const next = rng(20240602);
  const x = randomLogits(next, V, 3);
  const s = order(x);
  /** A minP whose cutoff falls halfway between the size-th and the next logit, at temperature T. */
  const minPForSize = (size: number, T: number) =>
    Math.exp(((x[s[size - 1]] + x[s[size]]) / 2 - x[s[0]]) / T);
  const cases: SamplingParams[] = [
    { temperature: 1, topK: 0, topP: 1, seed: 21, minP: minPForSize(8, 1) }, // inside the list
    { temperature: 1.5, topK: 0, topP: 1, seed: 22, minP: minPForSize(60, 1.5) }, // beyond it
    { temperature: 1, topK: 30, topP: 1, seed: 23, minP: minPForSize(50, 1) }, // top-k cuts more
    { temperature: 0.7, topK: 0, topP: 0.6, seed: 24, minP: minPForSize(40, 0.7) }, // top-p after
    { temperature: 0, topK: 0, topP: 1, seed: 25, minP: 0.99 }, // greedy ignores it
  ];
  const draws = 2000;
  // All draws in one dispatch: row d * cases + c draws for case c at position d.
  const rig = new Rig(gpu, V, cases.length, 0, draws * cases.length);
  cases.forEach((p, slot) => rig.set(slot, p));
  const slots = Array.from({ length: draws * cases.length }, (_, r) => r % cases.length);
  const positions = slots.map((_, r) => 500 + Math.floor(r / cases.length));
  rig.submit(slots.map(() => x), slots, positions);
  const [records] = await rig.records();
  cases.forEach((p, c) => {
    const probs = p.temperature === 0 ? new Map([[s[0], 1]]) : candidates(x, p);
    const counts = new Map<number, number>();
    for (let d = 0; d < draws; d++) {
      const id = records[d * cases.length + c].id;
      assert(probs.has(id), `case ${c}: drew ${id} outside the ${probs.size} candidates`);
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    // Chi-square over bins expected >= 5 (the rest pooled), at ~5 sigma (fixed seeds).
    let stat = 0, bins = 0, pooledO = 0, pooledE = 0;
    for (const [id, q] of probs) {
      const e = draws * q, o = counts.get(id) ?? 0;
      if (e < 5) {
        pooledO += o;
        pooledE += e;
      } else {
        stat += (o - e) ** 2 / e;
        bins++;
      }
    }
    if (pooledE > 0) stat += (pooledO - pooledE) ** 2 / Math.max(pooledE, 1e-9), bins++;
    const df = Math.max(1, bins - 1), a = 2 / (9 * df);
    const critical = df * (1 - a + 5 * Math.sqrt(a)) ** 3;
    assert(stat <= critical, `case ${c}: chi-square ${stat.toFixed(1)} > ${critical.toFixed(1)}`);
  });
  rig.destroy();
});

Deno.test("penalized decoding over pipelined steps follows the CPU reference step by step, reseeded midway", async () => {
  const gpu = await testGpuF32();
  const V = 203;
  const steps = 14;
  const seed = testSeed();
  const next = rng(seed);
  // Dyadic values throughout, so f32 and float64 agree exactly and greedy ids can be compared
  // even where logits tie.
  const dyadic = (scale: number) => Math.round((next() * 2 - 1) * scale * 8) / 8;
  const prompt = Array.from({ length: 25 }, () => Math.floor(next() * V));
  const requests: SamplingParams[] = [
    { temperature: 0, topK: 0, topP: 1, seed: 1, frequencyPenalty: 0.5, presencePenalty: 0.25 },
    { temperature: 0, topK: 0, topP: 1, seed: 2, repetitionPenalty: 2 },
    {
      temperature: 0,
      topK: 0,
      topP: 1,
      seed: 3,
      repetitionPenalty: 0.5,
      frequencyPenalty: -0.25,
      logitBias: [[7, 1.5], [8, -2]],
    },
    { temperature: 0.8, topK: 0, topP: 1, seed: 4, frequencyPenalty: 1.5, presencePenalty: 1 },
  ];
  // Each step's logits favour few ids (so without penalties the same ones would repeat).
  const logitsAt = Array.from({ length: steps }, () =>
    requests.map(() => {
      const x = Float32Array.from({ length: V }, () => dyadic(1));
      for (let k = 0; k < 4; k++) x[k * 11] = 3 + dyadic(0.5);
      return x;
    }));
  const rig = new Rig(gpu, V, 8, 0);
  let slots = [0, 1, 2, 3];
  requests.forEach((p, r) => rig.set(slots[r], p, { slot: slots[r], prompt, generated: [] }));
  const generated: number[][] = requests.map(() => []);
  const half = steps / 2;
  for (let step = 0; step < steps; step++) {
    if (step === half) {
      // Every request resumes in another slot; the slots it left are reused by nobody.
      const done = await rig.records();
      done.forEach((records) => records.forEach((r, i) => generated[i].push(r.id)));
      slots = [5, 7, 4, 6];
      requests.forEach((p, r) => {
        rig.set(slots[r], p, { slot: slots[r], prompt, generated: generated[r] });
      });
    }
    rig.submit(logitsAt[step], slots, slots.map(() => prompt.length + step));
  }
  (await rig.records()).forEach((records) => records.forEach((r, i) => generated[i].push(r.id)));
  requests.forEach((p, r) => {
    for (let step = 0; step < steps; step++) {
      const before = generated[r].slice(0, step);
      const ref = adjustRef(logitsAt[step][r], p, prompt, before);
      const id = generated[r][step];
      const where = `seed ${seed}, request ${r}, step ${step}`;
      if (p.temperature === 0) assertEquals(id, order(ref)[0], where);
      else assert(candidates(ref, p).has(id), `${where}: ${id} is not a candidate`);
    }
  });
  // The penalties bite: the greedy requests do not just repeat the same favourite.
  for (let r = 0; r < 2; r++) {
    assert(new Set(generated[r]).size > 2, `request ${r} generated ${generated[r]}`);
  }
  rig.destroy();
});
