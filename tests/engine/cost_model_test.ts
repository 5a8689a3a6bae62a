// The cost model: line fits, step predictions (compute, copies, overlap), re-fitting from observed
// steps toward the adapter's current speed; and on the GPU, that a load with warm-up profiles a
// model of plain, finite, non-negative numbers that crosses a Worker boundary.

import {
  computeMs,
  copyMs,
  type CostModel,
  fitLine,
  gbPerS,
  lineOf,
  observeStep,
  predictStepMs,
  PROFILE_WEIGHT,
  sumsOf,
} from "../../engine/kv/cost_model.ts";
import { Engine } from "../../engine/engine.ts";
import { NOT_RESIDENT } from "../../engine/kv/pool_shape.ts";
import { readU32 } from "../../engine/gpu/buffers.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { assertClose } from "../helpers/compare.ts";
import { testGpu } from "../helpers/gpu.ts";

const close = (got: number, want: number, what: string, rel = 1e-9) =>
  assert(Math.abs(got - want) <= rel * Math.max(1, Math.abs(want)), `${what}: ${got} vs ${want}`);

function model(over: Partial<CostModel> = {}): CostModel {
  const layerPoints: [number, number][] = [[1, 1.5], [8, 5]];
  return {
    numLayers: 4,
    roundTripMs: 11,
    layer: fitLine(layerPoints), // 1 + 0.5 per row
    sample: { fixedMs: 2, perUnitMs: 0.25 },
    hostToDevice: { fixedMs: 0.1, perUnitMs: 1e-6 },
    deviceToHost: { fixedMs: 0.2, perUnitMs: 2e-6 },
    overlap: 0,
    layerFit: sumsOf(layerPoints, PROFILE_WEIGHT),
    ...over,
  };
}

Deno.test("fitLine: exact on a line, flat through the mean for one x, never negative", () => {
  const l = fitLine([[1, 3], [2, 5], [4, 9]]);
  close(l.fixedMs, 1, "fixed");
  close(l.perUnitMs, 2, "slope");
  assertEquals(fitLine([[5, 2], [5, 4]]), { fixedMs: 3, perUnitMs: 0 });
  assertEquals(fitLine([[1, 9], [2, 1]]).perUnitMs, 0);
  assertEquals(fitLine([[1, 1], [10, 10]]).fixedMs, 0);
  assertEquals(lineOf({ w: 0, x: 0, y: 0, xx: 0, xy: 0 }), { fixedMs: 0, perUnitMs: 0 });
});

Deno.test("predictStepMs: layers × rows, the sampling tail, copies each way", () => {
  const m = model();
  close(m.layer.fixedMs, 1, "layer fixed");
  close(m.layer.perUnitMs, 0.5, "layer slope");
  close(predictStepMs(m, { rows: 10 }), 4 * (1 + 5), "rows only");
  close(predictStepMs(m, { rows: 10, samples: 4 }), 24 + 3, "with samples");
  // Default copies: 2 (K and V of one group) per direction that moves bytes.
  close(copyMs(m, { rows: 1, bytesIn: 1e6 }), 0.2 + 1, "in");
  close(copyMs(m, { rows: 1, bytesOut: 1e6, copiesOut: 10 }), 2 + 2, "out, 10 copies");
  close(
    predictStepMs(m, { rows: 10, bytesIn: 1e6, bytesOut: 1e6 }),
    24 + 1.2 + 2.4,
    "serial sum",
  );
  close(gbPerS(m.hostToDevice), 1, "1e-6 ms per byte is 1 GB/s");
});

Deno.test("predictStepMs: overlap hides that share of the shorter of copy and compute", () => {
  const load = { rows: 10, bytesIn: 4e6 }; // compute 24 ms, copy 4.2 ms
  close(predictStepMs(model({ overlap: 1 }), load), 24, "full overlap");
  close(predictStepMs(model({ overlap: 0.5 }), load), 24 + 2.1, "half");
  close(computeMs(model(), load), 24, "compute alone");
});

Deno.test("observeStep: the layer line follows the adapter to its new speed", () => {
  let m = model();
  const truth = (rows: number) => 4 * (2 + 1 * rows) + 2 + 0.25 * rows + 1.2; // 2× slower
  for (let i = 0; i < 1500; i++) {
    const rows = 1 + (i * 7) % 32;
    m = observeStep(m, { rows, samples: rows, bytesIn: 1e6 }, truth(rows));
  }
  assertClose(
    [m.layer.fixedMs, m.layer.perUnitMs],
    [2, 1],
    1e-3,
    "re-fitted layer line",
  );
  // The profiled points have decayed to a weight of ~0.004 against the observed ones.
  close(predictStepMs(m, { rows: 20, samples: 20, bytesIn: 1e6 }), truth(20), "prediction", 1e-4);
  assertEquals(m.numLayers, 4);
  assertEquals(m.sample, model().sample, "only the layer line is re-fitted");
});

Deno.test("observeStep: a few noisy steps move the profiled line only a little", () => {
  const m0 = model();
  let m = m0;
  for (let i = 0; i < 3; i++) m = observeStep(m, { rows: 8 }, 1000);
  assert(m.layer.perUnitMs + m.layer.fixedMs < 2 * (m0.layer.perUnitMs + m0.layer.fixedMs) * 8);
  assertEquals(observeStep(m0, { rows: 0 }, 5), m0, "copy-only steps say nothing of layers");
  assertEquals(observeStep(m0, { rows: 4 }, NaN), m0);
});

Deno.test("a load with a host tier profiles a plain, finite model; without one, or with skipWarmUp, it does not", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-cost-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 136,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F32",
      seed: 1,
    });
    const options = {
      modelDir: dir,
      gpu: await testGpu(),
      gpuKvMb: 1,
      hostKvMb: 1,
      maxSlots: 4,
      maxRows: 16,
    };
    const skipped = await Engine.load({ ...options, skipWarmUp: true });
    assertEquals(skipped.info.costModel, undefined);
    await skipped.close();
    // Nothing prices copies between tiers without a host tier: start-up skips the ~1 s profile.
    const deviceOnly = await Engine.load({ ...options, hostKvMb: 0 });
    assertEquals(deviceOnly.info.costModel, undefined);
    await deviceOnly.close();

    const engine = await Engine.load(options);
    try {
      const m = engine.info.costModel!;
      assertEquals(structuredClone(m), m, "plain data");
      assertEquals(m.numLayers, 2);
      const numbers = JSON.stringify(m).match(/-?[\d.e+-]+(?=[,}])/g)!.map(Number);
      assert(numbers.every((x) => Number.isFinite(x) && x >= 0), JSON.stringify(m));
      assert(m.roundTripMs > 0 && m.overlap <= 1, JSON.stringify(m));
      assert(m.layer.fixedMs + m.layer.perUnitMs > 0, "a layer costs something");
      assert(m.hostToDevice.perUnitMs > 0 && m.deviceToHost.perUnitMs > 0, "bytes cost time");
      const small = predictStepMs(m, { rows: 1 });
      assert(predictStepMs(m, { rows: 16, bytesOut: 1 << 20 }) > small, "monotone");
      // The profile left no table entry pointing at its scratch block.
      const table = await readU32(engine.gpu, engine.kv.blockTable, engine.kv.blockTable.size / 4);
      assert(table.every((b) => b === NOT_RESIDENT), "a table entry survived the profile");
    } finally {
      await engine.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
