// What /api/tags, /api/ps and /api/show say of the models, in Ollama's shapes. Every model the
// router knows is listed by /api/tags (its size the weights' bytes on disk, or on the device once
// loaded); /api/ps lists the loaded ones with when their keep-alive ends. Sluice knows a loaded
// model's family, layers, vocabulary, context and byte sizes; what it does not know at this layer
// (the file format, parameter count, quantization) is left empty rather than guessed. The digest
// is a stable id (sha256 of the name), not a hash of the files.

import { createHash } from "node:crypto";
import type { ChatParts, ModelKind, ModelListing } from "../../runtime/model_router.ts";
import { ollamaName } from "./model.ts";

/** The Ollama API level whose shapes these routes follow (/api/version). */
export const OLLAMA_API_VERSION = "0.12.0";

/** /api/ps's expires_at for a model that stays loaded. */
const NEVER = "9999-12-31T23:59:59Z";

function details(family: string) {
  return {
    parent_model: "",
    format: "",
    family,
    families: family ? [family] : [],
    parameter_size: "",
    quantization_level: "",
  };
}

const digest = (name: string) => createHash("sha256").update(name).digest("hex");

/** One entry of /api/tags (its family known once it has been loaded). */
export function listed(model: ModelListing, chat: ChatParts | null, modifiedAt: Date) {
  const name = ollamaName(model.id);
  return {
    name,
    model: name,
    modified_at: modifiedAt.toISOString(),
    size: model.sizeBytes || (chat?.runtime.info.weightBytes ?? 0),
    digest: digest(name),
    details: details(chat?.runtime.info.architecture ?? ""),
  };
}

/** One entry of /api/ps: a loaded model, weights and KV on the device. */
export function running(model: ModelListing, chat: ChatParts | null) {
  const name = ollamaName(model.id);
  const wallMs = model.expiresAtMs === null
    ? null
    : Date.now() + (model.expiresAtMs - performance.now());
  return {
    name,
    model: name,
    size: model.deviceBytes + model.hostBytes,
    digest: digest(name),
    details: details(chat?.runtime.info.architecture ?? ""),
    expires_at: wallMs === null ? NEVER : new Date(wallMs).toISOString(),
    size_vram: model.deviceBytes,
    context_length: chat?.runtime.info.maxContext ?? 0,
  };
}

/** /api/show of a model that only scores: its capability, nothing of a chat template. */
export function shownScorer(name: string, kind: ModelKind, modifiedAt: Date) {
  return {
    license: "",
    modelfile:
      `# Sluice serves this model from its own files; it has no Modelfile.\nFROM ${name}\n`,
    parameters: "",
    template: "",
    details: details(""),
    model_info: {},
    capabilities: [kind === "embedding" ? "embedding" : "rerank"],
    modified_at: modifiedAt.toISOString(),
  };
}

/** /api/show. */
export function shown(name: string, chat: ChatParts, modifiedAt: Date) {
  const { info } = chat.runtime;
  const template = chat.tokenizer.chatTemplate() ?? "";
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
    details: details(arch),
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
