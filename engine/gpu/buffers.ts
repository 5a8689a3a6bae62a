// Small buffer helpers shared by the loader, the kernels and the tests.

import type { Gpu } from "./device.ts";

export const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
export const UNIFORM = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;

/** Rounds up to the 4-byte multiple WebGPU requires for buffer sizes and copies. */
export function align4(bytes: number): number {
  return Math.ceil(bytes / 4) * 4;
}

/**
 * Storage that a kernel may also bind as a uniform buffer: activations a quantized matmul reads as
 * x (matmul_quant.ts), where uniform loads are much cheaper than storage loads on llvmpipe.
 */
export const STORAGE_UNIFORM = STORAGE | GPUBufferUsage.UNIFORM;

export function createStorage(
  gpu: Gpu,
  bytes: number,
  label?: string,
  usage: GPUBufferUsageFlags = STORAGE,
): GPUBuffer {
  return gpu.device.createBuffer({ size: Math.max(16, align4(bytes)), usage, label });
}

export function createUniform(gpu: Gpu, bytes: number, label?: string): GPUBuffer {
  return gpu.device.createBuffer({
    size: Math.max(16, Math.ceil(bytes / 16) * 16),
    usage: UNIFORM,
    label,
  });
}

/** Creates a storage buffer holding `data` (zero-padded to 4 bytes). */
export function uploadStorage(gpu: Gpu, data: ArrayBufferView, label?: string): GPUBuffer {
  const buffer = createStorage(gpu, data.byteLength, label);
  writeBytes(gpu, buffer, 0, data);
  return buffer;
}

/** queue.writeBuffer that accepts any byte length (pads the tail to 4 bytes). */
export function writeBytes(
  gpu: Gpu,
  buffer: GPUBuffer,
  offset: number,
  data: ArrayBufferView,
): void {
  const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  if (bytes.byteLength % 4 === 0) {
    gpu.device.queue.writeBuffer(buffer, offset, bytes);
  } else {
    const padded = new Uint8Array(align4(bytes.byteLength));
    padded.set(bytes);
    gpu.device.queue.writeBuffer(buffer, offset, padded);
  }
}

/**
 * Copies `bytes` from `buffer` back to the host. This is a synchronous round trip (milliseconds):
 * tests, loading and benchmarks only, never inside a decode step.
 */
export async function readBack(
  gpu: Gpu,
  buffer: GPUBuffer,
  bytes = buffer.size,
  offset = 0,
): Promise<ArrayBuffer> {
  const size = align4(bytes);
  const staging = gpu.device.createBuffer({
    size,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  const encoder = gpu.device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, offset, staging, 0, size);
  gpu.device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = staging.getMappedRange().slice(0, bytes);
  staging.unmap();
  staging.destroy();
  return out;
}

export async function readF32(
  gpu: Gpu,
  buffer: GPUBuffer,
  count: number,
  offsetElems = 0,
): Promise<Float32Array> {
  return new Float32Array(await readBack(gpu, buffer, count * 4, offsetElems * 4));
}

export async function readU32(
  gpu: Gpu,
  buffer: GPUBuffer,
  count: number,
  offsetElems = 0,
): Promise<Uint32Array> {
  return new Uint32Array(await readBack(gpu, buffer, count * 4, offsetElems * 4));
}
