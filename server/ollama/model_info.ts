// What /api/tags, /api/ps and /api/show say of the served model, in Ollama's shapes. Sluice knows
// the model's family, layers, vocabulary, context and byte sizes; what it does not know at this
// layer (the file format, parameter count, quantization) is left empty rather than guessed. The
// digest is a stable id (sha256 of the name), not a hash of the files. The one model never
// unloads: /api/ps gives it an expiry that never comes.

import { createHash } from "node:crypto";
import type { ReadyModel } from "../state/server_state.ts";
import type { OllamaModel } from "./model.ts";

/** The Ollama API level whose shapes these routes follow (/api/version). */
export const OLLAMA_API_VERSION = "0.12.0";

/** /api/ps's expires_at for a model that stays loaded. */
const NEVER = "9999-12-31T23:59:59Z";

function details(ready: ReadyModel) {
  const family = ready.runtime.info.architecture;
  return {
    parent_model: "",
    format: "",
    family,
    families: [family],
    parameter_size: "",
    quantization_level: "",
  };
}

const digest = (name: string) => createHash("sha256").update(name).digest("hex");

/** One entry of /api/tags. */
export function listed({ name, ready }: OllamaModel, modifiedAt: Date) {
  return {
    name,
    model: name,
    modified_at: modifiedAt.toISOString(),
    size: ready.runtime.info.weightBytes,
    digest: digest(name),
    details: details(ready),
  };
}

/** One entry of /api/ps: the model loaded, weights and KV on the device. */
export function running({ name, ready }: OllamaModel) {
  const { weightBytes, kvBytes, maxContext } = ready.runtime.info;
  return {
    name,
    model: name,
    size: weightBytes + kvBytes,
    digest: digest(name),
    details: details(ready),
    expires_at: NEVER,
    size_vram: weightBytes + kvBytes,
    context_length: maxContext,
  };
}

/** /api/show. */
export function shown({ name, ready }: OllamaModel, modifiedAt: Date) {
  const { info } = ready.runtime;
  const template = ready.tokenizer.chatTemplate() ?? "";
  const arch = info.architecture;
  const capabilities = ["completion", "tools"];
  if (template.includes("<think>")) capabilities.push("thinking");
  return {
    license: "",
    modelfile:
      `# Sluice serves this model from its own files; it has no Modelfile.\nFROM ${name}\n`,
    parameters: "",
    // The model's own chat template (Jinja, as in its tokenizer_config.json; Ollama's are Go).
    template,
    details: details(ready),
    model_info: {
      "general.architecture": arch,
      [`${arch}.block_count`]: info.numLayers,
      [`${arch}.context_length`]: info.maxContext,
      [`${arch}.vocab_size`]: info.vocabSize,
    },
    capabilities,
    modified_at: modifiedAt.toISOString(),
  };
}
