// Binds shaders/logit_controls.wgsl: logit bias, repetition / frequency / presence penalties and
// token masks applied to the sample rows' logits before the sampler, and the pass after it that
// counts each penalized slot's sampled id. Also the host-side encoding of a slot's controls.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import type { SamplingParams } from "./sample.ts";
import source from "../../../shaders/logit_controls.wgsl" with { type: "text" };

/** Most logit_bias entries one request may give (OpenAI's limit is 300; vLLM takes any). */
export const MAX_LOGIT_BIAS = 1024;

/** Bytes of one slot's controls in the `controls` buffer ({f32, f32, f32, u32, u32}). */
export const CONTROLS_BYTES = 20;

/** Bytes of one slot's logit_bias table: MAX_LOGIT_BIAS (id, f32 bias) pairs. */
export const BIAS_TABLE_BYTES = MAX_LOGIT_BIAS * 8;

/** Flag on a count word: the id is in the prompt (bits 0..30 count its generations). */
const IN_PROMPT = 0x80000000;
/** controlRows' mask index for a row without a mask. */
export const NO_MASK = 0xffffffff;

export interface LogitControlsArgs {
  /** f32 [samples, V], adjusted in place. */
  logits: BufferArg;
  V: number;
  /** u32 [samples]: each sample row's slot. */
  sampleSlot: BufferArg;
  /** vec2<u32> [rows]: (sample index, mask index or NO_MASK) of the rows to adjust. */
  controlRows: BufferArg;
  /** u32 [maxSlots, V]: per slot, IN_PROMPT | generated count per id. */
  counts: BufferArg;
  /** [maxSlots] of controlsBytes() records. */
  controls: BufferArg;
  /** [maxSlots] of biasTable() tables. */
  bias: BufferArg;
  /** u32 [masks, ceil(V / 32)]: the step's masks. */
  masks: BufferArg;
  /** u32 [maxSlots]: the ids the sampler wrote (read by `count`). */
  nextIds: BufferArg;
}

/** The two passes: `adjust` before the sampler, `count` after it, each over `rows` listed rows. */
export function bindLogitControls(
  gpu: Gpu,
  args: LogitControlsArgs,
): { adjust: BoundKernel; count: BoundKernel } {
  if (!Number.isInteger(args.V) || args.V < 1) {
    throw new RangeError(`logit controls: V ${args.V} must be >= 1`);
  }
  const consts = { MAX_BIAS: MAX_LOGIT_BIAS };
  const shared = [args.sampleSlot, args.controlRows, args.counts, args.controls];
  const bind = (
    entry: string,
    own: [number, BufferArg][],
    workgroups: (rows: number) => number,
  ) => {
    const pipeline = getPipeline(gpu, source, entry, consts);
    const params = new ParamsUniform(gpu, [args.V, Math.ceil(args.V / 32)]);
    const buffers: [number, BufferArg][] = [
      [0, params.buffer],
      ...shared.map((b, i): [number, BufferArg] => [i + 1, b]),
      ...own,
    ];
    const group = gpu.device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: buffers.map(([binding, b]) => ({
        binding,
        resource: b instanceof GPUBuffer ? { buffer: b } : b,
      })),
    });
    const kernel: BoundKernel = {
      encode(pass, rows) {
        if (rows <= 0) return;
        params.setRows(rows);
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(workgroups(rows));
      },
    };
    return kernel;
  };
  return {
    adjust: bind("adjust", [[5, args.logits], [6, args.bias], [7, args.masks]], (rows) => rows),
    count: bind("count", [[8, args.nextIds]], () => 1),
  };
}

/** True when `p` asks for any control logit_controls.wgsl applies. */
export function hasLogitControls(p: SamplingParams): boolean {
  return (p.logitBias?.length ?? 0) > 0 || usesPenalties(p);
}

/** True when `p` needs its slot's token counts. */
export function usesPenalties(p: SamplingParams): boolean {
  return (p.frequencyPenalty ?? 0) !== 0 || (p.presencePenalty ?? 0) !== 0 ||
    (p.repetitionPenalty ?? 1) !== 1;
}

/** One slot's controls as the shader reads them. */
export function controlsBytes(p: SamplingParams): Uint8Array {
  const bytes = new Uint8Array(CONTROLS_BYTES);
  const view = new DataView(bytes.buffer);
  view.setFloat32(0, p.repetitionPenalty ?? 1, true);
  view.setFloat32(4, p.frequencyPenalty ?? 0, true);
  view.setFloat32(8, p.presencePenalty ?? 0, true);
  view.setUint32(12, biasEntries(p).length, true);
  view.setUint32(16, usesPenalties(p) ? 1 : 0, true);
  return bytes;
}

/** One slot's logit_bias table: (id, f32 bias) pairs, one per id (the last given wins). */
export function biasTable(p: SamplingParams): Uint32Array {
  const entries = biasEntries(p);
  const words = new Uint32Array(2 * entries.length);
  const f32 = new Float32Array(words.buffer);
  entries.forEach(([id, bias], i) => {
    words[2 * i] = id;
    f32[2 * i + 1] = bias;
  });
  return words;
}

function biasEntries(p: SamplingParams): [number, number][] {
  const entries = [...new Map(p.logitBias ?? []).entries()];
  if (entries.length > MAX_LOGIT_BIAS) {
    throw new RangeError(`logit bias: ${entries.length} entries exceed ${MAX_LOGIT_BIAS}`);
  }
  return entries;
}

/** A slot's seeded counts row: IN_PROMPT on the prompt's ids, plus each generated id's count. */
export function countsRow(V: number, prompt: readonly number[], generated: readonly number[]) {
  const row = new Uint32Array(V);
  for (const id of prompt) row[id] |= IN_PROMPT;
  for (const id of generated) row[id]++;
  return row;
}
