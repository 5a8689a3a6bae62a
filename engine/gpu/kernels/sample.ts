// Binds shaders/sample.wgsl: greedy / temperature / min-p / top-k / top-p sampling with top-K
// logprobs, entirely on the GPU. Also the host-side encoding of per-slot parameters and decoding of
// records.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/sample.wgsl" with { type: "text" };
import logitOrder from "../../../shaders/logit_order.wgsl" with { type: "text" };

/** Most top logprobs a record can carry (the shader's merged list length). */
export const MAX_TOP_LOGPROBS = 20;

/** Bytes of one slot's parameters in the `params` buffer. */
export const SAMPLER_PARAMS_BYTES = 20;

/**
 * One request's sampling. The optional controls default to off, and a slot that leaves them off
 * samples exactly as without them: no pass runs for it (engine/forward/sampling_controls.ts).
 * They apply in this order: logitBias, repetitionPenalty, frequency/presencePenalty (those three
 * by logit_controls.wgsl), a token mask if the step gives one, then temperature, minP, topK, topP
 * (sample.wgsl). Limits are the runtime's to check (runtime/validation.ts).
 */
export interface SamplingParams {
  /** <= 0: greedy. */
  temperature: number;
  /** 0: off. */
  topK: number;
  /** >= 1: off. */
  topP: number;
  /** u32; with the sample position it fixes the draw. */
  seed: number;
  /** Added to the logits of these ids (OpenAI's logit_bias; -100 bans, +100 all but forces). */
  logitBias?: [id: number, bias: number][];
  /** logit -= frequencyPenalty · count, over the ids this request generated (OpenAI's). */
  frequencyPenalty?: number;
  /** logit -= presencePenalty if the id was generated at all (OpenAI's). */
  presencePenalty?: number;
  /**
   * For ids in the prompt or generated: logit / r if positive, else logit · r (HF's / vLLM's); 1
   * is off.
   */
  repetitionPenalty?: number;
  /** Keeps ids with p >= minP · p_max after temperature (vLLM's); 0 is off; greedy ignores it. */
  minP?: number;
}

export interface SamplerArgs {
  /** f32 [rows, V]. */
  logits: BufferArg;
  V: number;
  /** u32 [rows]: each sample row's slot. */
  sampleSlot: BufferArg;
  /** u32 [rows]: each sample row's position (the RNG counter). */
  samplePos: BufferArg;
  /** [maxSlots] of samplerParamsBytes() records. */
  params: BufferArg;
  /** u32 [maxSlots]: receives each sampled slot's id. */
  nextIds: BufferArg;
  /** u32 [rows * (2 + 2 * topLogprobs)]: the records. */
  out: BufferArg;
  /** K, the top logprobs per record, 0..MAX_TOP_LOGPROBS. */
  topLogprobs: number;
}

export interface SampleRecord {
  id: number;
  logprob: number;
  /** The K likeliest [id, logprob], most likely first. */
  top: [number, number][];
}

/** Largest sample-row count one dispatch takes (one workgroup per row). */
export const MAX_SAMPLE_ROWS = 65535;

export function bindSampler(gpu: Gpu, args: SamplerArgs): BoundKernel {
  const K = args.topLogprobs;
  if (!Number.isInteger(K) || K < 0 || K > MAX_TOP_LOGPROBS) {
    throw new RangeError(`sampler: topLogprobs ${K} must be an integer in 0..${MAX_TOP_LOGPROBS}`);
  }
  if (!Number.isInteger(args.V) || args.V < 1) {
    throw new RangeError(`sampler: V ${args.V} must be >= 1`);
  }
  const pipeline = getPipeline(gpu, logitOrder + source, "main");
  const params = new ParamsUniform(gpu, [args.V, K]);
  // The logits are bound twice: as vec4s for the passes and as f32s for the buffer's ragged tail.
  const group = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.logits,
    args.logits,
    args.sampleSlot,
    args.samplePos,
    args.params,
    args.nextIds,
    args.out,
  ]);
  return {
    kind: "sampler",
    encode(pass, rows) {
      if (rows > MAX_SAMPLE_ROWS) {
        throw new RangeError(`sampler: ${rows} rows exceed ${MAX_SAMPLE_ROWS}`);
      }
      if (rows <= 0) return;
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(rows);
    },
  };
}

/** One slot's sampler parameters as the shader reads them ({f32, u32, f32, u32, f32}). */
export function samplerParamsBytes(p: SamplingParams): Uint8Array {
  const bytes = new Uint8Array(SAMPLER_PARAMS_BYTES);
  const view = new DataView(bytes.buffer);
  view.setFloat32(0, p.temperature, true);
  view.setUint32(4, Math.max(0, Math.floor(p.topK)) >>> 0, true);
  view.setFloat32(8, p.topP, true);
  view.setUint32(12, p.seed >>> 0, true);
  view.setFloat32(16, p.minP ?? 0, true);
  return bytes;
}

/** Parses `rows` records of 2 + 2K u32 words. Missing entries (K > V) have id 0xffffffff. */
export function decodeSampleRecords(words: Uint32Array, rows: number, K: number): SampleRecord[] {
  const stride = 2 + 2 * K;
  if (words.length < rows * stride) {
    throw new RangeError(
      `sample records: ${words.length} words hold fewer than ${rows} records of ${stride}`,
    );
  }
  const f32 = new Float32Array(words.buffer, words.byteOffset, words.length);
  const records: SampleRecord[] = [];
  for (let s = 0; s < rows; s++) {
    const base = s * stride;
    const top: [number, number][] = [];
    for (let k = 0; k < K; k++) top.push([words[base + 2 + 2 * k], f32[base + 3 + 2 * k]]);
    records.push({ id: words[base], logprob: f32[base + 1], top });
  }
  return records;
}
