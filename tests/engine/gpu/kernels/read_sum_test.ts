// The read-only bandwidth kernels (bench/kernels.ts's rooflines) really read every word: their
// per-lane totals add up to the wrapping u32 sum of the buffer (for a full and a partial last
// workgroup) or of the texture.

import { createStorage, readU32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import {
  bindReadSum,
  bindReadSumTexture,
  createReadSumTexture,
  READ_SUM_TEXTURE_WIDTH,
  readSumTextureTotals,
  readSumTotals,
} from "../../../../engine/gpu/kernels/read_sum.ts";
import { testGpu } from "../../../helpers/gpu.ts";
import { assertEquals, assertThrows } from "../../../helpers/testing.ts";

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

Deno.test("read_sum_texture: the totals add up to the sum of every texel word read", async () => {
  const gpu = await testGpu();
  const bytes = 2 * READ_SUM_TEXTURE_WIDTH * 16;
  const words = Uint32Array.from({ length: bytes / 4 }, (_, i) => (i * 2654435761) >>> 0);
  const texture = createReadSumTexture(gpu, bytes);
  gpu.device.queue.writeTexture({ texture }, words, { bytesPerRow: READ_SUM_TEXTURE_WIDTH * 16 }, [
    READ_SUM_TEXTURE_WIDTH,
    2,
  ]);
  const count = readSumTextureTotals(bytes);
  const totals = createStorage(gpu, count * 4);
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  bindReadSumTexture(gpu, { texture, totals }).encode(pass, 1);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  const got = (await readU32(gpu, totals, count)).reduce((s, v) => (s + v) >>> 0, 0);
  assertEquals(got, words.reduce((s, v) => (s + v) >>> 0, 0));
  texture.destroy();
  totals.destroy();
  assertThrows(() => createReadSumTexture(gpu, 16), RangeError);
});
