// Opens the WebGPU adapter and device once, and records what the kernels may rely on.

import { chooseWebgpuBackend } from "./backend.ts";

export interface Gpu {
  device: GPUDevice;
  /** Human-readable adapter description for logs ("llvmpipe (LLVM 15...)"). */
  adapterName: string;
  /**
   * Everything the adapter says of itself (vendor, architecture, device, description) and the
   * runtime's version: what a kernel choice measured on it is cached under (matmul_choice.ts).
   */
  adapterId?: string;
  /** True when weights are stored as f16 (adapter has shader-f16 and it was not disabled). */
  f16: boolean;
  /** The KV cache's storage; absent: the same as the weights (see kvDtypeOf). */
  kvDtype?: KvDtype;
  /** Largest storage-buffer binding; tensors above it are split. */
  maxBinding: number;
  /** Largest single buffer the device allows. */
  maxBufferSize: number;
}

/**
 * How the KV cache stores K and V: f16 or f32 values, or q8_0 (GGML-style blocks of 32 int8 values
 * with an f16 scale each, engine/kv/kv_format.ts), which needs no shader-f16.
 */
export type KvDtype = "f16" | "f32" | "q8_0";

export const KV_DTYPES: readonly KvDtype[] = ["f16", "f32", "q8_0"];

/** The KV cache's dtype: as chosen (--kv-dtype), else as the weights. */
export function kvDtypeOf(gpu: Gpu): KvDtype {
  return gpu.kvDtype ?? (gpu.f16 ? "f16" : "f32");
}

/** Whether the KV cache holds f16 values. */
export function kvIsF16(gpu: Gpu): boolean {
  return kvDtypeOf(gpu) === "f16";
}

/** `gpu` with its KV dtype set; refused where the device cannot run f16 shaders. */
export function withKvDtype(gpu: Gpu, kvDtype: KvDtype | undefined): Gpu {
  if (kvDtype === undefined) return gpu;
  if (kvDtype === "f16" && !gpu.device.features.has("shader-f16")) {
    throw new Error("--kv-dtype f16 needs an adapter with shader-f16; this one has none");
  }
  return { ...gpu, kvDtype };
}

export interface GpuOptions {
  /** Force the f32 path even where shader-f16 exists (tests cover both paths on one adapter). */
  forceF32?: boolean;
}

export async function openGpu(options: GpuOptions = {}): Promise<Gpu> {
  chooseWebgpuBackend();
  if (!("gpu" in navigator) || !navigator.gpu) {
    throw new Error("WebGPU is not available in this runtime (navigator.gpu is missing)");
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) {
    throw new Error(
      "no WebGPU adapter found; on Linux install a Vulkan driver (apt-get install -y mesa-vulkan-drivers)",
    );
  }
  const canF16 = adapter.features.has("shader-f16") && !options.forceF32;
  // Requested even for f32 weights, so that an f16 KV cache stays possible (--kv-dtype f16).
  const requiredFeatures: GPUFeatureName[] = adapter.features.has("shader-f16")
    ? ["shader-f16"]
    : [];
  // For benchmarks' per-kernel timing (bench/common/kernel_timer.ts); nothing in serving uses it.
  if (adapter.features.has("timestamp-query")) requiredFeatures.push("timestamp-query");
  const lim = adapter.limits;
  const device = await adapter.requestDevice({
    requiredFeatures,
    requiredLimits: {
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
      maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
      maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: lim.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupsPerDimension: lim.maxComputeWorkgroupsPerDimension,
    },
  });
  device.addEventListener("uncapturederror", (e) => {
    console.error("WebGPU error:", (e as GPUUncapturedErrorEvent).error.message);
  });
  return {
    device,
    adapterName: adapter.info.description || adapter.info.vendor || "unknown adapter",
    adapterId: [
      adapter.info.vendor,
      adapter.info.architecture,
      adapter.info.device,
      adapter.info.description,
      `deno ${Deno.version.deno}`,
    ].join(" | "),
    f16: canF16,
    maxBinding: lim.maxStorageBufferBindingSize,
    maxBufferSize: lim.maxBufferSize,
  };
}
