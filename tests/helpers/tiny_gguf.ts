// Writes a generated tiny Llama model (tiny_model.ts) as a GGUF file (gguf_convert.ts) with the
// matrices in one chosen type. Beside it, a Hugging Face directory whose F32 weights are exactly
// the values the GGUF holds (dequantized, rows un-permuted, Gemma's norms less the 1 its GGUF
// files add): the float64 reference runs on that
// directory, so a test measures only the GPU's error, not the quantization's.

import { join } from "node:path";
import type { GgmlTypeName } from "../../engine/formats/gguf.ts";
import { convertToGguf } from "../../engine/formats/gguf_convert.ts";
import { unpermuteRows } from "../../engine/formats/rope_permutation.ts";
import { dequantize, isQuantType } from "../../engine/quant/formats.ts";
import {
  decodeTensor,
  encodeTensor,
  type StDtype,
  type TensorToWrite,
  writeSafetensors,
} from "../../engine/formats/safetensors.ts";
import { type TinyModelSpec, writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { recipeType } from "../../engine/formats/gguf_recipes.ts";
import type { Gpu } from "../../engine/gpu/device.ts";

export interface TinyGgufOptions {
  /** Type of every matrix (norms stay F32, as llama.cpp keeps them). */
  type: GgmlTypeName;
  /** Per-tensor override by GGUF name and ggml dims [cols, rows] (e.g. a Q4_K_M mix). */
  typeOf?: (ggufName: string, dims: number[]) => GgmlTypeName | undefined;
  version?: 2 | 3;
}

export interface TinyGguf {
  /** The GGUF file. */
  path: string;
  /** The source model directory (original weights and tokenizer.json). */
  sourceDir: string;
  /** F32 safetensors of the values the GGUF holds, for the float64 reference. */
  referenceDir: string;
}

export async function writeTinyGguf(
  dir: string,
  spec: TinyModelSpec,
  options: TinyGgufOptions,
): Promise<TinyGguf> {
  const sourceDir = join(dir, "source");
  const referenceDir = join(dir, "reference");
  await writeTinyModel(sourceDir, { ...spec, dtype: "F32" });

  const reference: TensorToWrite[] = [];
  const path = join(dir, "model.gguf");
  await convertToGguf(sourceDir, path, {
    typeOf: (name, dims) => options.typeOf?.(name, dims) ?? options.type,
    version: options.version,
    onTensor: ({ hfName, shape, type, stored, data, heads, added }) => {
      let held = decode(type, data, stored.length);
      // Gemma's norms are stored as 1 + w; the directory holds w as its checkpoints do (exactly:
      // the f32 value minus 1 in float64, which the reference adds back).
      if (added) held = held.map((v) => v - added);
      if (heads) {
        const [rows, cols] = shape;
        const bytes = new Uint8Array(held.buffer, held.byteOffset, held.byteLength);
        held = new Float64Array(unpermuteRows(bytes, heads, rows / heads, cols * 8).buffer);
      }
      reference.push({ name: hfName, dtype: "F32", shape, data: encodeTensor(held, "F32") });
    },
  });

  await Deno.mkdir(referenceDir, { recursive: true });
  for (const file of ["config.json", "tokenizer.json", "tokenizer_config.json"]) {
    await Deno.copyFile(join(sourceDir, file), join(referenceDir, file));
  }
  await writeSafetensors(join(referenceDir, "model.safetensors"), reference);
  return { path, sourceDir, referenceDir };
}

function decode(type: GgmlTypeName, bytes: Uint8Array, count: number): Float64Array {
  const quant = type.toLowerCase();
  if (isQuantType(quant)) return Float64Array.from(dequantize(quant, bytes, count));
  return decodeTensor(bytes, type as StDtype);
}

/** One spec in the formats a whole-model test checks: GGUF F32 (and its source), F16, Q8_0, Q4_K_M. */
export interface TinyGgufSet {
  f32: TinyGguf;
  f16: TinyGguf;
  q8: TinyGguf;
  /** llama.cpp's Q4_K_M mix (gguf_recipes.ts). */
  q4km: TinyGguf;
}

export async function writeTinyGgufSet(dir: string, spec: TinyModelSpec): Promise<TinyGgufSet> {
  const recipeModel = {
    numLayers: spec.numLayers,
    gqa: spec.numHeads / spec.numKvHeads,
    tied: spec.tied,
  };
  return {
    f32: await writeTinyGguf(join(dir, "f32"), spec, { type: "F32" }),
    f16: await writeTinyGguf(join(dir, "f16"), spec, { type: "F16" }),
    q8: await writeTinyGguf(join(dir, "q8"), spec, { type: "Q8_0" }),
    q4km: await writeTinyGguf(join(dir, "q4"), spec, {
      type: "F32",
      typeOf: (name, dims) => recipeType("q4_k_m", recipeModel, name, dims),
    }),
  };
}

/** A model to check and the directory its float64 reference reads, on one GPU. */
export interface FormatRun {
  name: string;
  model: string;
  reference: string;
  gpu: Gpu;
}

/** The source directory on both dtype paths, then each GGUF of `set` on the default one. */
export function formatRuns(set: TinyGgufSet, gpus: { f32: Gpu; default: Gpu }): FormatRun[] {
  const { f32, f16, q8, q4km } = set;
  return [
    { name: "safetensors", model: f32.sourceDir, reference: f32.sourceDir, gpu: gpus.f32 },
    { name: "safetensors", model: f32.sourceDir, reference: f32.sourceDir, gpu: gpus.default },
    { name: "GGUF F32", model: f32.path, reference: f32.referenceDir, gpu: gpus.default },
    { name: "GGUF F16", model: f16.path, reference: f16.referenceDir, gpu: gpus.default },
    { name: "GGUF Q8_0", model: q8.path, reference: q8.referenceDir, gpu: gpus.default },
    { name: "GGUF Q4_K_M", model: q4km.path, reference: q4km.referenceDir, gpu: gpus.default },
  ];
}
