// Builds WGSL modules from the files in shaders/ and caches their pipelines.
//
// Every shader file is written against a small prelude rather than concrete types:
//   W   the storage type of weights (f16 where the adapter has shader-f16, else f32)
//   KV  the storage type of the KV cache (as W unless --kv-dtype says otherwise; f32 for q8_0,
//       whose shaders read the cache as packed u32 words and do not use KV)
//   any `const NAME` passed in `consts` (e.g. head dim), so arrays can be sized at compile time.
// Activations are always f32 and every reduction accumulates in f32.

import { type Gpu, kvIsF16 } from "./device.ts";

export type ShaderConsts = Record<string, number>;

export function shaderPrelude(gpu: Gpu, consts: ShaderConsts = {}): string {
  const kvF16 = kvIsF16(gpu);
  const lines = [
    ...(gpu.f16 || kvF16 ? ["enable f16;"] : []),
    `alias W = ${gpu.f16 ? "f16" : "f32"};`,
    `alias KV = ${kvF16 ? "f16" : "f32"};`,
  ];
  for (const [name, value] of Object.entries(consts)) {
    if (!Number.isInteger(value) || value < 0) {
      throw new Error(`shader const ${name}=${value} must be a u32`);
    }
    lines.push(`const ${name}: u32 = ${value}u;`);
  }
  return lines.join("\n") + "\n";
}

const pipelineCaches = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

/** Returns the compute pipeline for (source, entry, consts), compiling it only the first time. */
export function getPipeline(
  gpu: Gpu,
  source: string,
  entryPoint: string,
  consts: ShaderConsts = {},
): GPUComputePipeline {
  let cache = pipelineCaches.get(gpu.device);
  if (!cache) pipelineCaches.set(gpu.device, cache = new Map());
  const code = shaderPrelude(gpu, consts) + source;
  const key = entryPoint + "\u0000" + code;
  let pipeline = cache.get(key);
  if (!pipeline) {
    const module = gpu.device.createShaderModule({ code });
    pipeline = gpu.device.createComputePipeline({
      layout: "auto",
      compute: { module, entryPoint },
    });
    cache.set(key, pipeline);
  }
  return pipeline;
}

/**
 * Bind group for `pipeline` group 0 with buffers bound in binding order 0..n-1 (a texture, as
 * weights may be held, binds its default view).
 */
export function bindBuffers(
  gpu: Gpu,
  pipeline: GPUComputePipeline,
  buffers: (GPUBuffer | GPUBufferBinding | GPUTexture)[],
): GPUBindGroup {
  return gpu.device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: buffers.map((b, binding) => ({
      binding,
      resource: b instanceof GPUTexture
        ? b.createView()
        : b instanceof GPUBuffer
        ? { buffer: b }
        : b,
    })),
  });
}
