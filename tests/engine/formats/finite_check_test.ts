// firstNonFinite over raw checkpoint bytes: NaN and ±Inf found at any position in every dtype
// (odd lengths and unaligned views included), finite extremes (max, subnormals, -0) let through.

import { firstNonFinite } from "../../../engine/formats/finite_check.ts";
import { encodeTensor, type StDtype } from "../../../engine/formats/safetensors.ts";
import { assertEquals } from "../../helpers/testing.ts";

const DTYPES: StDtype[] = ["F32", "F16", "BF16"];

/** Finite values near each dtype's limits (F16 max is 65504; subnormals; signed zero). */
const EDGES = [0, -0, 1, -2.5, 65504, -65504, 6e-8, 1e-30, 3e38];

Deno.test("finite check: finite values pass in every dtype", () => {
  for (const dtype of DTYPES) {
    const values = EDGES.filter((v) => dtype !== "F16" || Math.abs(v) <= 65504);
    for (let n = 0; n <= values.length; n++) {
      assertEquals(
        firstNonFinite(encodeTensor(Float64Array.from(values.slice(0, n)), dtype), dtype),
        -1,
      );
    }
  }
});

Deno.test("finite check: NaN and ±Inf are found at their index", () => {
  for (const dtype of DTYPES) {
    for (const bad of [NaN, Infinity, -Infinity]) {
      for (const length of [1, 2, 3, 8, 33]) {
        for (let at = 0; at < length; at++) {
          const values = new Float64Array(length).fill(0.5);
          values[at] = bad;
          const raw = encodeTensor(values, dtype);
          assertEquals(firstNonFinite(raw, dtype), at, `${dtype} ${bad} at ${at} of ${length}`);
          // The same bytes at an offset that is not a multiple of 4.
          const shifted = new Uint8Array(raw.length + 2);
          shifted.set(raw, 2);
          assertEquals(firstNonFinite(shifted.subarray(2), dtype), at, `${dtype} unaligned`);
        }
      }
    }
  }
});
