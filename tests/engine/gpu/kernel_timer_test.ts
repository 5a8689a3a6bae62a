// The kernel timer (gpu/kernel_timer.ts), used by bench decode's step split: a forward pass built
// with it runs each kernel in a timed pass of its own and must still give the untimed pass's tokens
// and logits bit for bit; it times every kernel the step encodes, labelled by kind, in encoding
// order; and a kernel that does more work takes more time. Skipped where the adapter has no
// timestamp queries.

import { DeviceKv } from "../../../engine/kv/device_kv.ts";
import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { LlamaForward } from "../../../engine/forward/forward.ts";
import type { StepRow } from "../../../engine/forward/step.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { loadWeights } from "../../../engine/weights/load_weights.ts";
import { type KernelTime, KernelTimer } from "../../../engine/gpu/kernel_timer.ts";
import type { Gpu } from "../../../engine/gpu/device.ts";
import type { ModelFiles } from "../../../engine/formats/model_files.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { rng, testSeed } from "../../helpers/random.ts";

const gpu = await testGpu();
const ignore = !KernelTimer.available(gpu);
const SLOTS = 3, PROMPT = 5, DECODE = 4;

interface Run {
  tokens: number[];
  logits: Uint32Array[];
  /** Per step, what the timer read (empty without a timer). */
  times: KernelTime[][];
  dispatchesPerStep: number;
}

async function greedy(g: Gpu, files: ModelFiles, timer: KernelTimer | undefined, seed: number) {
  const cfg = files.config;
  const weights = await loadWeights(g, files);
  const kvLayout = DeviceKv.layoutForBudget(
    g,
    { numLayers: cfg.numLayers, numKvHeads: cfg.numKvHeads, headDim: cfg.headDim },
    4 << 20,
    SLOTS,
    32,
    16,
  );
  const kv = new DeviceKv(g, kvLayout);
  const pool = new BlockPool(kvLayout);
  const limits = { maxRows: SLOTS * PROMPT, maxSlots: SLOTS, maxTopLogprobs: 0, ringSize: 2 };
  const forward = new LlamaForward(g, cfg, weights, kv, limits, { timer });
  const next = rng(seed);
  const run: Run = { tokens: [], logits: [], times: [], dispatchesPerStep: 0 };
  for (let slot = 0; slot < SLOTS; slot++) {
    for (let l = 0; l < cfg.numLayers; l++) {
      assert(pool.grow(slot, l, PROMPT + DECODE), "test pool too small");
      kv.writeTable(slot, l, pool.table(slot, l));
    }
    forward.setSampling(slot, { temperature: 0, topK: 0, topP: 1, seed: 0 });
  }
  const step = async (rows: StepRow[], sampled: number[]) => {
    const samples = sampled.map((row) => ({ row }));
    const records = await forward.submit({ rows, samples, wantTopLogprobs: false });
    run.times.push(timer ? await timer.read() : []);
    for (const l of await forward.readLogits(samples.length)) {
      run.logits.push(new Uint32Array(Float32Array.from(l).buffer));
    }
    run.tokens.push(...records.map((r) => r.id));
  };
  const prompt: StepRow[] = [];
  for (let slot = 0; slot < SLOTS; slot++) {
    for (let pos = 0; pos < PROMPT; pos++) {
      prompt.push({ slot, pos, token: Math.floor(next() * cfg.vocabSize) });
    }
  }
  await step(prompt, Array.from({ length: SLOTS }, (_, s) => s * PROMPT + PROMPT - 1));
  for (let d = 0; d < DECODE; d++) {
    const rows = Array.from(
      { length: SLOTS },
      (_, slot) => ({ slot, pos: PROMPT + d, token: null }),
    );
    await step(rows, rows.map((_, i) => i));
  }
  run.dispatchesPerStep = forward.dispatchesPerStep;
  await forward.idle();
  forward.destroy();
  kv.destroy();
  return run;
}

Deno.test({
  name: "kernel timer: a timed forward pass gives the untimed tokens and times every kernel",
  ignore,
  async fn() {
    const seed = testSeed();
    const dir = await Deno.makeTempDir({ prefix: "sluice-timer-" });
    try {
      await writeTinyModel(dir, {
        hiddenSize: 64,
        intermediateSize: 136,
        numLayers: 2,
        numHeads: 4,
        numKvHeads: 2,
        tied: true,
        dtype: "F32",
        seed,
      });
      const files = await openModelDir(dir);
      const plain = await greedy(gpu, files, undefined, seed + 1);
      const timer = new KernelTimer(gpu, 256);
      const timed = await greedy(gpu, files, timer, seed + 1);
      timer.destroy();
      assertEquals(timed.tokens, plain.tokens, `seed ${seed}: tokens differ`);
      assertEquals(timed.logits, plain.logits, `seed ${seed}: logits differ`);
      for (const times of timed.times) {
        const labels = times.map((t) => t.label);
        // Every kernel of the pass (the greedy sampler is one kernel of two dispatches) and the
        // sampling controls' two passes, which encode nothing for rows without controls.
        assertEquals(labels.length, timed.dispatchesPerStep - 1 + 2, labels.join(","));
        assertEquals(labels[0], "embedding");
        assertEquals(labels.at(-2), "sampler");
        for (const kind of ["weights", "attention", "norm", "lmHead"]) {
          assert(labels.includes(kind), `no ${kind} kernel timed: ${labels.join(",")}`);
        }
        for (const t of times) assert(Number.isFinite(t.ns) && t.ns >= 0, `${t.label}: ${t.ns}`);
        const weights = times.filter((t) => t.label === "weights");
        assert(weights.some((t) => t.ns > 0), "every matmul timed at zero ns");
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "kernel timer: more work takes more time, in encoding order",
  ignore,
  async fn() {
    const module = gpu.device.createShaderModule({
      code: `@group(0) @binding(0) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  var s = b[g.x];
  for (var i = 0u; i < 256u; i++) { s = s * 1.0001 + 0.5; }
  b[g.x] = s;
}`,
    });
    const pipeline = gpu.device.createComputePipeline({
      layout: "auto",
      compute: { module, entryPoint: "main" },
    });
    const buffer = gpu.device.createBuffer({ size: 4 * 64 * 512, usage: GPUBufferUsage.STORAGE });
    const group = gpu.device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer } }],
    });
    const timer = new KernelTimer(gpu, 4);
    let light = 0, heavy = 0;
    // The first round compiles; the later ones are timed.
    for (let round = 0; round < 4; round++) {
      const encoder = gpu.device.createCommandEncoder();
      for (const [label, groups] of [["light", 1], ["heavy", 512]] as const) {
        const pass = timer.beginPass(encoder, label);
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(groups);
        pass.end();
      }
      timer.resolve(encoder);
      gpu.device.queue.submit([encoder.finish()]);
      const times = await timer.read();
      assertEquals(times.map((t) => t.label), ["light", "heavy"]);
      if (round > 0) [light, heavy] = [light + times[0].ns, heavy + times[1].ns];
    }
    assert(heavy > light, `512 workgroups took ${heavy} ns, one took ${light} ns`);
    buffer.destroy();
    timer.destroy();
  },
});
