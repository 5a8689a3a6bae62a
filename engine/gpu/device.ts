// Opens the WebGPU adapter and device once, and records what the kernels may rely on.

export interface Gpu {
  device: GPUDevice;
  /** Human-readable adapter description for logs ("llvmpipe (LLVM 15...)"). */
  adapterName: string;
  /** True when weights and KV are stored as f16 (adapter has shader-f16 and it was not disabled). */
  f16: boolean;
  /** Largest storage-buffer binding; tensors above it are split. */
  maxBinding: number;
  /** Largest single buffer the device allows. */
  maxBufferSize: number;
}

export interface GpuOptions {
  /** Force the f32 path even where shader-f16 exists (tests cover both paths on one adapter). */
  forceF32?: boolean;
}

export async function openGpu(options: GpuOptions = {}): Promise<Gpu> {
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
  const requiredFeatures: GPUFeatureName[] = canF16 ? ["shader-f16"] : [];
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
    f16: canF16,
    maxBinding: lim.maxStorageBufferBindingSize,
    maxBufferSize: lim.maxBufferSize,
  };
}
