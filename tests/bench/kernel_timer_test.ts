// The kernel timer (bench/common/kernel_timer.ts), used by bench decode's step split: an engine
// given its kernel list wrapped by it runs each kernel in a timed pass of its own and must still
// give the untimed pass's tokens and logits bit for bit; it times every kernel the step encodes, labelled by kind, in encoding
// order; and a kernel that does more work takes more time. Skipped where the adapter has no
// timestamp queries.

import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { type KernelTime, KernelTimer, timedKernels } from "../../bench/common/kernel_timer.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { greedyDecode, tinyForward } from "../helpers/tiny_forward.ts";

const gpu = await testGpu();
const ignore = !KernelTimer.available(gpu);
const SLOTS = 3, PROMPT = 5, DECODE = 4;

/** Greedy decoding of SLOTS slots; with a timer, what it read after each step. */
async function greedy(dir: string, timer: KernelTimer | undefined, seed: number) {
  const tf = await tinyForward(gpu, dir, { maxSlots: SLOTS, maxRows: SLOTS * PROMPT });
  if (timer) tf.engine.useKernels(timedKernels(tf.engine.kernels, timer));
  const times: KernelTime[][] = [];
  try {
    const run = await greedyDecode(tf, {
      batch: SLOTS,
      prompt: PROMPT,
      decode: DECODE,
      seed,
      afterStep: timer
        ? async () => {
          times.push(await timer.read());
        }
        : undefined,
    });
    return { ...run, times, dispatchesPerStep: tf.engine.info.dispatchesPerStep };
  } finally {
    await tf.destroy();
  }
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
      const plain = await greedy(dir, undefined, seed + 1);
      const timer = new KernelTimer(gpu, 256);
      const timed = await greedy(dir, timer, seed + 1);
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
