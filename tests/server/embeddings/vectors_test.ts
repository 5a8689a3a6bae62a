// The vectors on the way out: withDimensions (a Matryoshka model's prefix, renormalised) against a
// float64 reference (the prefix over its norm) on random vectors of several lengths, odd ones too,
// within float32's rounding; base64Of decoded byte by byte as little-endian float32 gives back
// exactly the values, including negative zero and subnormals.

import { base64Of, withDimensions } from "../../../server/embeddings/vectors.ts";
import { fakeEmbedder } from "../../helpers/fake_embedder.ts";

const shorten = (v: Float32Array, keep: number) =>
  withDimensions(fakeEmbedder({ dimensions: v.length, matryoshka: true }), [v], keep)[0];
import { assert, assertEquals } from "../../helpers/testing.ts";

/** A small seeded generator (xorshift32), so failures reproduce. */
function randomVector(length: number, seed: number): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length }, () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 0x80000000 - 1;
  });
}

Deno.test("withDimensions: the prefix renormalised, as a float64 reference computes it", () => {
  for (const [length, keep] of [[16, 8], [17, 5], [384, 128], [1023, 1], [64, 63]]) {
    const v = randomVector(length, length * 31 + keep);
    const got = shorten(v, keep);
    const prefix = Array.from(v.subarray(0, keep));
    const norm = Math.sqrt(prefix.reduce((s, x) => s + x * x, 0));
    assertEquals(got.length, keep);
    prefix.forEach((x, i) => {
      const want = x / norm;
      assert(Number.isFinite(got[i]), `component ${i} is ${got[i]}`);
      // float32 rounding of the sum and of each quotient: a few ulps of 1.
      assert(Math.abs(got[i] - want) <= 4e-7, `length ${length}, keep ${keep}, [${i}]`);
    });
    const length2 = got.reduce((s, x) => s + x * x, 0);
    assert(Math.abs(length2 - 1) < 1e-5, `squared norm ${length2}`);
  }
});

Deno.test("withDimensions: a zero prefix stays zero (no NaN)", () => {
  const got = shorten(Float32Array.from([0, 0, 0.6, 0.8]), 2);
  assertEquals(Array.from(got), [0, 0]);
});

Deno.test("base64Of: little-endian float32 bytes, decoded exactly", () => {
  const values = Float32Array.from([
    1,
    -2.5,
    0,
    -0,
    1e-45,
    3.4028234663852886e38,
    0.1,
    ...randomVector(37, 7),
  ]);
  const bytes = Uint8Array.from(atob(base64Of(values)), (ch) => ch.charCodeAt(0));
  assertEquals(bytes.length, values.length * 4);
  const view = new DataView(bytes.buffer);
  values.forEach((v, i) => assert(Object.is(view.getFloat32(i * 4, true), v), `[${i}]`));
  // 1.0f is 00 00 80 3f in little-endian order.
  assertEquals(Array.from(bytes.subarray(0, 4)), [0x00, 0x00, 0x80, 0x3f]);
});
