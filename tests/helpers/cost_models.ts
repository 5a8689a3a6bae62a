// A cost model for runtime and planner tests: a layer line, the sample tail and copy lines of the
// figures the tests reason about, and decayed fit sums through its own layer line (so re-fitting
// from steps that take what it predicts leaves it where it is).

import type { CostModel } from "../../engine/engine.ts";
import { sumsOf } from "../../engine/kv/cost_model.ts";

/** Four layers of `fixedMs + perRowMs × rows` each; `overrides` replace any field. */
export function costModelWithLayer(
  fixedMs: number,
  perRowMs: number,
  overrides: Partial<CostModel> = {},
): CostModel {
  const points: [number, number][] = [1, 4, 16].map((n) => [n, fixedMs + perRowMs * n]);
  return {
    numLayers: 4,
    roundTripMs: 10,
    layer: { fixedMs, perUnitMs: perRowMs },
    sample: { fixedMs: 0.5, perUnitMs: 0.1 },
    hostToDevice: { fixedMs: 0.02, perUnitMs: 1 / 3e6 },
    deviceToHost: { fixedMs: 0.01, perUnitMs: 1 / 2e6 },
    overlap: 0,
    layerFit: sumsOf(points, 8),
    ...overrides,
  };
}
