// The safetensors reader and writer: round trips in every loadable dtype, bf16 rounding, and
// headers that lie or are broken, each refused naming the file.

import { join } from "node:path";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";
import { expectLoadError, tempDir, writeRaw } from "../../helpers/model_files.ts";
import {
  decodeTensor,
  encodeTensor,
  f32ToBf16Bits,
  readSafetensorsContents,
  readSafetensorsHeader,
  readTensorInto,
  type StDtype,
  writeSafetensors,
} from "../../../engine/formats/safetensors.ts";
import { f16BitsToF32, f32ToF16Bits } from "../../../engine/quant/half.ts";

function roundTo(dtype: StDtype, v: number): number {
  if (dtype === "F32") return Math.fround(v);
  if (dtype === "F16") return f16BitsToF32(f32ToF16Bits(v));
  return Math.fround(v); // BF16 is checked separately against hand-rounded values
}

Deno.test("safetensors: write → header → readTensorInto round-trips F32, F16 and BF16", async () => {
  const seed = testSeed();
  const next = rng(seed);
  const dir = await tempDir();
  try {
    const dtypes: StDtype[] = ["F32", "F16", "BF16"];
    const shapes = [[3, 5], [7], [2, 3, 4], [], [0, 4]];
    const tensors = dtypes.flatMap((dtype) =>
      shapes.map((shape, i) => {
        const n = shape.reduce((a, b) => a * b, 1);
        const values = Array.from({ length: n }, () => (next() * 2 - 1) * 10);
        return { name: `${dtype}.t${i}`, dtype, shape, values, data: encodeTensor(values, dtype) };
      })
    );
    const path = join(dir, "m.safetensors");
    await writeSafetensors(path, tensors, { format: "pt" });
    const header = await readSafetensorsHeader(path);
    assertEquals([...header.keys()], tensors.map((t) => t.name));
    const { metadata } = await readSafetensorsContents(path);
    assertEquals(metadata, { format: "pt" });
    for (const t of tensors) {
      const info = header.get(t.name)!;
      assertEquals([info.dtype, info.shape, info.file], [t.dtype, t.shape, path]);
      const bytes = new Uint8Array(info.byteLength);
      await readTensorInto(info, bytes);
      assertEquals(bytes, t.data, `${t.name} bytes (seed ${seed})`);
      const decoded = decodeTensor(bytes, t.dtype);
      for (let i = 0; i < t.values.length; i++) {
        const v = t.values[i];
        if (t.dtype === "BF16") {
          // bf16 keeps 8 significant bits: within half an ulp (2^-8 relative) of the input.
          assert(
            Math.abs(decoded[i] - v) <= Math.abs(v) * 2 ** -8,
            `${t.name}[${i}] (seed ${seed})`,
          );
        } else {
          assertEquals(decoded[i], roundTo(t.dtype, v), `${t.name}[${i}] (seed ${seed})`);
        }
      }
    }
    // The data section starts 8-byte aligned (the header is space-padded).
    const first = header.get("F32.t0")!;
    assertEquals(first.dataOffset % 8, 0);
    await assertRejects(
      () => readTensorInto(first, new Uint8Array(first.byteLength + 1)),
      RangeError,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors: bf16 rounds to nearest even", () => {
  const bits = (v: number) => f32ToBf16Bits(v);
  assertEquals(bits(1), 0x3f80);
  assertEquals(bits(-2), 0xc000);
  assertEquals(bits(1 + 2 ** -8), 0x3f80); // halfway, tie to the even mantissa (1.0)
  assertEquals(bits(1 + 3 * 2 ** -8), 0x3f82); // halfway, tie to even (1 + 2^-6)
  assertEquals(bits(1 + 2 ** -8 + 2 ** -12), 0x3f81); // above halfway rounds up
  assertEquals(bits(Infinity), 0x7f80);
  assertEquals(bits(NaN) & 0x7fc0, 0x7fc0);
  assertEquals([...decodeTensor(encodeTensor([1.5, -0.375, 3e38], "BF16"), "BF16")].slice(0, 2), [
    1.5,
    -0.375,
  ]);
});

Deno.test("safetensors: lying or broken headers are rejected", async (t) => {
  const dir = await tempDir();
  const path = join(dir, "bad.safetensors");
  const fails = async (problem: RegExp) =>
    await assertRejects(
      () => readSafetensorsHeader(path),
      (e) => expectLoadError(e, "bad.safetensors", problem),
    );
  const data = new Uint8Array(64);
  try {
    await t.step("missing file", async () => {
      await fails(/missing/);
    });
    await t.step("shorter than the length prefix", async () => {
      await Deno.writeFile(path, new Uint8Array(5));
      await fails(/too short/);
    });
    await t.step("header length past the end of the file", async () => {
      const bytes = new Uint8Array(40);
      new DataView(bytes.buffer).setBigUint64(0, 1000n, true);
      await Deno.writeFile(path, bytes);
      await fails(/header length 1000 runs past the end/);
    });
    await t.step("header is not JSON", async () => {
      await writeRaw(path, "{not json", data);
      await fails(/not valid JSON/);
    });
    await t.step("offsets past the end of the file", async () => {
      await writeRaw(path, { a: { dtype: "F32", shape: [32], data_offsets: [0, 128] } }, data);
      await fails(/"a" ends at byte \d+ but the file has only \d+ bytes/);
    });
    await t.step("offsets disagree with the shape", async () => {
      await writeRaw(path, { a: { dtype: "F32", shape: [4], data_offsets: [0, 12] } }, data);
      await fails(/span 12 bytes but F32 shape \[4\] needs 16/);
    });
    await t.step("overlapping tensors", async () => {
      await writeRaw(path, {
        a: { dtype: "F32", shape: [8], data_offsets: [0, 32] },
        empty: { dtype: "F32", shape: [0], data_offsets: [20, 20] },
        b: { dtype: "F16", shape: [8], data_offsets: [24, 40] },
      }, data);
      await fails(/"a" \[0, 32\) and "b" \[24, 40\) overlap/);
    });
    await t.step("unsupported and unknown dtypes", async () => {
      await writeRaw(path, {
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        q: { dtype: "I8", shape: [4], data_offsets: [8, 12] },
      }, data);
      await fails(/"q" has dtype I8, which is not supported/);
      const contents = await readSafetensorsContents(path);
      assertEquals([...contents.tensors.keys()], ["a"]);
      assertEquals(contents.unsupported.get("q")?.dtype, "I8");
      await writeRaw(path, { a: { dtype: "Q4_K", shape: [2], data_offsets: [0, 8] } }, data);
      await fails(/unknown dtype "Q4_K"/);
    });
    await t.step("truncated after a valid header", async () => {
      await writeSafetensors(path, [{
        name: "w",
        dtype: "F16",
        shape: [16],
        data: new Uint8Array(32),
      }]);
      const full = await Deno.readFile(path);
      await Deno.writeFile(path, full.subarray(0, full.length - 5));
      await fails(/"w" ends at byte \d+ but the file has only \d+ bytes \(truncated\?\)/);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
