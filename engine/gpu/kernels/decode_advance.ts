// Binds shaders/decode_advance.wgsl: moves a decode group's rows from one step to the next on the
// GPU (their positions, and their input ids from the sampler), stopping the rows that finished.
// Also the host-side layout of the group's per-sample state.

import type { Gpu } from "../device.ts";
import { type BufferArg, ParamsUniform } from "../kernel.ts";
import { getPipeline } from "../shader.ts";
import source from "../../../shaders/decode_advance.wgsl" with { type: "text" };

/** u32 words of one sample's state: budget, taken, done, input id, stop count, the stop ids. */
export const GROUP_STATE_WORDS = 13;
/** Most stop ids the GPU checks per row (more may end the request: the host stops it then). */
export const MAX_GROUP_STOP_IDS = 8;

export interface DecodeAdvanceArgs {
  /** u32 [samples * GROUP_STATE_WORDS], written by groupStateWords before the group. */
  state: GPUBuffer;
  /** u32 [samples]: each sample's row (a group's rows are all sampled). */
  sampleRow: BufferArg;
  sampleSlot: BufferArg;
  /** u32 [rows]: advanced in place. */
  rowPos: BufferArg;
  /** u32 [samples]: the sampler's RNG positions, advanced with the rows. */
  samplePos: BufferArg;
  /** u32 [slots]: each slot's input id; restored for finished rows. */
  nextIds: BufferArg;
}

export interface DecodeAdvance {
  /** Before the group's first step: notes each row's input id. */
  encodeBegin(pass: GPUComputePassEncoder, samples: number): void;
  /** Before each later step: moves the rows on, or holds the finished ones. */
  encodeAdvance(pass: GPUComputePassEncoder, samples: number): void;
}

const LANES = 64;

export function bindDecodeAdvance(gpu: Gpu, args: DecodeAdvanceArgs): DecodeAdvance {
  const params = new ParamsUniform(gpu, []);
  const resource = (b: BufferArg) => b instanceof GPUBuffer ? { buffer: b } : b;
  // `begin` reads only some bindings, and an automatic layout holds only what its entry reads.
  const bind = (entry: string, bindings: [number, BufferArg][]) => {
    const pipeline = getPipeline(gpu, source, entry);
    const group = gpu.device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: bindings.map(([binding, b]) => ({ binding, resource: resource(b) })),
    });
    return (pass: GPUComputePassEncoder, samples: number) => {
      if (samples <= 0) return;
      params.setRows(samples);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(Math.ceil(samples / LANES));
    };
  };
  return {
    encodeBegin: bind("begin", [
      [0, params.buffer],
      [1, args.state],
      [3, args.sampleSlot],
      [6, args.nextIds],
    ]),
    encodeAdvance: bind("advance", [
      [0, params.buffer],
      [1, args.state],
      [2, args.sampleRow],
      [3, args.sampleSlot],
      [4, args.rowPos],
      [5, args.samplePos],
      [6, args.nextIds],
    ]),
  };
}

/**
 * The group's starting state, per sample: `budgets[s]` samples it may take (>= 1), none taken,
 * and the first MAX_GROUP_STOP_IDS of `stopIds[s]`.
 */
export function groupStateWords(
  budgets: readonly number[],
  stopIds: readonly (readonly number[])[],
): Uint32Array<ArrayBuffer> {
  const words = new Uint32Array(budgets.length * GROUP_STATE_WORDS);
  budgets.forEach((budget, s) => {
    const base = s * GROUP_STATE_WORDS;
    const stops = stopIds[s].slice(0, MAX_GROUP_STOP_IDS);
    words[base] = budget;
    words[base + 4] = stops.length;
    stops.forEach((id, i) => words[base + 5 + i] = id);
  });
  return words;
}
