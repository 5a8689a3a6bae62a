// KV write + paged attention against a float64 CPU reference, on both dtype paths, RoPE included:
// kv_write rotates each k head by its row's position on the way into the cache and attention
// rotates each q head as it loads it (qkv holds both unrotated), so the reference rotates them in
// float64 (rotate_half, the one pair order the GPU sees: the GGUF loader undoes llama.cpp's
// interleaved permutation, which the whole-model GGUF tests cover).
//
// Every case writes the K/V of all positions of several slots in one kv_write dispatch (rows in
// shuffled order, block tables shuffled, the cache poisoned with NaN first), then runs attention
// for a prefix of those rows in one dispatch: prefill-like runs of one slot mixed with single rows
// of other slots. Both layers draw their blocks from one shared pool, so the blocks of the layer
// not under test sit (poisoned) between those of the layer under test; one case gives each layer
// an arena of its own instead. Sliding-window cases (Mistral) poison, after the write, every block
// wholly before all queried rows' windows, as the runtime frees them: a read of one fails; one of
// them holds positions near 10^5 only (its slots' earlier entries point at a poisoned block), where
// an f32 angle without the shader's exact reduction would be off by ~4e-3 rad.
//
// Bounds: the cache's K against the float64-rotated k rounded to the cache's dtype, to one f16 ulp
// (the GPU rounds its f32 rotation) plus ROPE_BOUND; V exactly as before. Attention's output
// against float64 attention of the float64-rotated q over the K/V the cache holds.

import { type Gpu, kvIsF16 } from "../../../../engine/gpu/device.ts";
import { readBack, readF32, uploadStorage, writeBytes } from "../../../../engine/gpu/buffers.ts";
import { f16BitsToF32, f32ToF16Bits } from "../../../../engine/quant/half.ts";
import { bindAttention } from "../../../../engine/gpu/kernels/attention.ts";
import { bindKvWrite } from "../../../../engine/gpu/kernels/kv_write.ts";
import { DeviceKv, type KvLayout } from "../../../../engine/kv/device_kv.ts";
import { assert, assertEquals } from "../../../helpers/testing.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { poisonedF32, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { ropeRows, testInvFreq } from "../../../helpers/rope_rows.ts";

/**
 * Output bounds relative to the largest |out|. The reference uses the K/V the cache holds (f16-
 * rounded on the f16 path), so both paths differ from it only by f32 summation order and exp.
 */
const BOUND: Record<string, number> = { f32: 1e-5, f16: 1e-5 };
/**
 * A k value rotated in f32 against float64, absolute, for inputs in [-2, 2): the angle's reduction
 * (~1e-6 rad at positions near 10^5), f32 sin/cos and two products (the former RoPE kernel's bound,
 * 3e-6 of the largest |value|, which is up to 2√2 here).
 */
const ROPE_BOUND = 1e-5;

interface Case {
  name: string;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  /** Tokens held per slot. */
  lengths: number[];
  /** Per slot, how many of its last positions are queried (default: all). */
  queried?: number[];
  /** "shared": both layers in one arena (default); "split": an arena per layer. */
  arenas?: "shared" | "split";
  /** Sliding window: a row at p attends to p - window + 1..p (default: none). */
  window?: number;
  /** Per slot, the first position it holds (default 0; past 0 only with a window that stays). */
  start?: number[];
  /** RoPE base (default 10000). */
  theta?: number;
  /** RoPE on the first rotaryDim values of each head only (default all; 0: no RoPE). */
  rotaryDim?: number;
  /** LongRoPE's attention factor on the turned values (default 1). */
  ropeScale?: number;
  /** What q·k is multiplied by (default 1/√headDim; Gemma 3: query_pre_attn_scalar^-½). */
  scoreScale?: number;
}

const CASES: Case[] = [
  {
    name: "MHA, lengths 1/17/300/40",
    numHeads: 4,
    numKvHeads: 4,
    headDim: 64,
    lengths: [1, 17, 300, 40],
  },
  { name: "GQA 8:2, hd 128", numHeads: 8, numKvHeads: 2, headDim: 128, lengths: [33, 1, 129] },
  { name: "MQA, hd 256", numHeads: 4, numKvHeads: 1, headDim: 256, lengths: [5, 64, 2] },
  { name: "GQA 6:3, hd 96", numHeads: 6, numKvHeads: 3, headDim: 96, lengths: [16, 2, 31] },
  {
    name: "GQA 9:3 (SmolLM2's heads), hd 64, theta 1e5",
    numHeads: 9,
    numKvHeads: 3,
    headDim: 64,
    lengths: [23, 1, 70],
    theta: 100000,
  },
  {
    name: "MQA 3:1, hd 40, theta 5e5",
    numHeads: 3,
    numKvHeads: 1,
    headDim: 40,
    lengths: [13, 5],
    theta: 500000,
  },
  {
    name: "GQA 4:2, an arena per layer",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    lengths: [20, 3, 50],
    arenas: "split",
  },
  {
    name: "long context 9000 + decode rows",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    lengths: [9000, 7, 1],
    queried: [3, 1, 1],
  },
  {
    // Windows start mid-quad (lo = 29..32, 274..293) and past whole blocks; slot 1 is shorter than
    // the window.
    name: "sliding window 7, GQA 4:2",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    lengths: [40, 3, 300],
    queried: [4, 3, 20],
    window: 7,
  },
  {
    name: "sliding window 1 (itself only)",
    numHeads: 2,
    numKvHeads: 1,
    headDim: 32,
    lengths: [9, 33],
    window: 1,
  },
  {
    // Positions near 10^5 and 4*10^4: the windows never reach the slots' first positions.
    name: "sliding window 4, positions near 10^5",
    numHeads: 6,
    numKvHeads: 2,
    headDim: 64,
    lengths: [12, 9, 5],
    start: [99_989, 40_001, 7],
    queried: [9, 2, 2],
    window: 4,
    theta: 500000,
  },
  {
    name: "sliding window 100, long context",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    lengths: [9000, 7, 1],
    queried: [3, 1, 1],
    window: 100,
  },
  {
    // Phi-4-mini's head: 96 of 128 values turned (pairs i, i + 48), scaled by its attention
    // factor; the other 32 passed through.
    name: "partial rotary 96 of 128, LongRoPE scale, GQA 6:2",
    numHeads: 6,
    numKvHeads: 2,
    headDim: 128,
    lengths: [37, 1, 70],
    rotaryDim: 96,
    ropeScale: 1.1902380714238083,
  },
  {
    // A Gemma 3 local layer (its 270M's heads, MQA 4:1 of 256 values), window 8, with 27B's
    // score scale (query_pre_attn_scalar 168, not the head dim).
    name: "Gemma 3 local: MQA 4:1, hd 256, window 8, score scale 168^-1/2",
    numHeads: 4,
    numKvHeads: 1,
    headDim: 256,
    lengths: [30, 3, 17],
    queried: [12, 3, 5],
    window: 8,
    scoreScale: 1 / Math.sqrt(168),
  },
  {
    // SmolLM3's no-RoPE layers.
    name: "no RoPE, GQA 4:2",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    lengths: [21, 6],
    rotaryDim: 0,
  },
];

const NUM_LAYERS = 2;
const LAYER = 1;
const BLOCK = 16;

interface Rows {
  slot: Uint32Array;
  pos: Uint32Array;
  /** How many leading rows attention runs on. */
  queried: number;
}

/** All positions of all slots; the queried rows first, everything in shuffled order. */
function buildRows(c: Case, next: () => number): Rows {
  const head: [number, number][] = [];
  const tail: [number, number][] = [];
  c.lengths.forEach((len, slot) => {
    const q = c.queried?.[slot] ?? len;
    const start = startOf(c, slot);
    for (let i = 0; i < len; i++) (i >= len - q ? head : tail).push([slot, start + i]);
  });
  shuffle(head, next);
  shuffle(tail, next);
  const all = [...head, ...tail];
  return {
    slot: Uint32Array.from(all, (r) => r[0]),
    pos: Uint32Array.from(all, (r) => r[1]),
    queried: head.length,
  };
}

function shuffle<T>(items: T[], next: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

function roundW(gpu: Gpu, x: number): number {
  return gpu.f16 ? f16BitsToF32(f32ToF16Bits(x)) : Math.fround(x);
}

/** The first position row `pos` attends to. */
function windowStart(c: Case, pos: number): number {
  return c.window ? Math.max(0, pos + 1 - c.window) : 0;
}

function startOf(c: Case, slot: number): number {
  return c.start?.[slot] ?? 0;
}

/**
 * Float64 causal attention for rows 0..queried-1: q from `rotated` (qkv after a float64 RoPE), K
 * and V from `held` (qkv-shaped, what the cache holds for each row).
 */
function reference(c: Case, rows: Rows, rotated: Float64Array, held: Float64Array): Float64Array {
  const { numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const width = (H + 2 * Hkv) * hd;
  // rowOf[slot][pos - start] = row index holding that position.
  const rowOf = c.lengths.map((len) => new Int32Array(len));
  for (let r = 0; r < rows.slot.length; r++) {
    rowOf[rows.slot[r]][rows.pos[r] - startOf(c, rows.slot[r])] = r;
  }
  const out = new Float64Array(rows.queried * H * hd);
  const scale = c.scoreScale ?? 1 / Math.sqrt(hd);
  for (let m = 0; m < rows.queried; m++) {
    const slot = rows.slot[m];
    const n = rows.pos[m] + 1 - startOf(c, slot);
    const lo = windowStart(c, rows.pos[m]) - startOf(c, slot);
    assert(lo >= 0, `row ${m} attends to positions its slot does not hold`);
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / Hkv));
      const scores = new Float64Array(n).fill(-Infinity);
      let max = -Infinity;
      for (let j = lo; j < n; j++) {
        const r = rowOf[slot][j];
        let s = 0;
        for (let d = 0; d < hd; d++) {
          s += rotated[m * width + h * hd + d] * held[r * width + (H + kvh) * hd + d];
        }
        scores[j] = s * scale;
        max = Math.max(max, scores[j]);
      }
      let total = 0;
      for (let j = lo; j < n; j++) total += scores[j] = Math.exp(scores[j] - max);
      for (let j = lo; j < n; j++) {
        const r = rowOf[slot][j];
        const p = scores[j] / total;
        for (let d = 0; d < hd; d++) {
          out[(m * H + h) * hd + d] += p * held[r * width + (H + Hkv + kvh) * hd + d];
        }
      }
    }
  }
  return out;
}

interface Setup {
  kv: DeviceKv;
  layout: KvLayout;
  rows: Rows;
  qkv: Float32Array;
  /** qkv with q and k rotated by each row's position, in float64. */
  rotated: Float64Array;
  qkvBuf: GPUBuffer;
  slotBuf: GPUBuffer;
  posBuf: GPUBuffer;
  invFreqBuf: GPUBuffer;
  /**
   * tables[slot][i] = the block of layer LAYER (within its arena) holding positions i * BLOCK..,
   * from the slot's first block on; before it, a spare block that stays poisoned.
   */
  tables: number[][];
}

function setup(gpu: Gpu, c: Case, next: () => number): Setup {
  const firstBlock = c.lengths.map((_, slot) => Math.floor(startOf(c, slot) / BLOCK));
  const endBlock = c.lengths.map((len, slot) => Math.ceil((startOf(c, slot) + len) / BLOCK));
  const blocksPerSlot = endBlock.map((end, slot) => end - firstBlock[slot]);
  const needed = blocksPerSlot.reduce((a, b) => a + b, 0);
  const split = c.arenas === "split";
  const layout: KvLayout = {
    numLayers: NUM_LAYERS,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    blockSize: BLOCK,
    blocksPerArena: split ? [needed + 5, needed + 3] : [2 * needed + 3],
    layerArena: split ? [0, 1] : [0, 0],
    maxSlots: c.lengths.length + 1,
    maxBlocksPerSeq: Math.max(...endBlock) + 2,
  };
  const kv = new DeviceKv(gpu, layout);
  // NaN in every element of both dtypes: a read of an unwritten block poisons the output.
  for (const buffer of [...kv.k, ...kv.v]) {
    writeBytes(gpu, buffer, 0, new Uint8Array(buffer.size).fill(0xff));
  }

  // Shuffled block ids. In one arena, the layers' blocks are disjoint and mixed: layer 0's blocks
  // (never written) lie between LAYER's, so reading or writing through the wrong layer's table
  // meets NaN. With an arena per layer, each layer gets its own shuffle of its arena.
  const tables: number[][] = [];
  const shuffled = layout.blocksPerArena.map((n) =>
    shuffle(Array.from({ length: n }, (_, i) => i), next)
  );
  let at = 0;
  for (const layer of [LAYER, 0]) {
    const ids = shuffled[layout.layerArena[layer]];
    if (split) at = 0;
    blocksPerSlot.forEach((count, slot) => {
      const blocks = ids.slice(at, at += count);
      kv.writeTable(slot, layer, blocks, firstBlock[slot]);
      if (layer === LAYER) tables[slot] = blocks;
    });
  }
  // Entries before a slot's first block: a block of LAYER's arena that nobody writes.
  const spare = shuffled[layout.layerArena[LAYER]][split ? needed : 2 * needed];
  tables.forEach((blocks, slot) => {
    const before = new Array<number>(firstBlock[slot]).fill(spare);
    if (before.length > 0) kv.writeTable(slot, LAYER, before);
    tables[slot] = [...before, ...blocks];
  });

  const rows = buildRows(c, next);
  const width = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
  const qkv = new Float32Array(randomArray(next, rows.slot.length * width, 2));
  // No RoPE still binds a (never read) frequency buffer.
  const invFreq = testInvFreq(c.rotaryDim || c.headDim, c.theta ?? 10000);
  return {
    kv,
    layout,
    rows,
    qkv,
    rotated: ropeRows(qkv, rows.pos, c, invFreq),
    qkvBuf: uploadStorage(gpu, qkv),
    slotBuf: uploadStorage(gpu, rows.slot),
    posBuf: uploadStorage(gpu, rows.pos),
    invFreqBuf: uploadStorage(gpu, invFreq),
    tables,
  };
}

function kernelArgs(c: Case, s: Setup) {
  return {
    k: s.kv.kOf(LAYER),
    v: s.kv.vOf(LAYER),
    blockTable: s.kv.blockTable,
    layer: LAYER,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    blockSize: BLOCK,
    maxSlots: s.layout.maxSlots,
    maxBlocksPerSeq: s.layout.maxBlocksPerSeq,
    window: c.window ?? 0,
    invFreq: s.invFreqBuf,
    rotaryDim: c.rotaryDim,
    ropeScale: c.ropeScale,
    scoreScale: c.scoreScale,
  };
}

/**
 * Fills with NaN every block of layer LAYER that lies wholly before the windows of all queried
 * rows of its slot (what the runtime frees); returns how many.
 */
function poisonOutsideWindows(gpu: Gpu, c: Case, s: Setup): number {
  const firstRead = c.lengths.map(() => Infinity);
  for (let m = 0; m < s.rows.queried; m++) {
    const slot = s.rows.slot[m];
    firstRead[slot] = Math.min(firstRead[slot], windowStart(c, s.rows.pos[m]));
  }
  const blockBytes = BLOCK * c.numKvHeads * c.headDim * (kvIsF16(gpu) ? 2 : 4);
  let poisoned = 0;
  s.tables.forEach((blocks, slot) => {
    const dead = Math.min(blocks.length, Math.floor(firstRead[slot] / BLOCK));
    for (const block of new Set(blocks.slice(0, dead))) {
      for (const cache of [s.kv.kOf(LAYER), s.kv.vOf(LAYER)]) {
        writeBytes(gpu, cache, block * blockBytes, new Uint8Array(blockBytes).fill(0xff));
      }
      poisoned++;
    }
  });
  return poisoned;
}

/** Runs attention on `qkv` rows (already in the cache) and returns out. */
async function runAttention(
  gpu: Gpu,
  c: Case,
  s: Setup,
  bufs: { qkv: GPUBuffer; slot: GPUBuffer; pos: GPUBuffer },
  rows: number,
): Promise<Float32Array> {
  const count = rows * c.numHeads * c.headDim;
  const out = poisonedF32(gpu, count);
  const attention = bindAttention(gpu, {
    ...kernelArgs(c, s),
    qkv: bufs.qkv,
    rowSlot: bufs.slot,
    rowPos: bufs.pos,
    out,
  });
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  attention.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  const result = await readF32(gpu, out, count);
  out.destroy();
  return result;
}

/**
 * Checks every written cache entry of layer LAYER: K is its rotated qkv source rounded to the
 * cache's dtype (±1 f16 ulp + ROPE_BOUND), V its qkv source so rounded (±1 f16 ulp). Returns what
 * the cache holds, qkv-shaped (k and v parts).
 */
async function checkCache(gpu: Gpu, c: Case, s: Setup): Promise<Float64Array> {
  const { numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const width = (H + 2 * Hkv) * hd;
  const read = async (buf: GPUBuffer) => {
    const bytes = await readBack(gpu, buf);
    return gpu.f16 ? Array.from(new Uint16Array(bytes), f16BitsToF32) : new Float32Array(bytes);
  };
  const [k, v] = [await read(s.kv.kOf(LAYER)), await read(s.kv.vOf(LAYER))];
  const held = new Float64Array(s.qkv.length);
  for (let r = 0; r < s.rows.slot.length; r++) {
    const pos = s.rows.pos[r];
    const block = s.tables[s.rows.slot[r]][Math.floor(pos / BLOCK)];
    const base = (block * BLOCK + (pos % BLOCK)) * Hkv * hd;
    for (let e = 0; e < Hkv * hd; e++) {
      for (const [cache, src, rope] of [[k, H * hd, true], [v, (H + Hkv) * hd, false]] as const) {
        const want = roundW(gpu, (rope ? s.rotated : s.qkv)[r * width + src + e]);
        const got = cache[base + e];
        held[r * width + src + e] = got;
        const tol = (gpu.f16 ? Math.abs(want) * 2 ** -10 : 0) + (rope ? ROPE_BOUND : 0);
        if (!(Math.abs(got - want) <= tol)) {
          throw new Error(
            `cache of row ${r} (slot ${
              s.rows.slot[r]
            }, pos ${pos}) [${e}]: got ${got}, want ${want}`,
          );
        }
      }
    }
  }
  return held;
}

Deno.test("kv_write + attention match the float64 reference", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const c of CASES) {
      await t.step(`${label}: ${c.name}`, async () => {
        const seed = testSeed();
        try {
          const s = setup(gpu, c, rng(seed));
          const kvWrite = bindKvWrite(gpu, {
            ...kernelArgs(c, s),
            qkv: s.qkvBuf,
            rowSlot: s.slotBuf,
            rowPos: s.posBuf,
          });
          const count = s.rows.queried * c.numHeads * c.headDim;
          const out = poisonedF32(gpu, count);
          const attention = bindAttention(gpu, {
            ...kernelArgs(c, s),
            qkv: s.qkvBuf,
            rowSlot: s.slotBuf,
            rowPos: s.posBuf,
            out,
          });
          // Both in one pass, as in a step: attention reads what kv_write just wrote. With a
          // window, the cache is checked and the blocks outside every window poisoned between.
          const encoder = gpu.device.createCommandEncoder();
          let pass = encoder.beginComputePass();
          kvWrite.encode(pass, s.rows.slot.length);
          let held: Float64Array | undefined;
          if (c.window) {
            pass.end();
            gpu.device.queue.submit([encoder.finish()]);
            held = await checkCache(gpu, c, s);
            const poisoned = poisonOutsideWindows(gpu, c, s);
            if (c.name.includes("long")) assert(poisoned > 500, `only ${poisoned} blocks poisoned`);
          }
          const encoder2 = c.window ? gpu.device.createCommandEncoder() : encoder;
          if (c.window) pass = encoder2.beginComputePass();
          attention.encode(pass, s.rows.queried);
          pass.end();
          gpu.device.queue.submit([encoder2.finish()]);
          const got = await readF32(gpu, out, count);

          held ??= await checkCache(gpu, c, s);
          assertClose(got, reference(c, s.rows, s.rotated, held), BOUND[label], "attention out");
          out.destroy();
          s.kv.destroy();
        } catch (e) {
          throw new Error(`seed ${seed}: ${(e as Error).message}`, { cause: e });
        }
      });
    }
  }
});

Deno.test("attention of a row does not depend on the rest of the batch", async (t) => {
  const c = CASES[0];
  for (const { label, gpu } of await testGpus()) {
    await t.step(label, async () => {
      const seed = testSeed();
      const next = rng(seed);
      const s = setup(gpu, c, next);
      const kvWrite = bindKvWrite(gpu, {
        ...kernelArgs(c, s),
        qkv: s.qkvBuf,
        rowSlot: s.slotBuf,
        rowPos: s.posBuf,
      });
      const encoder = gpu.device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      kvWrite.encode(pass, s.rows.slot.length);
      pass.end();
      gpu.device.queue.submit([encoder.finish()]);

      const full = await runAttention(
        gpu,
        c,
        s,
        { qkv: s.qkvBuf, slot: s.slotBuf, pos: s.posBuf },
        s.rows.queried,
      );
      // A few rows alone, in another order.
      const width = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
      const picked = shuffle(Array.from({ length: s.rows.queried }, (_, i) => i), next).slice(0, 5);
      const qkv = new Float32Array(picked.length * width);
      picked.forEach((r, i) => qkv.set(s.qkv.subarray(r * width, (r + 1) * width), i * width));
      const alone = await runAttention(gpu, c, s, {
        qkv: uploadStorage(gpu, qkv),
        slot: uploadStorage(gpu, Uint32Array.from(picked, (r) => s.rows.slot[r])),
        pos: uploadStorage(gpu, Uint32Array.from(picked, (r) => s.rows.pos[r])),
      }, picked.length);
      const outWidth = c.numHeads * c.headDim;
      picked.forEach((r, i) => {
        assertEquals(
          Array.from(alone.subarray(i * outWidth, (i + 1) * outWidth)),
          Array.from(full.subarray(r * outWidth, (r + 1) * outWidth)),
          `seed ${seed}: row ${r} differs when run alone`,
        );
      });
      assert(full.every(Number.isFinite), `seed ${seed}: non-finite output`);
      s.kv.destroy();
    });
  }
});
