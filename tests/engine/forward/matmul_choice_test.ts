// The matmul kernel choice: a forced flag measures nothing; auto measures once per adapter, dtype
// and model shape, picks the faster layout and caches it on disk, so a later start reads it back; a
// damaged cache is measured again. And the real measurement runs on small shapes.

import {
  type CalibrationShape,
  calibrationShapes,
  chooseMatmulLayout as chooseFor,
  type ChooseOptions,
  measureLayouts,
} from "../../../engine/forward/matmul_choice.ts";
import type { Gpu } from "../../../engine/gpu/device.ts";
import type { WeightLayout } from "../../../engine/gpu/weight_texture.ts";
import type { LlamaConfig } from "../../../engine/model/config.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const CFG = {
  hiddenSize: 64,
  intermediateSize: 136,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  vocabSize: 300,
} as LlamaConfig;

const chooseMatmulLayout = (gpu: Gpu, cfg: LlamaConfig, options: ChooseOptions) =>
  chooseFor(gpu, calibrationShapes(cfg), options);

/** A fake measurement that reports `times` and counts its calls. */
function fakeMeasure(times: Record<WeightLayout, number>) {
  const calls: CalibrationShape[][] = [];
  return {
    calls,
    measure: (_gpu: unknown, shapes: CalibrationShape[]) => {
      calls.push(shapes);
      return Promise.resolve(times);
    },
  };
}

Deno.test("matmul choice: a forced layout measures nothing", async () => {
  const gpu = await testGpu();
  const fake = fakeMeasure({ storage: 1, texture: 2 });
  for (const flag of ["storage", "texture"] as const) {
    const choice = await chooseMatmulLayout(gpu, CFG, { flag, cacheDir: "/nonexistent", ...fake });
    assertEquals(choice, { layout: flag, source: "flag" });
  }
  assertEquals(fake.calls.length, 0);
});

Deno.test("matmul choice: auto measures once per adapter and shape, then reads the cache", async () => {
  const gpu = await testGpu();
  const cacheDir = await Deno.makeTempDir({ prefix: "sluice-matmul-choice-" });
  try {
    const fast = fakeMeasure({ storage: 900, texture: 300 });
    const first = await chooseMatmulLayout(gpu, CFG, { flag: "auto", cacheDir, ...fast });
    assertEquals(first.layout, "texture");
    assertEquals(first.source, "measured");
    assertEquals(fast.calls, [calibrationShapes(CFG)]);

    // A second start reads the winner back, whatever a measurement would now say.
    const slow = fakeMeasure({ storage: 1, texture: 1000 });
    const second = await chooseMatmulLayout(gpu, CFG, { flag: "auto", cacheDir, ...slow });
    assertEquals(second, { layout: "texture", usPerToken: first.usPerToken, source: "cache" });
    assertEquals(slow.calls.length, 0);

    // Another adapter, dtype or model shape is measured for itself, and both entries stay.
    const other = await chooseMatmulLayout(
      { ...gpu, adapterId: "another adapter" },
      CFG,
      { flag: "auto", cacheDir, ...slow },
    );
    assertEquals(other.layout, "storage");
    const wider = await chooseMatmulLayout(gpu, { ...CFG, vocabSize: 512 }, {
      flag: "auto",
      cacheDir,
      ...slow,
    });
    assertEquals(wider.layout, "storage");
    assertEquals(slow.calls.length, 2);
    const again = await chooseMatmulLayout(gpu, CFG, { flag: "auto", cacheDir, ...slow });
    assertEquals(again.layout, "texture");
    assertEquals(slow.calls.length, 2);

    // A damaged cache file is measured again and rewritten.
    await Deno.writeTextFile(`${cacheDir}/matmul.json`, "{ not json");
    const repaired = await chooseMatmulLayout(gpu, CFG, { flag: "auto", cacheDir, ...slow });
    assertEquals(repaired, {
      layout: "storage",
      usPerToken: { storage: 1, texture: 1000 },
      source: "measured",
    });
    assert(JSON.parse(await Deno.readTextFile(`${cacheDir}/matmul.json`)), "cache rewritten");
  } finally {
    await Deno.remove(cacheDir, { recursive: true });
  }
});

Deno.test("matmul choice: the measurement times both layouts on the model's shapes", async () => {
  const gpu = await testGpu();
  const us = await measureLayouts(gpu, calibrationShapes(CFG));
  for (const layout of ["storage", "texture"] as const) {
    assert(Number.isFinite(us[layout]) && us[layout] >= 0, `${layout}: ${us[layout]}`);
  }
  // Quantized shapes (a GGUF model's) time the quantized kernels, and key the cache apart.
  const quant = calibrationShapes(CFG).map((s) => ({ ...s, format: "q4_0" as const }))
    .filter((s) => s.K % 32 === 0);
  const q = await measureLayouts(gpu, quant);
  for (const layout of ["storage", "texture"] as const) {
    assert(Number.isFinite(q[layout]) && q[layout] >= 0, `q4_0 ${layout}: ${q[layout]}`);
  }
  const cacheDir = await Deno.makeTempDir({ prefix: "sluice-matmul-choice-" });
  try {
    const fake = fakeMeasure({ storage: 2, texture: 1 });
    const float = await chooseFor(gpu, calibrationShapes(CFG), { flag: "auto", cacheDir, ...fake });
    const blocks = await chooseFor(gpu, quant, { flag: "auto", cacheDir, ...fake });
    assertEquals([float.source, blocks.source], ["measured", "measured"]);
  } finally {
    await Deno.remove(cacheDir, { recursive: true });
  }
});
