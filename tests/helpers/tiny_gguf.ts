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
