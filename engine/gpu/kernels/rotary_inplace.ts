// Binds shaders/rotary_inplace.wgsl: RoPE on the q and k heads of fused qkv rows, in place, from a
// cos/sin table (rotaryTable), for encoders that rotate each key once per pass.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import source from "../../../shaders/rotary_inplace.wgsl" with { type: "text" };

export interface RotaryInplaceArgs {
  /** f32 [rows, 3·heads·headDim]. */
  qkv: BufferArg;
  /** u32 [rows]. */
  positions: BufferArg;
  /** f32 [positions, rotDim/2, 2] from rotaryTable. */
  cosSin: BufferArg;
  heads: number;
  headDim: number;
  /** Dims rotated at the start of each head (NomicBERT's rotary_emb_fraction · headDim); even. */
  rotDim: number;
}

const MAX_WORKGROUPS = 65535;

/** (cos θ, sin θ) for θ = position · base^(−2i/rotDim), positions 0..count-1, in float64. */
export function rotaryTable(count: number, rotDim: number, base: number): Float32Array {
  const half = rotDim / 2;
  const out = new Float32Array(count * half * 2);
  for (let pos = 0; pos < count; pos++) {
    for (let i = 0; i < half; i++) {
      const theta = pos * Math.pow(base, (-2 * i) / rotDim);
      out[(pos * half + i) * 2] = Math.cos(theta);
      out[(pos * half + i) * 2 + 1] = Math.sin(theta);
    }
  }
  return out;
}

export function bindRotaryInplace(gpu: Gpu, args: RotaryInplaceArgs): BoundKernel {
  const { heads, headDim, rotDim } = args;
  if (!(rotDim > 0 && rotDim % 2 === 0 && rotDim <= headDim)) {
    throw new RangeError(`rotary: bad rotary dims ${rotDim} of ${headDim}`);
  }
  const pipeline = getPipeline(gpu, source, "main", { HEAD_DIM: headDim, ROT_DIM: rotDim });
  const params = new ParamsUniform(gpu, [heads]);
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.qkv,
    args.positions,
    args.cosSin,
  ]);
  return {
    kind: "attention",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`rotary: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
