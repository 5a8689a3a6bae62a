// kv_write + paged attention with a q8_0 KV cache (engine/kv/kv_format.ts) against float64, RoPE
// included: kv_write rotates each k head by its row's position before quantizing it, attention each
// q head as it loads it, so the reference rotates them in float64 (as attention_test.ts does).
//
// Each case writes K/V of all positions of several slots in one kv_write dispatch (rows shuffled,
// block tables shuffled, the cache poisoned with 0xff bytes, i.e. NaN scales, first), then runs
// attention for a prefix of those rows, as attention_test.ts does for f16/f32 (which also covers
// positions near 10^5: the rotation is the same rope_rotation.wgsl). Bounds:
//   - the cache: each group's scale is f16(max|x| / 127) of the rotated K or the V (to one f16 ulp:
//     the GPU divides in f32), and every value read back, q * d, is within d / 2 (+ f32 rounding
//     and, for K, the f32 rotation's ~3e-6 of max |x|) of its source x;
//   - attention against float64 attention over the values the cache holds (decoded here from the
//     cache's bytes): 1e-5 of max |out|, as for f16/f32 (only f32 summation order and exp differ);
//   - attention against float64 attention over the unquantized K/V: 2e-2 of max |out|. Inputs are
//     uniform in [-2, 2), so each value's error is at most d / 2 <= 2 / 254 (0.4 % of the range);
//     the scores' errors are sums of such errors over the head dim, and the output, a weighted mean
//     of V, carries V's own error plus the weights' (measured: 6e-3..1e-2 of max |out|).
// NaN never passes: outputs start as NaN, a read of an unwritten block meets a NaN scale, and a
// NaN written into K must come out of attention as a non-finite value, not as a finite int8.

import { type Gpu, withKvDtype } from "../../../../engine/gpu/device.ts";
import { readBack, readF32, uploadStorage, writeBytes } from "../../../../engine/gpu/buffers.ts";
import { f16BitsToF32, f32ToF16Bits } from "../../../../engine/quant/half.ts";
import { bindAttention } from "../../../../engine/gpu/kernels/attention.ts";
import { bindKvWrite } from "../../../../engine/gpu/kernels/kv_write.ts";
import { DeviceKv, type KvLayout } from "../../../../engine/kv/device_kv.ts";
import {
  kvBlockBytes,
  Q8_GROUP,
  q8QuantBytes,
  q8ScaleWordsPerRow,
} from "../../../../engine/kv/kv_format.ts";
import { assert, assertEquals, assertThrows } from "../../../helpers/testing.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { poisonedF32, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { ropeRows, testInvFreq } from "../../../helpers/rope_rows.ts";

const CACHE_BOUND = 1e-5;
/** A k value rotated in f32 against float64, absolute (attention_test.ts's ROPE_BOUND). */
const ROPE_BOUND = 1e-5;
const QUANTIZED_BOUND = 1e-5;
const UNQUANTIZED_BOUND = 2e-2;

interface Case {
  name: string;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  blockSize: number;
  lengths: number[];
  /** RoPE base (default 10000). */
  theta?: number;
  /** RoPE on the first rotaryDim values of each head only (default all; 0: none). */
  rotaryDim?: number;
  /** LongRoPE's attention factor on the turned values (default 1). */
  ropeScale?: number;
}

const CASES: Case[] = [
  {
    name: "MHA hd 64, lengths 1/17/61",
    numHeads: 2,
    numKvHeads: 2,
    headDim: 64,
    blockSize: 16,
    lengths: [1, 17, 61],
  },
  {
    name: "GQA 8:2 hd 128, lengths 33/3/129",
    numHeads: 8,
    numKvHeads: 2,
    headDim: 128,
    blockSize: 16,
    lengths: [33, 3, 129],
    theta: 500000,
  },
  // One group per row: a scale word holds one scale and a padding half.
  {
    name: "MQA hd 32, block 4, lengths 7/22",
    numHeads: 3,
    numKvHeads: 1,
    headDim: 32,
    blockSize: 4,
    lengths: [7, 22],
  },
  // Three groups per row: the second scale word is half padding.
  // hd 96: the second group of a head straddles its halves (values 32..63, the half at 48).
  {
    name: "GQA 6:3 hd 96, lengths 15/2/31",
    numHeads: 6,
    numKvHeads: 3,
    headDim: 96,
    blockSize: 8,
    lengths: [15, 2, 31],
  },
  {
    name: "GQA 9:3 hd 64, lengths 3/140",
    numHeads: 9,
    numKvHeads: 3,
    headDim: 64,
    blockSize: 16,
    lengths: [3, 140],
    theta: 100000,
  },
  {
    name: "GQA 4:2 hd 256, lengths 5/40",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 256,
    blockSize: 16,
    lengths: [5, 40],
  },
  // Phi-4-mini's partial rotary: 96 of 128 values turned, scaled; the q8 groups of 32 straddle
  // the turned and the passed values (64..95 turned, 96..127 not).
  {
    name: "partial rotary 96 of hd 128, LongRoPE scale",
    numHeads: 6,
    numKvHeads: 2,
    headDim: 128,
    blockSize: 16,
    lengths: [9, 33],
    rotaryDim: 96,
    ropeScale: 1.19,
  },
  {
    name: "no RoPE, hd 64",
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    blockSize: 8,
    lengths: [12],
    rotaryDim: 0,
  },
];

const NUM_LAYERS = 2;
const LAYER = 1;

function shuffle<T>(items: T[], next: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

interface Setup {
  kv: DeviceKv;
  layout: KvLayout;
  slot: Uint32Array;
  pos: Uint32Array;
  qkv: Float32Array;
  /** qkv with q and k rotated by each row's position, in float64. */
  rotated: Float64Array;
  invFreq: Float32Array;
  /** tables[slot] = block ids of layer LAYER, in position order. */
  tables: number[][];
}

function setup(gpu: Gpu, c: Case, next: () => number): Setup {
  const blocksPerSlot = c.lengths.map((len) => Math.ceil(len / c.blockSize));
  const needed = blocksPerSlot.reduce((a, b) => a + b, 0);
  const layout: KvLayout = {
    numLayers: NUM_LAYERS,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    blockSize: c.blockSize,
    blocksPerArena: [2 * needed + 3],
    layerArena: [0, 0],
    maxSlots: c.lengths.length,
    maxBlocksPerSeq: Math.max(...blocksPerSlot) + 1,
  };
  const kv = new DeviceKv(gpu, layout);
  for (const buffer of [...kv.k, ...kv.v]) {
    writeBytes(gpu, buffer, 0, new Uint8Array(buffer.size).fill(0xff));
  }
  // Layer 0's blocks (never written) lie between LAYER's.
  const ids = shuffle(Array.from({ length: layout.blocksPerArena[0] }, (_, i) => i), next);
  const tables: number[][] = [];
  let at = 0;
  for (const layer of [LAYER, 0]) {
    blocksPerSlot.forEach((count, slot) => {
      const blocks = ids.slice(at, at += count);
      kv.writeTable(slot, layer, blocks);
      if (layer === LAYER) tables[slot] = blocks;
    });
  }
  const all: [number, number][] = [];
  c.lengths.forEach((len, slot) => {
    for (let p = 0; p < len; p++) all.push([slot, p]);
  });
  shuffle(all, next);
  const width = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
  const pos = Uint32Array.from(all, (r) => r[1]);
  const qkv = new Float32Array(randomArray(next, all.length * width, 2));
  const invFreq = testInvFreq(c.rotaryDim || c.headDim, c.theta ?? 10000);
  return {
    kv,
    layout,
    slot: Uint32Array.from(all, (r) => r[0]),
    pos,
    qkv,
    rotated: ropeRows(qkv, pos, c, invFreq),
    invFreq,
    tables,
  };
}

/** Decodes one layer's q8_0 cache into float64 values indexed like the f16/f32 layout. */
function decodeQ8(
  bytes: ArrayBuffer,
  layout: KvLayout,
): { values: Float64Array; scales: Float64Array } {
  const { blockSize, numKvHeads: H, headDim: hd } = layout;
  const per = kvBlockBytes("q8_0", layout);
  const blocks = bytes.byteLength / per;
  const sw = q8ScaleWordsPerRow(hd);
  const q = new Int8Array(bytes);
  const halves = new Uint16Array(bytes);
  const values = new Float64Array(blocks * blockSize * H * hd);
  const scales = new Float64Array(blocks * blockSize * H * (hd / Q8_GROUP));
  for (let b = 0; b < blocks; b++) {
    for (let row = 0; row < blockSize * H; row++) {
      for (let g = 0; g < hd / Q8_GROUP; g++) {
        const half = (b * per + q8QuantBytes(layout) + (row * sw) * 4) / 2 + g;
        const d = f16BitsToF32(halves[half]);
        scales[(b * blockSize * H + row) * (hd / Q8_GROUP) + g] = d;
        for (let i = 0; i < Q8_GROUP; i++) {
          const e = row * hd + g * Q8_GROUP + i;
          values[b * blockSize * H * hd + e] = q[b * per + e] * d;
        }
      }
    }
  }
  return { values, scales };
}

/**
 * Float64 causal attention of every row, of its float64-rotated q, over K/V given per row by
 * `kvOf(row, part, e)`.
 */
function reference(
  c: Case,
  s: Setup,
  kvOf: (row: number, part: "k" | "v", e: number) => number,
): Float64Array {
  const { numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const width = (H + 2 * Hkv) * hd;
  const rowOf = c.lengths.map((len) => new Int32Array(len));
  for (let r = 0; r < s.slot.length; r++) rowOf[s.slot[r]][s.pos[r]] = r;
  const out = new Float64Array(s.slot.length * H * hd);
  const scale = 1 / Math.sqrt(hd);
  for (let m = 0; m < s.slot.length; m++) {
    const n = s.pos[m] + 1;
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / Hkv));
      const scores = new Float64Array(n);
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        const r = rowOf[s.slot[m]][j];
        let dot = 0;
        for (let d = 0; d < hd; d++) {
          dot += s.rotated[m * width + h * hd + d] * kvOf(r, "k", kvh * hd + d);
        }
        scores[j] = dot * scale;
        max = Math.max(max, scores[j]);
      }
      let total = 0;
      for (let j = 0; j < n; j++) total += scores[j] = Math.exp(scores[j] - max);
      for (let j = 0; j < n; j++) {
        const r = rowOf[s.slot[m]][j];
        const p = scores[j] / total;
        for (let d = 0; d < hd; d++) out[(m * H + h) * hd + d] += p * kvOf(r, "v", kvh * hd + d);
      }
    }
  }
  return out;
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
    blockSize: c.blockSize,
    maxSlots: s.layout.maxSlots,
    maxBlocksPerSeq: s.layout.maxBlocksPerSeq,
    rotaryDim: c.rotaryDim,
    ropeScale: c.ropeScale,
  };
}

/** kv_write of every row, then attention of every row, in one pass; returns out. */
async function writeAndAttend(gpu: Gpu, c: Case, s: Setup): Promise<Float32Array> {
  const bufs = {
    qkv: uploadStorage(gpu, s.qkv),
    rowSlot: uploadStorage(gpu, s.slot),
    rowPos: uploadStorage(gpu, s.pos),
    invFreq: uploadStorage(gpu, s.invFreq),
  };
  const count = s.slot.length * c.numHeads * c.headDim;
  const out = poisonedF32(gpu, count);
  const kvWrite = bindKvWrite(gpu, { ...kernelArgs(c, s), ...bufs });
  const attention = bindAttention(gpu, { ...kernelArgs(c, s), ...bufs, out });
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kvWrite.encode(pass, s.slot.length);
  attention.encode(pass, s.slot.length);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  const got = await readF32(gpu, out, count);
  for (const b of [...Object.values(bufs), out]) b.destroy();
  return got;
}

Deno.test("q8_0 KV: kv_write + attention match float64", async (t) => {
  for (const { label, gpu: base } of await testGpus()) {
    const gpu = withKvDtype(base, "q8_0");
    for (const c of CASES) {
      await t.step(`weights ${label}: ${c.name}`, async () => {
        const seed = testSeed();
        const s = setup(gpu, c, rng(seed));
        try {
          const got = await writeAndAttend(gpu, c, s);
          const { numHeads: H, numKvHeads: Hkv, headDim: hd, blockSize } = c;
          const width = (H + 2 * Hkv) * hd;
          const k = decodeQ8(await readBack(gpu, s.kv.kOf(LAYER)), s.layout);
          const v = decodeQ8(await readBack(gpu, s.kv.vOf(LAYER)), s.layout);
          // Where row r's K/V values sit in the decoded cache.
          const at = (r: number) => {
            const block = s.tables[s.slot[r]][Math.floor(s.pos[r] / blockSize)];
            return (block * blockSize + s.pos[r] % blockSize) * Hkv * hd;
          };
          // K as RoPE leaves it (float64), V as it is.
          const src = (r: number, part: "k" | "v", e: number) =>
            (part === "k" ? s.rotated : s.qkv)[r * width + (part === "k" ? H : H + Hkv) * hd + e];

          // The cache: scales and values, group by group.
          for (let r = 0; r < s.slot.length; r++) {
            for (const [part, cache] of [["k", k], ["v", v]] as const) {
              for (let g = 0; g < (Hkv * hd) / Q8_GROUP; g++) {
                let amax = 0;
                for (let i = 0; i < Q8_GROUP; i++) {
                  amax = Math.max(amax, Math.abs(src(r, part, g * Q8_GROUP + i)));
                }
                const want = f16BitsToF32(f32ToF16Bits(amax / 127));
                const d = cache.scales[at(r) / Q8_GROUP + g];
                const where = `seed ${seed}: ${part} of row ${r} group ${g}`;
                assert(Math.abs(d - want) <= want * 2 ** -10, `${where}: scale ${d}, want ${want}`);
                for (let i = 0; i < Q8_GROUP; i++) {
                  const e = g * Q8_GROUP + i;
                  const err = Math.abs(cache.values[at(r) + e] - src(r, part, e));
                  const rope = part === "k" ? ROPE_BOUND : 0;
                  assert(
                    err <= d / 2 + CACHE_BOUND * amax + rope,
                    `${where} [${i}]: error ${err} > d/2 = ${d / 2}`,
                  );
                }
              }
            }
          }

          const held = reference(c, s, (r, part, e) => (part === "k" ? k : v).values[at(r) + e]);
          assertClose(
            got,
            held,
            QUANTIZED_BOUND,
            `seed ${seed}: attention over the cache's values`,
          );
          const exact = reference(c, s, src);
          assertClose(
            got,
            exact,
            UNQUANTIZED_BOUND,
            `seed ${seed}: attention over unquantized K/V`,
          );
        } finally {
          s.kv.destroy();
        }
      });
    }
  }
});

Deno.test("q8_0 KV: a NaN in K is not quantized into a finite value", async () => {
  const [{ gpu: base }] = await testGpus();
  const gpu = withKvDtype(base, "q8_0");
  const c = CASES[0];
  const s = setup(gpu, c, rng(testSeed()));
  try {
    const width = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    // Row 0's K, head 0, value 5: every row of its slot at or after its position attends to it.
    s.qkv[0 * width + c.numHeads * c.headDim + 5] = NaN;
    const got = await writeAndAttend(gpu, c, s);
    const outWidth = c.numHeads * c.headDim;
    assert(
      !got.subarray(0, outWidth / c.numKvHeads).every(Number.isFinite),
      "row 0's heads over kv head 0 should not be finite",
    );
  } finally {
    s.kv.destroy();
  }
});

Deno.test("q8_0 KV: block bytes, and head dims that are not a multiple of 32 are refused", async () => {
  const dims = { blockSize: 16, numKvHeads: 8, headDim: 128 };
  // 34 bytes per 32 values against f16's 64.
  assertEquals(kvBlockBytes("q8_0", dims), (16 * 8 * 128 / 32) * 34);
  assertEquals(kvBlockBytes("f16", dims), 16 * 8 * 128 * 2);
  // hd 32: a scale word per row, half of it padding (36 bytes per 32 values).
  assertEquals(kvBlockBytes("q8_0", { blockSize: 4, numKvHeads: 1, headDim: 32 }), 4 * 36);
  assertThrows(() => kvBlockBytes("q8_0", { ...dims, headDim: 48 }), RangeError, "multiple of 32");
  const [{ gpu: base }] = await testGpus();
  const gpu = withKvDtype(base, "q8_0");
  assertThrows(
    () =>
      DeviceKv.layoutForBudget(gpu, { numLayers: 1, numKvHeads: 1, headDim: 16 }, 2 ** 20, 1, 64),
    RangeError,
    "multiple of 32",
  );
});
