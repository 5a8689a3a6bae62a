// What opening a model gives, whatever its format: the config, the tokenizer files, and where each
// weight lies. A Hugging Face directory (safetensors) fills `tensors`; a GGUF file is `gguf`, its
// tensors named by llama.cpp. Everything past opening (the tokenizer, the weight loader) takes
// this.

import type { LlamaConfig } from "../model/config.ts";
import type { GgufFile } from "./gguf.ts";
import type { TensorInfo } from "./safetensors.ts";

export interface ModelFiles {
  /** Absolute path of the directory (of the file, for a GGUF model). */
  dir: string;
  config: LlamaConfig;
  /** Every loadable tensor of the checkpoint by name, across shards. */
  tensors: Map<string, TensorInfo>;
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  /** A GGUF model's file: its weights load from here (`tensors` is then empty). */
  gguf?: GgufFile;
}
