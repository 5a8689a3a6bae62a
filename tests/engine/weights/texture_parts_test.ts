// Moving a loaded matrix's parts into weight textures: every byte lands at its word's texel, across
// texture rows and in a last texel the buffer only partly fills (zero-padded), and the buffers go.

import { uploadStorage } from "../../../engine/gpu/buffers.ts";
import { TEXTURE_WIDTH } from "../../../engine/gpu/weight_texture.ts";
import { moveToTextures } from "../../../engine/weights/texture_parts.ts";
import type { GpuMatrix } from "../../../engine/weights/model_weights.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

/** The texture's first `bytes` bytes in word order, and the rest of its last texel. */
async function textureBytes(gpu: Awaited<ReturnType<typeof testGpu>>, texture: GPUTexture) {
  const rowBytes = TEXTURE_WIDTH * 16;
  const out = gpu.device.createBuffer({
    size: rowBytes * texture.height,
    usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
  });
  const encoder = gpu.device.createCommandEncoder();
  encoder.copyTextureToBuffer({ texture }, { buffer: out, bytesPerRow: rowBytes }, [
    TEXTURE_WIDTH,
    texture.height,
  ]);
  gpu.device.queue.submit([encoder.finish()]);
  await out.mapAsync(GPUMapMode.READ);
  const bytes = new Uint8Array(out.getMappedRange().slice(0));
  out.unmap();
  out.destroy();
  return bytes;
}

Deno.test("moveToTextures: each part's bytes in word order, the buffers destroyed", async () => {
  const gpu = await testGpu();
  // Two rows of texels and 3 more, then 8 bytes of a last texel; and a part of one texel.
  const sizes = [(2 * TEXTURE_WIDTH + 3) * 16 + 8, 16];
  const data = sizes.map((n) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff));
  const buffers = data.map((d) => uploadStorage(gpu, d));
  const m: GpuMatrix = {
    rows: 8,
    cols: 4,
    parts: buffers.map((buffer, i) => ({ buffer, rowStart: 4 * i, rows: 4 })),
    format: "q8_0",
  };
  const moved = moveToTextures(gpu, m);
  assertEquals(moved.rows, 8);
  assertEquals(moved.format, "q8_0");
  for (const [i, part] of moved.parts.entries()) {
    assert(part.texture && !part.buffer, `part ${i} is a texture`);
    assertEquals([part.rowStart, part.rows], [4 * i, 4]);
    const got = await textureBytes(gpu, part.texture);
    const bad = data[i].findIndex((v, j) => got[j] !== v);
    assertEquals(bad, -1, `part ${i}: first wrong byte ${bad} of ${sizes[i]}`);
    const texelEnd = Math.ceil(sizes[i] / 16) * 16;
    assert(got.subarray(sizes[i], texelEnd).every((b) => b === 0), `part ${i}'s padding`);
    part.texture.destroy();
  }
  // A destroyed buffer refuses to be used: mapping it fails.
  for (const b of buffers) {
    const encoder = gpu.device.createCommandEncoder();
    gpu.device.pushErrorScope("validation");
    encoder.copyBufferToBuffer(b, 0, b, 16, 0);
    gpu.device.queue.submit([encoder.finish()]);
    assert(await gpu.device.popErrorScope(), "the buffer was destroyed");
  }
});
