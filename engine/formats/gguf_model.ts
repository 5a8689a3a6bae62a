// Opens a GGUF file as a model, the way hf_dir.ts opens a Hugging Face directory: config and
// tokenizer from the metadata, and a check, before any weight is read, that every tensor the
// forward pass needs is there with the right shape and a type Sluice can load.

import { ModelLoadError } from "../model/errors.ts";
import { type GgufFile, type GgufTensor, SUPPORTED_GGML_TYPES } from "./gguf.ts";
import { readGgufModel } from "./gguf_split.ts";
import { ggufLlamaConfig } from "./gguf_config.ts";
import { ggufTokenizerFiles } from "./gguf_tokenizer.ts";
import { expectedTensors, ggufTensorName, type TensorNaming } from "../model/tensors.ts";
import type { ModelFiles } from "./model_files.ts";
import { splitFusedGguf } from "./fused_tensors.ts";

/** Float types, the only ones norms (vectors) may have. */
const FLOAT_TYPES = ["F32", "F16", "BF16"];

/** Opens the GGUF file at `path`, or the split set it is a part of (gguf_split.ts). */
export async function openGgufModel(path: string): Promise<ModelFiles> {
  const gguf = await readGgufModel(path);
  const config = await ggufLlamaConfig(gguf);
  if (config.architecture === "phi3") splitFusedGguf(config, gguf);
  for (const want of expectedTensors(config)) {
    const t = ggufTensorOf(gguf, want.name, config);
    // ggml lists dimensions innermost first: [in, out] for an [out, in] matrix.
    const shape = [...t.dims].reverse();
    if (shape.join(",") !== want.shape.join(",")) {
      throw new ModelLoadError(
        path,
        `tensor "${t.name}" has shape [${shape.join(", ")}] (ggml order [${t.dims.join(", ")}]), ` +
          `expected [${want.shape.join(", ")}] from the metadata`,
      );
    }
    if (shape.length === 1 && !FLOAT_TYPES.includes(t.typeName)) {
      throw new ModelLoadError(path, `tensor "${t.name}" is ${t.typeName}; norms must be float`);
    }
  }
  const { tokenizerJson, tokenizerConfig, generationConfig } = ggufTokenizerFiles(gguf);
  return {
    dir: gguf.path,
    config,
    tensors: new Map(),
    tokenizerJson,
    tokenizerConfig,
    generationConfig,
    gguf,
  };
}

/** The GGUF tensor standing for a Hugging Face tensor name; throws if missing or unloadable. */
export function ggufTensorOf(gguf: GgufFile, hfName: string, naming: TensorNaming): GgufTensor {
  const name = ggufTensorName(hfName, naming);
  const t = gguf.tensors.get(name);
  if (!t) throw new ModelLoadError(gguf.path, `missing tensor "${name}"`);
  if (!t.supported) {
    throw new ModelLoadError(
      gguf.path,
      `tensor "${name}" has type ${t.typeName}, which Sluice cannot load (supported: ${
        SUPPORTED_GGML_TYPES.join(", ")
      }; Q4_K_M and Q8_0 files are made of these)`,
    );
  }
  return t;
}
