// Binds shaders/embedding_quant.wgsl: bindEmbedding's lookup from a block-quantized table (GGUF
// files often quantize token_embd, which a tied LM head shares), dequantized exactly as GGML does.
// The table may be a weight texture of the same bytes, as a tied LM head's may be (weight_texture.ts).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { checkTablePart, type EmbeddingArgs, workgroupPerRow } from "./embedding.ts";
import { FORMAT_CODES, quantLayout, qVec4PerBlock } from "./quant_layout.ts";
import { QUANT_FORMATS, type QuantType } from "../../quant/formats.ts";
import { textureWordsSource } from "../weight_texture.ts";
import blocks from "../../../shaders/quant_blocks.wgsl" with { type: "text" };
import embeddingQuant from "../../../shaders/embedding_quant.wgsl" with { type: "text" };

export interface QuantEmbeddingArgs extends EmbeddingArgs {
  /** `table` holds rowCount rows of D values in quant_layout.ts's layout. */
  type: QuantType;
}

export function bindQuantEmbedding(gpu: Gpu, args: QuantEmbeddingArgs): BoundKernel {
  checkTablePart("embedding_quant", args);
  const { rowStart, rowCount, D, type } = args;
  if (!(type in FORMAT_CODES)) throw new RangeError(`embedding_quant: unknown type ${type}`);
  const layout = quantLayout(type, rowCount, D); // throws on a partial block
  const source = blocks + embeddingQuant;
  const code = args.table instanceof GPUTexture
    ? textureWordsSource(textureWordsSource(source, "wq"), "wd")
    : source;
  const pipeline = getPipeline(gpu, code, "embeddingQuant", {
    FMT: FORMAT_CODES[type],
    BLOCK: QUANT_FORMATS[type].blockElems,
    Q_VEC4: qVec4PerBlock(type),
  });
  const params = new ParamsUniform(gpu, [
    D,
    rowStart,
    rowCount,
    layout.sOffset / 16,
    layout.dOffset / 4,
    layout.hOffset / 4,
    { f32: args.scale ?? 1 },
  ]);
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.tokens,
    args.rowSlot,
    args.nextIds,
    args.table,
    args.table,
    args.y,
  ]);
  return workgroupPerRow("embedding_quant", pipeline, bindGroup, params);
}
