// What one decode step costs under a choice of offload distances, on Sluice's executor: before
// layer L runs, the host KV of every request offloaded at L is copied into the prefetch region,
// then L computes. WebGPU has one queue, so that copy and L's kernels run one after the other;
// the cost model's `overlap` (measured 0 on lavapipe) says how much of the shorter of the two an
// adapter hides anyway. Per layer:
//
//   t_L = compute + copy_L − overlap × min(compute, copy_L)
//
// and the step is the sum over layers plus the sampling tail. This is the model the planner
// minimizes (linearized in orbit_planner.ts) and the one the drift check compares steps against.
// prefetch_timeline.ts models the paper's GPU instead (a copy engine beside compute).

import type { Line } from "../../engine/kv/cost_model.ts";
import { isOffloaded, type Placed } from "../kv/offload_pattern.ts";

/**
 * The parts of engine/kv/cost_model.ts's CostModel the planner reads (a CostModel fits), plus an
 * optional line for prefetch copies when they are profiled apart from other host → device copies.
 */
export interface PlanCosts {
  /** One layer's compute for x rows. */
  layer: Line;
  /** The LM head and sampler for x sampled rows. */
  sample: Line;
  /** One host → device copy of x bytes. */
  hostToDevice: Line;
  /** One prefetch copy of x bytes; hostToDevice when absent. */
  prefetch?: Line;
  /** Share (0..1) of the shorter of copy and compute hidden when both are in flight. */
  overlap: number;
}

/** What the step looks like besides the distances. */
export interface StepShape {
  numLayers: number;
  /** Bytes of one KV block (one layer, K and V). */
  blockBytes: number;
  /** Rows the step computes (one per decoding request). */
  rows: number;
  /** Rows sampled (default: rows). */
  samples?: number;
  /** Copies one request's prefetch of one layer takes (default 2: its K and V block groups). */
  copiesPerPrefetch?: number;
}

export interface LayerTime {
  computeMs: number;
  copyMs: number;
  ms: number;
}

export function at(line: Line, x: number): number {
  return line.fixedMs + line.perUnitMs * x;
}

/** ms to prefetch `blocks` blocks of one request's layer. */
export function prefetchMs(costs: PlanCosts, shape: StepShape, blocks: number): number {
  if (blocks <= 0) return 0;
  const line = costs.prefetch ?? costs.hostToDevice;
  return (shape.copiesPerPrefetch ?? 2) * line.fixedMs + line.perUnitMs * blocks * shape.blockBytes;
}

/** One layer's compute for the step's rows. */
export function layerComputeMs(costs: PlanCosts, shape: StepShape): number {
  return at(costs.layer, shape.rows);
}

/** The LM head and sampler: the same whatever the distances. */
export function tailMs(costs: PlanCosts, shape: StepShape): number {
  const samples = shape.samples ?? shape.rows;
  return samples > 0 ? at(costs.sample, samples) : 0;
}

/** A layer's time from its compute and its prefetch copies. */
export function layerMs(computeMs: number, copyMs: number, overlap: number): number {
  return computeMs + copyMs - overlap * Math.min(computeMs, copyMs);
}

/** Compute, copy and time of every layer of the step. */
export function layerTimes(
  costs: PlanCosts,
  shape: StepShape,
  batch: readonly Placed[],
): LayerTime[] {
  const computeMs = layerComputeMs(costs, shape);
  const out: LayerTime[] = [];
  for (let l = 0; l < shape.numLayers; l++) {
    let copyMs = 0;
    for (const r of batch) {
      if (isOffloaded(r.distance, l)) copyMs += prefetchMs(costs, shape, r.blocksPerLayer);
    }
    out.push({ computeMs, copyMs, ms: layerMs(computeMs, copyMs, costs.overlap) });
  }
  return out;
}

/** Predicted queue time (ms) of one decode step of `batch`. */
export function predictStepMs(
  costs: PlanCosts,
  shape: StepShape,
  batch: readonly Placed[],
): number {
  let ms = tailMs(costs, shape);
  for (const t of layerTimes(costs, shape, batch)) ms += t.ms;
  return ms;
}
