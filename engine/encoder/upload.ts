// Weights onto the device as the kernels read them (W: f16 where the adapter has shader-f16, else
// f32), from float values or from a safetensors tensor's bytes (copied as they are when the file
// already holds W).

import type { Gpu } from "../gpu/device.ts";
import { uploadStorage } from "../gpu/buffers.ts";
import { f16BitsToF32, toF16Array } from "../quant/half.ts";
import { decodeTensor, type StDtype } from "../formats/safetensors.ts";

/** Uploads `values` as W; `stored` is what the device holds (f16- or f32-rounded). */
export function uploadWeightValues(
  gpu: Gpu,
  values: ArrayLike<number>,
  label?: string,
): { buffer: GPUBuffer; stored: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return {
      buffer: uploadStorage(gpu, bits, label),
      stored: Float64Array.from(bits, f16BitsToF32),
    };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32, label), stored: Float64Array.from(f32) };
}

/** A tensor's file bytes as W: the bytes themselves where the dtype already matches. */
export function weightBytes(gpu: Gpu, bytes: Uint8Array, dtype: StDtype): ArrayBufferView {
  if (dtype === (gpu.f16 ? "F16" : "F32")) return bytes;
  const values = decodeTensor(bytes, dtype);
  return gpu.f16 ? toF16Array(values) : Float32Array.from(values);
}
