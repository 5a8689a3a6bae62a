// Binds shaders/encoder_attention.wgsl: bidirectional attention of packed inputs, each row over
// its own input's rows only, read straight from the pass's fused qkv rows (no KV cache).

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import source from "../../../shaders/encoder_attention.wgsl" with { type: "text" };

export interface EncoderAttentionArgs {
  /** f32 [rows, 3·heads·headDim]: q heads, k heads, v heads. */
  qkv: BufferArg;
  /** u32 [rows, 2]: the [start, end) rows of each row's input. */
  spans: BufferArg;
  /** f32 [rows, heads·headDim]. */
  out: BufferArg;
  heads: number;
  headDim: number;
}

const MAX_WORKGROUPS = 65535;

export function bindEncoderAttention(gpu: Gpu, args: EncoderAttentionArgs): BoundKernel {
  const { heads, headDim } = args;
  if (!Number.isInteger(heads) || heads < 1) throw new RangeError(`attention: bad heads ${heads}`);
  if (!Number.isInteger(headDim) || headDim < 1) {
    throw new RangeError(`attention: bad head dim ${headDim}`);
  }
  const pipeline = getPipeline(gpu, source, "main", { HEAD_DIM: headDim });
  const params = new ParamsUniform(gpu, [heads, { f32: 1 / Math.sqrt(headDim) }]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.qkv, args.spans, args.out]);
  return {
    kind: "attention",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`attention: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(heads, rows);
    },
  };
}
