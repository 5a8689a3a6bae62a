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
    [["q8_0", 8, 32, 34], ["q4_0", 2, 32, 18], ["q4_k", 12, 256, 144], ["q6_k", 14, 256, 210]],
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

/**
 * Round trip of uniform values in [-1, 1), per block: |x - dequantize(quantize(x))| <= bound ×
 * the block's largest |x|. q8_0: half a step of amax/127, plus f16 rounding of d. q4_0: the value
 * of largest magnitude maps to -8, so the other sign reaches only +7 steps of amax/8: up to one
 * step off. q4_k: half a step of the sub-block range / 15 (2/15), with 6-bit scale and min rounding.
 * q6_k: half a step of amax/31, with 8-bit scale rounding.
 */
const ROUND_TRIP: Record<QuantType, number> = { q8_0: 0.005, q4_0: 0.13, q4_k: 0.1, q6_k: 0.025 };

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
