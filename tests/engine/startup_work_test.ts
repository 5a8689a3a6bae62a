// What loading costs: the matmul builds a row tile's pipeline only when a step first needs it, and
// the engine's warm-up builds the decode and prefill tiles (1 and 16 rows), not the middle ones.
// Each test opens its own device, so the pipeline cache starts empty and every build is counted.

import { Engine } from "../../engine/engine.ts";
import { createStorage, STORAGE_UNIFORM } from "../../engine/gpu/buffers.ts";
import { type Gpu, openGpu } from "../../engine/gpu/device.ts";
import { bindMatmul } from "../../engine/gpu/kernels/matmul.ts";
import { bindQuantMatmul } from "../../engine/gpu/kernels/matmul_quant.ts";
import { quantLayout } from "../../engine/gpu/kernels/quant_layout.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { assertEquals } from "../helpers/testing.ts";

/** Counts the compute pipelines a device builds, by entry point. */
function countPipelines(gpu: Gpu): Map<string, number> {
  const counts = new Map<string, number>();
  const device = gpu.device;
  const build = device.createComputePipeline.bind(device);
  device.createComputePipeline = (d: GPUComputePipelineDescriptor) => {
    const entry = d.compute.entryPoint ?? "";
    counts.set(entry, (counts.get(entry) ?? 0) + 1);
    return build(d);
  };
  return counts;
}

Deno.test("matmul: a row tile's pipeline is built when a step first needs it", async () => {
  const gpu = await openGpu();
  try {
    const built = countPipelines(gpu);
    const K = 64, N = 64;
    const x = createStorage(gpu, 40 * K * 4);
    const w = createStorage(gpu, N * K * (gpu.f16 ? 2 : 4));
    const y = createStorage(gpu, 40 * N * 4);
    const matmul = bindMatmul(gpu, { x, w, y, K, N, mode: "store" });
    assertEquals(built.get("matmulVec") ?? 0, 0, "binding builds nothing");
    // rows → the tile that covers them (1, 4, 8, 16; beyond 16, several 16-row tiles).
    for (const [rows, total] of [[1, 1], [1, 1], [16, 2], [40, 2], [3, 3], [8, 4], [5, 4]]) {
      const encoder = gpu.device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      matmul.encode(pass, rows);
      pass.end();
      gpu.device.queue.submit([encoder.finish()]);
      assertEquals(built.get("matmulVec"), total, `after a step of ${rows} rows`);
    }
    await gpu.device.queue.onSubmittedWorkDone();
  } finally {
    gpu.device.destroy();
  }
});

Deno.test("matmul_quant: store and add, with or without a norm, at any K, share a row tile's pipeline", async () => {
  // llvmpipe compiles each unrolled tile at length (seconds cold, tens of seconds for the 16-row
  // storage tile): o (add) and q/k/v (store, the attention norm fused in) of one format, or o and
  // down at their two Ks, must not each compile their own.
  const gpu = await openGpu();
  try {
    const built = countPipelines(gpu);
    const x = createStorage(gpu, 16 * 1024, "x", STORAGE_UNIFORM);
    const y = createStorage(gpu, 64 * 4);
    const fused = { gain: createStorage(gpu, 128 * 4), eps: 1e-5 };
    const encoder = gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    const cases = [[64, "store", fused], [64, "add"], [128, "add"], [64, "store"]] as const;
    for (const [K, mode, norm] of cases) {
      const w = createStorage(gpu, quantLayout("q8_0", 64, K).bytes);
      bindQuantMatmul(gpu, { x, w, y, K, N: 64, mode, type: "q8_0", norm }).encode(pass, 1);
    }
    pass.end();
    assertEquals(built.get("matmulQuant"), 1);
    const glu = createStorage(gpu, quantLayout("q8_0", 64, 64).bytes);
    const encoder2 = gpu.device.createCommandEncoder();
    const pass2 = encoder2.beginComputePass();
    bindQuantMatmul(gpu, { x, w: glu, y, K: 64, N: 32, mode: "glu", type: "q8_0" }).encode(
      pass2,
      1,
    );
    pass2.end();
    assertEquals(built.get("matmulQuant"), 2, "glu is its own pipeline");
  } finally {
    gpu.device.destroy();
  }
});

Deno.test("engine load: the warm-up builds the 1- and 16-row matmul tiles only", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-startup-work-" });
  const gpu = await openGpu();
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 128,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F16",
      seed: 5,
    });
    const built = countPipelines(gpu);
    const engine = await Engine.load({ modelDir: dir, gpu, gpuKvMb: 1, maxSlots: 4, maxRows: 32 });
    try {
      // Three matmul modes (store with the fused norm: qkv and LM head; add: o and down; glu with
      // the fused norm: gate/up) × two tiles.
      assertEquals(built.get("matmulVec"), 6);
      assertEquals(engine.info.costModel, undefined, "no host tier: no cost profile at load");
    } finally {
      await engine.close();
    }
  } finally {
    gpu.device.destroy();
    await Deno.remove(dir, { recursive: true });
  }
});
