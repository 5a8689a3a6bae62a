// Moves a loaded matrix's parts from storage buffers into weight textures of the same bytes
// (engine/gpu/weight_texture.ts), one part at a time: the GPU copies each buffer into its texture
// and the buffer is freed, so only one part is ever held twice. The GGUF loader streams quantized
// blocks into buffers in a layout whose regions do not start on 16-byte texels row by row; moving
// whole parts afterwards keeps that loader as it is.

import type { Gpu } from "../gpu/device.ts";
import { createWeightTexture, TEXTURE_WIDTH } from "../gpu/weight_texture.ts";
import { matmulVectorShape } from "../gpu/kernels/matmul.ts";
import { isQuantType } from "../quant/formats.ts";
import type { GluMatrix, GpuMatrix, MatrixPart, ModelWeights } from "./model_weights.ts";

/**
 * Whether every part of `m` can be read from a texture: quantized parts always, float parts on the
 * matmul's vector path (ldy: the columns of y the parts fill).
 */
export function texturable(m: GpuMatrix | GluMatrix): boolean {
  const ldy = "rows" in m ? m.rows : m.intermediate;
  return m.parts.every((p) => {
    const format = p.format ?? m.format;
    return (format && isQuantType(format)) || matmulVectorShape(m.cols, p.rows, ldy, p.rowStart);
  });
}

/** Every matrix of `w` the texture kernels can read moved into textures (the embedding too). */
export function weightsToTextures(gpu: Gpu, w: ModelWeights): ModelWeights {
  const move = <M extends GpuMatrix | GluMatrix>(m: M): M =>
    texturable(m) ? moveToTextures(gpu, m) : m;
  const embed = move(w.embed);
  return {
    ...w,
    embed,
    lmHead: w.lmHead === w.embed ? embed : move(w.lmHead),
    layers: w.layers.map((l) => ({
      ...l,
      qkv: move(l.qkv),
      o: move(l.o),
      gateUp: move(l.gateUp),
      down: move(l.down),
    })),
  };
}

/** `m` with each buffer part replaced by a texture of its bytes (the buffers are destroyed). */
export function moveToTextures<M extends GpuMatrix | GluMatrix>(gpu: Gpu, m: M): M {
  const parts: MatrixPart[] = m.parts.map((part) => {
    if (!part.buffer) return part;
    const texture = copyToTexture(gpu, part.buffer);
    part.buffer.destroy();
    return { texture, rowStart: part.rowStart, rows: part.rows, format: part.format };
  });
  return { ...m, parts };
}

/** A weight texture holding `buffer`'s bytes, its last texel zero-padded. */
function copyToTexture(gpu: Gpu, buffer: GPUBuffer): GPUTexture {
  const bytes = buffer.size;
  const texture = createWeightTexture(gpu, bytes, buffer.label);
  const rowBytes = TEXTURE_WIDTH * 16;
  const texels = Math.floor(bytes / 16), tail = bytes % 16;
  const whole = Math.floor(texels / TEXTURE_WIDTH), rest = texels % TEXTURE_WIDTH;
  const encoder = gpu.device.createCommandEncoder();
  const copy = (source: GPUBuffer, offset: number, at: number, width: number, height: number) =>
    encoder.copyBufferToTexture(
      { buffer: source, offset, bytesPerRow: rowBytes },
      { texture, origin: [at % TEXTURE_WIDTH, Math.floor(at / TEXTURE_WIDTH)] },
      [width, height],
    );
  if (whole > 0) copy(buffer, 0, 0, TEXTURE_WIDTH, whole);
  if (rest > 0) copy(buffer, whole * rowBytes, whole * TEXTURE_WIDTH, rest, 1);
  // A buffer ending inside a texel (quantized parts' D region is whole u32 words, not texels):
  // its tail goes through a zeroed 16-byte buffer, as a copy may not read past the buffer.
  let padded: GPUBuffer | null = null;
  if (tail > 0) {
    padded = gpu.device.createBuffer({
      size: 16,
      usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    encoder.copyBufferToBuffer(buffer, texels * 16, padded, 0, tail);
    copy(padded, 0, texels, 1, 1);
  }
  gpu.device.queue.submit([encoder.finish()]);
  padded?.destroy();
  return texture;
}
