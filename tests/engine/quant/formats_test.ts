// The GGML block formats' CPU decoders on hand-built blocks (the values GGML's byte layout defines),
// and the reference quantizers' round trip within stated bounds.

import {
  dequantize,
  QUANT_FORMATS,
  QUANT_TYPES,
  quantByteLength,
  quantFormatOfGgmlType,
  quantize,
  type QuantType,
} from "../../../engine/quant/formats.ts";
import { randomArray, rng, testSeed } from "../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

/** f16 bits of some exact values. */
const F16 = { "0.25": 0x3400, "0.5": 0x3800, "1": 0x3c00, "2": 0x4000 };

function f16le(bits: number): number[] {
  return [bits & 0xff, bits >> 8];
}

Deno.test("formats: sizes and GGUF type codes", () => {
  assertEquals(
    QUANT_TYPES.map((
      t,
    ) => [t, QUANT_FORMATS[t].ggmlType, QUANT_FORMATS[t].blockElems, QUANT_FORMATS[t].blockBytes]),
    [
      ["q8_0", 8, 32, 34],
      ["q4_0", 2, 32, 18],
      ["q4_k", 12, 256, 144],
      ["q6_k", 14, 256, 210],
      ["q4_1", 3, 32, 20],
      ["q5_0", 6, 32, 22],
      ["q5_1", 7, 32, 24],
      ["q5_k", 13, 256, 176],
      ["q3_k", 11, 256, 110],
      ["iq4_nl", 20, 32, 18],
      ["iq4_xs", 23, 256, 136],
    ],
  );
  assertEquals(quantFormatOfGgmlType(12)?.type, "q4_k");
  assertEquals(quantFormatOfGgmlType(1), undefined); // F16 is not a block format
  assertEquals(quantByteLength("q6_k", 512), 420);
  assertThrows(() => quantByteLength("q4_0", 48), RangeError);
  assertThrows(() => dequantize("q8_0", new Uint8Array(33), 32), RangeError);
});

Deno.test("q8_0: value i = d * int8 q[i]", () => {
  const q = Array.from({ length: 32 }, (_, i) => (i * 9 - 128) & 0xff);
  const got = dequantize("q8_0", Uint8Array.from([...f16le(F16["0.5"]), ...q]), 32);
  assertEquals(Array.from(got), q.map((b) => ((b << 24) >> 24) * 0.5));
});

Deno.test("q4_0: low nibbles are values 0..15, high nibbles 16..31, offset 8", () => {
  const qs = Array.from({ length: 16 }, (_, j) => j | ((15 - j) << 4));
  const got = dequantize("q4_0", Uint8Array.from([...f16le(F16["2"]), ...qs]), 32);
  const want = [
    ...Array.from({ length: 16 }, (_, j) => (j - 8) * 2),
    ...Array.from({ length: 16 }, (_, j) => (15 - j - 8) * 2),
  ];
  assertEquals(Array.from(got), want);
});

Deno.test("q4_k: 6-bit scales and mins packed in 12 bytes, d and dmin, 64-value nibble groups", () => {
  // Scales and mins above 15 exercise the high 2 bits that sub-blocks 4..7 borrow from bytes 0..7.
  const sc = [1, 2, 3, 4, 33, 45, 50, 63], m = [5, 6, 7, 8, 20, 31, 40, 60];
  const scales = new Array(12).fill(0);
  for (let j = 0; j < 4; j++) {
    scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    scales[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
    scales[j + 8] = (sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4);
  }
  const qs = Array.from({ length: 128 }, (_, i) => {
    const g = i >> 5, l = i & 31;
    return (l & 0xf) | (((l + g) & 0xf) << 4);
  });
  const block = Uint8Array.from([...f16le(F16["1"]), ...f16le(F16["0.5"]), ...scales, ...qs]);
  const got = dequantize("q4_k", block, 256);
  const want = new Float32Array(256);
  for (let g = 0; g < 4; g++) {
    for (let l = 0; l < 32; l++) {
      want[64 * g + l] = sc[2 * g] * (l & 0xf) - 0.5 * m[2 * g];
      want[64 * g + 32 + l] = sc[2 * g + 1] * ((l + g) & 0xf) - 0.5 * m[2 * g + 1];
    }
  }
  assertEquals(got, want);
});

Deno.test("q6_k: ql low bits, qh high bits, int8 scales per 16 values, d last", () => {
  const quant = (i: number) => (i * 7 + 3) & 63;
  const ql = new Array(128).fill(0), qh = new Array(64).fill(0);
  for (let n = 0; n < 2; n++) {
    for (let l = 0; l < 32; l++) {
      const [q1, q2, q3, q4] = [0, 32, 64, 96].map((o) => quant(128 * n + o + l));
      ql[64 * n + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
      ql[64 * n + 32 + l] = (q2 & 0xf) | ((q4 & 0xf) << 4);
      qh[32 * n + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
    }
  }
  const scales = Array.from({ length: 16 }, (_, j) => (j * 11 - 80) & 0xff); // negatives too
  const block = Uint8Array.from([...ql, ...qh, ...scales, ...f16le(F16["0.25"])]);
  const got = dequantize("q6_k", block, 256);
  const want = Float32Array.from(
    { length: 256 },
    (_, i) => 0.25 * ((scales[i >> 4] << 24) >> 24) * (quant(i) - 32),
  );
  assertEquals(got, want);
});

Deno.test("q4_1: nibbles as Q4_0's, value = d * q + m", () => {
  const qs = Array.from({ length: 16 }, (_, j) => ((j * 5) & 0xf) | ((15 - j) << 4));
  const block = Uint8Array.from([...f16le(F16["0.5"]), ...f16le(0xc000 /* -2 */), ...qs]);
  const got = dequantize("q4_1", block, 32);
  const want = [
    ...Array.from({ length: 16 }, (_, j) => ((j * 5) & 0xf) * 0.5 - 2),
    ...Array.from({ length: 16 }, (_, j) => (15 - j) * 0.5 - 2),
  ];
  assertEquals(Array.from(got), want);
});

/** 32 five-bit quants as GGML's qh (u32 little-endian, bit i = value i's fifth bit) and qs. */
function q5Bytes(q: number[]): number[] {
  let qh = 0;
  q.forEach((v, i) => qh |= (v >> 4) << i);
  const qs = Array.from({ length: 16 }, (_, j) => (q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
  return [qh & 0xff, (qh >>> 8) & 0xff, (qh >>> 16) & 0xff, qh >>> 24, ...qs];
}

/** Quants whose fifth bits differ along the block (so a swapped byte or bit order fails). */
const Q5 = Array.from({ length: 32 }, (_, i) => (i * 13 + 7) & 31);

Deno.test("q5_0: fifth bit i of the u32 qh for value i, offset 16", () => {
  const got = dequantize("q5_0", Uint8Array.from([...f16le(F16["2"]), ...q5Bytes(Q5)]), 32);
  assertEquals(Array.from(got), Q5.map((q) => (q - 16) * 2));
});

Deno.test("q5_1: q5_0's quants, value = d * q + m", () => {
  const block = Uint8Array.from([...f16le(F16["0.25"]), ...f16le(F16["1"]), ...q5Bytes(Q5)]);
  const got = dequantize("q5_1", block, 32);
  assertEquals(Array.from(got), Q5.map((q) => q * 0.25 + 1));
});

/** Q4_K's 12 packed bytes for eight 6-bit scales and mins. */
function k4Scales(sc: number[], m: number[]): number[] {
  const scales = new Array(12).fill(0);
  for (let j = 0; j < 4; j++) {
    scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    scales[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
    scales[j + 8] = (sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4);
  }
  return scales;
}

Deno.test("q5_k: q4_k's scales and nibble groups, fifth bit j of qh[l] for value 32j + l", () => {
  const sc = [1, 2, 3, 4, 33, 45, 50, 63], m = [5, 6, 7, 8, 20, 31, 40, 60];
  const quant = (i: number) => (i * 11 + (i >> 5)) & 31;
  const qh = new Array(32).fill(0), qs = new Array(128).fill(0);
  for (let i = 0; i < 256; i++) {
    const j = i >> 5, l = i & 31;
    qh[l] |= (quant(i) >> 4) << j;
    qs[32 * (j >> 1) + l] |= (quant(i) & 0xf) << (4 * (j & 1));
  }
  const block = Uint8Array.from([
    ...f16le(F16["1"]),
    ...f16le(F16["0.5"]),
    ...k4Scales(sc, m),
    ...qh,
    ...qs,
  ]);
  const got = dequantize("q5_k", block, 256);
  const want = Float32Array.from({ length: 256 }, (_, i) => {
    const j = i >> 5;
    return sc[j] * quant(i) - 0.5 * m[j];
  });
  assertEquals(got, want);
});

Deno.test("q3_k: 2 low bits in qs, high bit in hmask, 6-bit scales offset 32, d last", () => {
  // Value i = 128n + 32j + 16s + l: low bits at shift 2j of qs[32n + 16s + l], high bit at bit
  // 4n + j of hmask[16s + l]; scale k = i / 16 in 12 bytes (low nibbles of bytes 0..7 are scales
  // 0..7, their high nibbles 8..15; bytes 8..11 give the high bit pairs).
  const quant = (i: number) => (i * 5 + (i >> 4)) & 7;
  const scale = Array.from({ length: 16 }, (_, k) => (k * 23 + 9) & 63); // some below 32
  const hmask = new Array(32).fill(0), qs = new Array(64).fill(0), sb = new Array(12).fill(0);
  for (let i = 0; i < 256; i++) {
    const n = i >> 7, j = (i >> 5) & 3, s = (i >> 4) & 1, l = i & 15;
    qs[32 * n + 16 * s + l] |= (quant(i) & 3) << (2 * j);
    hmask[16 * s + l] |= (quant(i) >> 2) << (4 * n + j);
  }
  for (let k = 0; k < 16; k++) {
    sb[k % 8] |= (scale[k] & 0xf) << (k < 8 ? 0 : 4);
    sb[8 + (k % 4)] |= (scale[k] >> 4) << (2 * Math.floor(k / 4));
  }
  const block = Uint8Array.from([...hmask, ...qs, ...sb, ...f16le(F16["0.5"])]);
  const got = dequantize("q3_k", block, 256);
  const want = Float32Array.from(
    { length: 256 },
    (_, i) => 0.5 * (scale[i >> 4] - 32) * (quant(i) - 4),
  );
  assertEquals(got, want);
});

/** GGML's kvalues_iq4nl, written out here independently of the decoder's table. */
const IQ4 = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

Deno.test("iq4_nl: q4_0's nibble order, value = d * level[q]", () => {
  const qs = Array.from({ length: 16 }, (_, j) => j | (((j * 7 + 3) & 0xf) << 4));
  const got = dequantize("iq4_nl", Uint8Array.from([...f16le(F16["0.25"]), ...qs]), 32);
  const want = [
    ...Array.from({ length: 16 }, (_, j) => 0.25 * IQ4[j]),
    ...Array.from({ length: 16 }, (_, j) => 0.25 * IQ4[(j * 7 + 3) & 0xf]),
  ];
  assertEquals(Array.from(got), want);
});

Deno.test("iq4_xs: 6-bit scales (scales_l nibbles, scales_h bit pairs), iq4_nl levels", () => {
  const ls = [0, 63, 31, 32, 17, 48, 5, 40]; // offset 32: negative, zero and positive scales
  let scalesH = 0;
  const scalesL = [0, 0, 0, 0];
  ls.forEach((v, j) => {
    scalesL[j >> 1] |= (v & 0xf) << (4 * (j & 1));
    scalesH |= (v >> 4) << (2 * j);
  });
  const quant = (i: number) => (i * 3 + (i >> 5)) & 0xf;
  const qs = new Array(128).fill(0);
  for (let i = 0; i < 256; i++) {
    const j = i >> 5, r = i & 31;
    qs[16 * j + (r & 15)] |= quant(i) << (r < 16 ? 0 : 4);
  }
  const block = Uint8Array.from([...f16le(F16["0.5"]), ...f16le(scalesH), ...scalesL, ...qs]);
  const got = dequantize("iq4_xs", block, 256);
  const want = Float32Array.from(
    { length: 256 },
    (_, i) => 0.5 * (ls[i >> 5] - 32) * IQ4[quant(i)],
  );
  assertEquals(got, want);
});

/**
 * Round trip of uniform values in [-1, 1), per block: |x - dequantize(quantize(x))| <= bound ×
 * the block's largest |x|. q8_0: half a step of amax/127, plus f16 rounding of d. q4_0: the value
 * of largest magnitude maps to -8, so the other sign reaches only +7 steps of amax/8: up to one
 * step off. q4_k: half a step of the sub-block range / 15 (2/15), with 6-bit scale and min rounding.
 * q6_k: half a step of amax/31, with 8-bit scale rounding.
 */
const ROUND_TRIP: Record<QuantType, number> = {
  q8_0: 0.005,
  q4_0: 0.13,
  q4_k: 0.1,
  q6_k: 0.025,
  // Half a step of range / 15 (range <= 2 amax), plus f16 rounding of d and m.
  q4_1: 0.07,
  // As q4_0 with 32 levels: up to one step of amax / 16.
  q5_0: 0.065,
  // Half a step of range / 31.
  q5_1: 0.035,
  // Half a step of the sub-block range / 31, with 6-bit scale and min rounding (up to 31 · d/2).
  q5_k: 0.06,
  // Levels -4..3 of amax / 4 per 16 values: the other sign's largest clamps to 3, one step (0.25)
  // off, with 6-bit scale rounding.
  q3_k: 0.3,
  // Gaps of up to 24/127 between levels (half: 0.095), and the other sign's largest reaches only
  // 113/127.
  iq4_nl: 0.12,
  // As iq4_nl, with 6-bit sub-block scales (up to 1/62 of the largest).
  iq4_xs: 0.14,
};

Deno.test("quantize → dequantize stays within each format's bound", () => {
  for (const type of QUANT_TYPES) {
    const seed = testSeed();
    const next = rng(seed);
    const B = QUANT_FORMATS[type].blockElems;
    const x = Float32Array.from(randomArray(next, 4 * 256));
    x.fill(0, 256, 256 + B); // an all-zero block decodes to zeros
    const bytes = quantize(type, x);
    assertEquals(bytes.byteLength, quantByteLength(type, x.length));
    const y = dequantize(type, bytes, x.length);
    for (let b = 0; b < x.length / B; b++) {
      let amax = 0, err = 0;
      for (let i = b * B; i < (b + 1) * B; i++) {
        amax = Math.max(amax, Math.abs(x[i]));
        err = Math.max(err, Math.abs(x[i] - y[i]));
      }
      assert(
        err <= ROUND_TRIP[type] * amax,
        `${type} block ${b}: err ${err} > ${ROUND_TRIP[type]} × ${amax} (seed ${seed})`,
      );
    }
  }
});
