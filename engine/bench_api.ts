// What benchmarks use of the engine beyond its public face (engine.ts), named here so that bench/
// reaches nothing deeper (tests/bench_imports_test.ts): the kernels and buffers the kernel bench
// times one by one, the model files benches write and convert, the cost model's arithmetic and the
// profile's timing. The server and the runtime never import it.

// Model files: opening, writing, converting (bench decode, step-split, kv, constrained, startup).
export { openModelDir } from "./formats/open_model.ts";
export { demoModelDir } from "./sources/demo.ts";
export { type TinyModelSpec, writeTinyModel } from "./sources/tiny_model.ts";
export { convertToGguf } from "./formats/gguf_convert.ts";
export { type GgufMix, recipeType } from "./formats/gguf_recipes.ts";
export type { GgmlTypeName } from "./formats/gguf.ts";
export { QUANT_FORMATS, QUANT_TYPES } from "./quant/formats.ts";
export { ensureRuntimeDir } from "./util/runtime_dir.ts";

// Kernels timed alone (bench kernels), and the greedy sampler's shape (bench step-split).
export { createStorage, readBack, writeBytes } from "./gpu/buffers.ts";
export { createWeightTexture, writeTextureBytes } from "./gpu/weight_texture.ts";
export { bindCopy } from "./gpu/kernels/copy.ts";
export { bindMatmul, type MatmulMode } from "./gpu/kernels/matmul.ts";
export { bindQuantMatmul, createMatmulX } from "./gpu/kernels/matmul_quant.ts";
export { bindIntMatmul, hasIntDot } from "./gpu/kernels/matmul_int.ts";
export { bindQuantizeX, createQuantizedX, destroyQuantizedX } from "./gpu/kernels/quantize_x.ts";
export { quantLayout } from "./gpu/kernels/quant_layout.ts";
export {
  bindReadSum,
  bindReadSumTexture,
  createReadSumTexture,
  READ_SUM_TEXTURE_WIDTH,
  readSumTextureTotals,
  readSumTotals,
} from "./gpu/kernels/read_sum.ts";
export { randomHalves } from "./forward/matmul_choice.ts";
export { greedyChunks } from "./gpu/kernels/sample_greedy.ts";

// KV: the pool's shape, the cost model's arithmetic (bench kv; sim/ fits a GPU profile's), the
// profile's steps and timing.
export { blocksPerLayer, NOT_RESIDENT } from "./kv/pool_shape.ts";
export { copyMs, gbPerS, lineOf, type StepLoad, sumsOf } from "./kv/cost_model.ts";
export { type ProfileTarget, queueMs, roundTripMs } from "./kv/cost_profile.ts";

// Encoders (bench embeddings, embeddings-llamacpp): generated models, as directories and GGUF.
export { writeTinyEncoder } from "./sources/tiny_encoder.ts";
export { writeTinyEncoderGguf } from "./sources/tiny_encoder_gguf.ts";
