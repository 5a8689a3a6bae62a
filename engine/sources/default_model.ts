// Which model a command runs. An explicit --model is resolved as given and never replaced: if it
// cannot be had, the command fails with the reason. With no --model, the default hub model is
// fetched once (with a progress bar); where it cannot be (no network, the hub refuses), a loud
// notice says so and the demo model is used, so a first run on any machine ends with a server
// that answers.

import type { HubOptions } from "./hub.ts";
import { resolveModel } from "./resolve.ts";
import { ModelResolveError } from "./resolve_error.ts";

export const DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";

export interface ModelChoice {
  /** The id clients see in /v1/models and send back as `model`. */
  id: string;
  /** The local model directory to load. */
  dir: string;
}

export async function chooseModel(
  arg: string | undefined,
  log: (msg: string) => void,
  options: HubOptions = {},
): Promise<ModelChoice> {
  if (arg !== undefined) return { id: arg, dir: await resolveModel(arg, log, options) };
  try {
    return { id: DEFAULT_MODEL, dir: await resolveModel(DEFAULT_MODEL, log, options) };
  } catch (e) {
    if (!(e instanceof ModelResolveError)) throw e;
    log(fallbackNotice(e.reason));
    return { id: "demo", dir: await resolveModel("demo", () => {}, options) };
  }
}

/** The multi-line notice printed when the default model gives way to the demo model. */
export function fallbackNotice(reason: string): string {
  const rule = "*".repeat(78);
  return [
    rule,
    `* No --model given, and the default model ${DEFAULT_MODEL} could not be fetched:`,
    `*   ${reason}`,
    "* Using the DEMO model instead: a small RANDOM model. Its replies are noise; it exercises the",
    "* whole server (API, streaming, metrics) with no download.",
    "* For real answers, run again with network access (the model is downloaded once), or pass",
    "*   --model /path/to/model-dir   (a Hugging Face checkout: config.json, tokenizer, safetensors)",
    "* --model demo picks the demo model on purpose, without trying the download.",
    rule,
  ].join("\n");
}
