// Binds shaders/embedding.wgsl: each row's token embedding from one row-part of the table, held in
// a storage buffer or (tied to a texture-held LM head) in a weight texture (weight_texture.ts).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import { textureWordsSource } from "../weight_texture.ts";
import source from "../../../shaders/embedding.wgsl" with { type: "text" };

/** A token id meaning "take the id the sampler wrote for this row's slot" (decode rows). */
export const TOKEN_FROM_SAMPLER = 0xFFFFFFFF;

export interface EmbeddingArgs {
  /**
   * W [rowCount, D]: rows rowStart..rowStart+rowCount-1 of the [vocab, D] embedding, in a buffer
   * or in a weight texture (D % 8 == 0).
   */
  table: BufferArg | GPUTexture;
  rowStart: number;
  rowCount: number;
  /** u32 [rows]: token ids, or TOKEN_FROM_SAMPLER. */
  tokens: BufferArg;
  /** u32 [rows]: each row's slot (indexes nextIds). */
  rowSlot: BufferArg;
  /** u32 [slots]: the ids the sampler wrote last step. */
  nextIds: BufferArg;
  /** f32 [rows, D]. Rows whose id another part holds are left untouched. */
  y: BufferArg;
  D: number;
  /** What every value is multiplied by (Gemma: √hidden); default 1. */
  scale?: number;
}

const MAX_WORKGROUPS = 65535;

export function bindEmbedding(gpu: Gpu, args: EmbeddingArgs): BoundKernel {
  checkTablePart("embedding", args);
  const { rowStart, rowCount, D } = args;
  const texture = args.table instanceof GPUTexture;
  if (texture && D % 8 !== 0) throw new RangeError(`embedding: a texture needs D % 8 == 0 (${D})`);
  const pipeline = texture
    ? getPipeline(gpu, textureWordsSource(source, "tableW"), "embeddingWords", {
      W_F16: gpu.f16 ? 1 : 0,
    })
    : getPipeline(gpu, source, D % 4 === 0 ? "embeddingVec" : "embeddingScalar", {
      W_F16: gpu.f16 ? 1 : 0,
    });
  const params = new ParamsUniform(gpu, [D, rowStart, rowCount, { f32: args.scale ?? 1 }]);
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.tokens,
    args.rowSlot,
    args.nextIds,
    args.table,
    args.y,
  ]);
  return workgroupPerRow("embedding", pipeline, bindGroup, params);
}

/** Throws a RangeError naming `kernel` when the table part's rowStart, rowCount or D is bad. */
export function checkTablePart(
  kernel: string,
  { rowStart, rowCount, D }: Pick<EmbeddingArgs, "rowStart" | "rowCount" | "D">,
): void {
  for (const [name, v] of Object.entries({ rowStart, rowCount, D })) {
    if (!Number.isInteger(v) || v < (name === "rowStart" ? 0 : 1) || v >= 2 ** 32) {
      throw new RangeError(`${kernel}: bad ${name} ${v}`);
    }
  }
}

/** An embedding lookup's dispatch: one workgroup per token row, in one dispatch. */
export function workgroupPerRow(
  kernel: string,
  pipeline: GPUComputePipeline,
  bindGroup: GPUBindGroup,
  params: ParamsUniform,
): BoundKernel {
  return {
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`${kernel}: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
