// Binds shaders/pool.wgsl: each input's token states pooled into one vector (its first row, the
// mean of its rows, or its last row), for embeddings and for a classifier's CLS row.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import source from "../../../shaders/pool.wgsl" with { type: "text" };

/** first: the CLS row; mean: every row's average; last: the final row. */
export type PoolMode = "first" | "mean" | "last";

const MODE_CODES: Record<PoolMode, number> = { first: 0, mean: 1, last: 2 };

export interface PoolArgs {
  /** f32 [rows, D]. */
  x: BufferArg;
  /** u32 [inputs, 2]: each input's [start, end) rows (never empty). */
  spans: BufferArg;
  /** f32 [inputs, D]. */
  y: BufferArg;
  D: number;
  mode: PoolMode;
}

const MAX_WORKGROUPS = 65535;

/** encode's `rows` is the number of inputs. */
export function bindPool(gpu: Gpu, args: PoolArgs): BoundKernel {
  const { D, mode } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`pool: bad D ${D}`);
  if (!(mode in MODE_CODES)) throw new RangeError(`pool: unknown mode ${mode}`);
  const pipeline = getPipeline(gpu, source, "main", { MODE: MODE_CODES[mode] });
  const params = new ParamsUniform(gpu, [D]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.spans, args.y]);
  return {
    kind: "norm",
    encode(pass, inputs) {
      if (inputs <= 0) return;
      if (inputs > MAX_WORKGROUPS) {
        throw new RangeError(`pool: ${inputs} inputs exceed one dispatch`);
      }
      params.setRows(inputs);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(inputs);
    },
  };
}
