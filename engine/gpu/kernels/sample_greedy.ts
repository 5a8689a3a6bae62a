// Binds the greedy sampler: argmax_partials.wgsl spreads each row's argmax over many workgroups,
// sample_greedy.wgsl merges the chunk winners and writes the same records as sample.wgsl with
// K = 0 (bit for bit, tests/engine/gpu/kernels/sample_test.ts). The forward pass takes it for a
// step whose sample rows are all greedy and ask no top logprobs (samplerFor in forward/pass.ts).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { createStorage } from "../buffers.ts";
import type { BufferArg } from "../kernel.ts";
import { MAX_SAMPLE_ROWS, type SamplingParams } from "./sample.ts";
import partialsSource from "../../../shaders/argmax_partials.wgsl" with { type: "text" };
import finishSource from "../../../shaders/sample_greedy.wgsl" with { type: "text" };
import logitOrder from "../../../shaders/logit_order.wgsl" with { type: "text" };

/** vec4s of logits one argmax_partials workgroup covers (its WG · PER_LANE). */
const CHUNK_VEC4S = 64 * 8;

export interface GreedySamplerArgs {
  /** f32 [rows, V]. */
  logits: BufferArg;
  V: number;
  /** Most sample rows one encode takes (sizes the chunk winners' buffer). */
  maxRows: number;
  /** u32 [rows]: each sample row's slot. */
  sampleSlot: BufferArg;
  /** u32 [maxSlots]: receives each sampled slot's id. */
  nextIds: BufferArg;
  /** u32 [rows * 2]: the records [id, logprob]. */
  out: BufferArg;
}

/** Whether the full sampler would take the argmax for these params (sample.wgsl: !(T > 0) in f32). */
export function isGreedy(p: SamplingParams): boolean {
  return !(Math.fround(p.temperature) > 0);
}

/** Chunks per row: a row's vec4 span is at most ceil(V / 4) + 1 (it may start mid-vec4). */
export function greedyChunks(V: number): number {
  return Math.ceil((Math.ceil(V / 4) + 1) / CHUNK_VEC4S);
}

/** Two dispatches: rows × G chunk winners, then one workgroup per row. */
export function bindGreedySampler(gpu: Gpu, args: GreedySamplerArgs): BoundKernel & {
  destroy(): void;
} {
  if (!Number.isInteger(args.V) || args.V < 1) {
    throw new RangeError(`greedy sampler: V ${args.V} must be >= 1`);
  }
  if (!Number.isInteger(args.maxRows) || args.maxRows < 1 || args.maxRows > MAX_SAMPLE_ROWS) {
    throw new RangeError(
      `greedy sampler: maxRows ${args.maxRows} must be in 1..${MAX_SAMPLE_ROWS}`,
    );
  }
  const G = greedyChunks(args.V);
  const partials = createStorage(gpu, args.maxRows * G * 8, "greedyPartials");
  const params = new ParamsUniform(gpu, [args.V, G]);
  const partialsPipeline = getPipeline(gpu, logitOrder + partialsSource, "main");
  const finishPipeline = getPipeline(gpu, logitOrder + finishSource, "main");
  // The logits are bound twice: as vec4s for the passes and as f32s for the buffer's ragged tail.
  const partialsGroup = bindBuffers(gpu, partialsPipeline, [
    params.buffer,
    args.logits,
    args.logits,
    partials,
  ]);
  const finishGroup = bindBuffers(gpu, finishPipeline, [
    params.buffer,
    args.logits,
    args.logits,
    partials,
    args.sampleSlot,
    args.nextIds,
    args.out,
  ]);
  return {
    kind: "sampler",
    encode(pass, rows) {
      if (rows > args.maxRows) {
        throw new RangeError(`greedy sampler: ${rows} rows exceed ${args.maxRows}`);
      }
      if (rows <= 0) return;
      params.setRows(rows);
      pass.setPipeline(partialsPipeline);
      pass.setBindGroup(0, partialsGroup);
      pass.dispatchWorkgroups(G, rows);
      pass.setPipeline(finishPipeline);
      pass.setBindGroup(0, finishGroup);
      pass.dispatchWorkgroups(rows);
    },
    destroy() {
      partials.destroy();
    },
  };
}
