// The read-only bandwidth kernel (bench/kernels.ts's roofline) really reads every word: its
// per-lane totals add up to the buffer's wrapping u32 sum, for a full and a partial last workgroup.

import { createStorage, readU32, uploadStorage } from "../../engine/gpu/buffers.ts";
import { bindReadSum, readSumTotals } from "../../engine/gpu/kernels/read_sum.ts";
import { testGpu } from "../helpers/gpu.ts";
import { assertEquals, assertThrows } from "../helpers/testing.ts";

Deno.test("read_sum: the totals add up to the sum of every word read", async () => {
  const gpu = await testGpu();
  for (const bytes of [16 * 1024, 16 * 1024 + 48, 16]) {
    const words = Uint32Array.from({ length: bytes / 4 }, (_, i) => (i * 2654435761) >>> 0);
    const src = uploadStorage(gpu, words);
    const count = readSumTotals(bytes);
    const totals = createStorage(gpu, count * 4);
    const encoder = gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    bindReadSum(gpu, { src, bytes, totals }).encode(pass, 1);
    pass.end();
    gpu.device.queue.submit([encoder.finish()]);
    const got = (await readU32(gpu, totals, count)).reduce((s, v) => (s + v) >>> 0, 0);
    assertEquals(got, words.reduce((s, v) => (s + v) >>> 0, 0), `${bytes} bytes`);
    src.destroy();
    totals.destroy();
  }
  assertThrows(
    () =>
      bindReadSum(gpu, { src: createStorage(gpu, 16), bytes: 20, totals: createStorage(gpu, 16) }),
    RangeError,
  );
});
