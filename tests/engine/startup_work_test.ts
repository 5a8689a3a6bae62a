// What loading costs and buys: the matmul builds a row tile's pipeline only when a step first needs
// it, and the engine's warm-up builds every pipeline a request can need, so that nothing compiles
// after the server says it is ready. Each test opens its own device, so the pipeline cache starts
// empty and every build is counted.

import { Engine } from "../../engine/engine.ts";
import { createStorage } from "../../engine/gpu/buffers.ts";
import { type Gpu, openGpu } from "../../engine/gpu/device.ts";
import { bindMatmul } from "../../engine/gpu/kernels/matmul.ts";
import { bindQuantMatmul, createMatmulX } from "../../engine/gpu/kernels/matmul_quant.ts";
import { quantLayout } from "../../engine/gpu/kernels/quant_layout.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";
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

Deno.test("matmul_quant: store and add, with or without a norm, at any K and x size, share a row tile's pipeline", async () => {
  // llvmpipe compiles each unrolled tile at length (seconds cold, tens of seconds for the 16-row
  // storage tile): o (add) and q/k/v (store, the attention norm fused in) of one format, o and
  // down at their two Ks, or the start-up calibration's x and the engine's activations, must not
  // each compile their own.
  const gpu = await openGpu();
  try {
    const built = countPipelines(gpu);
    const small = createMatmulX(gpu, 64 * 4, "x");
    const large = createMatmulX(gpu, 16 * 128 * 4 * 40, "x");
    const y = createStorage(gpu, 64 * 4);
    const fused = { gain: createStorage(gpu, 128 * 4), eps: 1e-5 };
    const encoder = gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    const cases = [
      [64, "store", fused, small],
      [64, "add", undefined, large],
      [128, "add", undefined, small],
      [64, "store", undefined, large],
    ] as const;
    for (const [K, mode, norm, x] of cases) {
      const w = createStorage(gpu, quantLayout("q8_0", 64, K).bytes);
      bindQuantMatmul(gpu, { x, w, y, K, N: 64, mode, type: "q8_0", norm }).encode(pass, 1);
    }
    pass.end();
    assertEquals(built.get("matmulQuant"), 1);
    const glu = createStorage(gpu, quantLayout("q8_0", 64, 64).bytes);
    const encoder2 = gpu.device.createCommandEncoder();
    const pass2 = encoder2.beginComputePass();
    bindQuantMatmul(gpu, { x: small, w: glu, y, K: 64, N: 32, mode: "glu", type: "q8_0" }).encode(
      pass2,
      1,
    );
    pass2.end();
    assertEquals(built.get("matmulQuant"), 2, "glu is its own pipeline");
  } finally {
    gpu.device.destroy();
  }
});

/** Every kind of step a request can bring: each row count, sampled or greedy, controls, groups. */
async function everyStep(engine: Engine): Promise<void> {
  const { maxRows, maxSlots, numLayers, blockSize } = engine.info;
  const blocks = new Array(Math.ceil(maxRows / blockSize)).fill(0);
  const tables = Array.from({ length: numLayers }, (_, layer) => ({
    slot: 0,
    layer,
    first: 0,
    blocks,
  }));
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  const rows = (n: number) => Array.from({ length: n }, (_, pos) => ({ slot: 0, pos, token: 1 }));
  for (let n = 1; n <= maxRows; n++) {
    const samples = Array.from({ length: Math.min(n, maxSlots) }, (_, i) => ({ row: n - 1 - i }));
    await engine.step({
      tables: n === 1 ? tables : [],
      sampling: n === 1 ? [{ slot: 0, params: greedy }] : [],
      rows: rows(n),
      samples: samples.reverse(),
      wantTopLogprobs: false,
    });
  }
  const controlled = { ...greedy, temperature: 0.7, topK: 5, frequencyPenalty: 0.5 };
  for (const wantTopLogprobs of [false, true]) {
    await engine.step({
      tables: [],
      sampling: [{ slot: 0, params: controlled }],
      penaltySeeds: [{ slot: 0, prompt: [1, 2], generated: [3] }],
      rows: rows(1),
      samples: [{ row: 0 }],
      wantTopLogprobs,
    });
  }
  await engine.step({
    tables: [],
    sampling: [{ slot: 0, params: greedy }],
    rows: [{ slot: 0, pos: 0, token: null }],
    samples: [{ row: 0 }],
    wantTopLogprobs: false,
    group: { steps: 3, budgets: [3], stopIds: [[2]] },
  });
}

const total = (built: Map<string, number>) => [...built.values()].reduce((a, b) => a + b, 0);

Deno.test("engine load: the warm-up builds every pipeline a request can need, dense and quantized", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-startup-work-" });
  try {
    const spec = {
      hiddenSize: 64,
      // down's x (1024 wide) fits the uniform binding up to 16 rows: the quantized 16-row tile
      // reads x from a uniform below that and from storage above it.
      intermediateSize: 1024,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      seed: 5,
    };
    await writeTinyModel(`${dir}/f16`, { ...spec, dtype: "F16" });
    const q8 = await writeTinyGguf(`${dir}/q8`, { ...spec, dtype: "F32" }, { type: "Q8_0" });
    for (const [name, modelDir] of [["F16", `${dir}/f16`], ["Q8_0 GGUF", q8.path]]) {
      await t.step(name, async () => {
        // Its own device, so the pipeline cache starts empty and every build is counted.
        const gpu = await openGpu();
        try {
          const built = countPipelines(gpu);
          const engine = await Engine.load({
            modelDir,
            gpu,
            gpuKvMb: 1,
            maxSlots: 4,
            maxRows: 32,
            maxDecodeSteps: 4,
          });
          try {
            const atLoad = total(built);
            await everyStep(engine);
            assertEquals(total(built), atLoad, `built after load: ${JSON.stringify([...built])}`);
            assertEquals(engine.info.costModel, undefined, "no host tier: no cost profile at load");
          } finally {
            await engine.close();
          }
        } finally {
          gpu.device.destroy();
        }
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
