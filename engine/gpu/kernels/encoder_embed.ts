// Binds shaders/encoder_embed.wgsl: an encoder's input embedding, the sum of a row's word,
// position and token-type vectors (the latter two where the model has them).

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { createStorage } from "../buffers.ts";
import source from "../../../shaders/encoder_embed.wgsl" with { type: "text" };

export interface EncoderEmbedArgs {
  /** u32 [rows, 3]: (token id, position, token type) per row. */
  rows3: BufferArg;
  /** W [vocab, D]. */
  word: BufferArg;
  /** W [positions, D], or null (a rotary model). */
  position: BufferArg | null;
  /** W [types, D], or null. */
  tokenType: BufferArg | null;
  /** f32 [rows, D]. */
  x: BufferArg;
  D: number;
}

const MAX_WORKGROUPS = 65535;

export function bindEncoderEmbed(gpu: Gpu, args: EncoderEmbedArgs): BoundKernel {
  const { D } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`encoderEmbed: bad D ${D}`);
  const pipeline = getPipeline(gpu, source, "main", {
    HAS_POS: args.position ? 1 : 0,
    HAS_TYPE: args.tokenType ? 1 : 0,
  });
  const params = new ParamsUniform(gpu, [D]);
  const placeholder = () => createStorage(gpu, 16, "no table");
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.rows3,
    args.word,
    args.position ?? placeholder(),
    args.tokenType ?? placeholder(),
    args.x,
  ]);
  return {
    kind: "embedding",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`encoderEmbed: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
