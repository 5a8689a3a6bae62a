// Opens a model for serving: resolves `--model` (directory, hub id or "demo"), builds the
// tokenizer on this thread (and the prompt encoder, whose own tokenizer Worker starts only when a
// large prompt comes), starts the engine (in a Worker by default, so the GPU loop never runs on
// the thread that serves HTTP) and puts a runtime over it.

import { Engine, type EngineOptions, type StepEngine } from "../engine/engine.ts";
import type { EngineInfo } from "../engine/step_engine.ts";
import { WorkerEngine } from "../engine/worker_engine.ts";
import { resolveModel } from "../engine/sources/resolve.ts";
import { openModelDir } from "../engine/formats/open_model.ts";
import { PromptEncoder, type PromptEncoderOptions } from "../engine/text/prompt_encoder.ts";
import { Tokenizer } from "../engine/text/tokenizer.ts";
import { progressBar } from "../engine/util/progress.ts";
import { Runtime, type RuntimeOptions } from "./service.ts";
import { chatModel, type LoadedModel, scoringModel } from "./loaded_model.ts";
import { isEncoderModel, openEncoderModel } from "./embedding/open_encoder.ts";
import { decoderModelKind } from "./embedding/model_kind.ts";
import { DecoderEmbedder } from "./embedding/decoder_embedder.ts";
import { DecoderReranker } from "./embedding/decoder_reranker.ts";

export interface OpenOptions {
  engine: Omit<EngineOptions, "modelDir" | "gpu" | "onLoadProgress">;
  runtime: Omit<RuntimeOptions, "eosIds" | "vocabulary">;
  /** Run the engine on this thread instead of a Worker (the `generate` command, tests). */
  inProcess?: boolean;
  /** Which prompts are encoded off this thread (tests). */
  prompts?: PromptEncoderOptions;
}

export interface OpenModel {
  runtime: Runtime;
  tokenizer: Tokenizer;
  /** Encodes prompts (large ones off this thread); close it when done with the model. */
  prompts: PromptEncoder;
  modelDir: string;
}

export async function openRuntime(
  model: string,
  options: OpenOptions,
  log: (msg: string) => void = (m) => console.error(m),
): Promise<OpenModel> {
  const modelDir = await resolveModel(model, log);
  const files = await openModelDir(modelDir);
  const tokenizer = new Tokenizer(files);
  const prompts = new PromptEncoder(tokenizer, files, options.prompts);
  const progress = progressBar("loading weights");
  if (!options.engine.skipWarmUp) {
    // The warm-up compiles every GPU kernel a request can need before the server says ready: on a
    // cold shader cache the wait is here, not in the first client's request.
    log(
      "sluice: after the weights, compiling every GPU kernel a request can need (each matmul row " +
        "tile, the samplers, logit controls, decode groups); on a cold shader cache tens of " +
        "seconds with Vulkan, minutes with GL",
    );
  }
  const engine: StepEngine = options.inProcess
    ? await Engine.load({ ...options.engine, modelDir, onLoadProgress: progress })
    : await WorkerEngine.load({ ...options.engine, modelDir }, progress);
  const runtime = new Runtime(engine, {
    ...options.runtime,
    eosIds: tokenizer.eosTokenIds,
    vocabulary: () => tokenizer.vocabulary(),
  });
  const i = engine.info;
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  const blocks = i.blocksPerArena.reduce((a, b) => a + b, 0);
  // What runs, `--sched auto` resolved.
  const { policy, prefixCache, preempt, recompute, offload, writeThrough } = runtime.settings;
  log(
    `sluice: model ${modelDir} (${i.architecture}${
      windowsText(i)
    }) on ${i.adapter} (${i.dtype}); weights ${mib(i.weightBytes)} MiB${
      i.matmulKernel ? ` in ${i.matmulKernel.layout} (${i.matmulKernel.source})` : ""
    }${
      i.quantKernels && i.quantKernels.source !== "none"
        ? `, quantized by ${i.quantKernels.kernels} kernels (${i.quantKernels.source})`
        : ""
    }, ` +
      `KV ${i.kvDtype ? `${i.kvDtype} ` : ""}${
        mib(i.kvBytes)
      } MiB (${blocks} blocks × ${i.blockSize} tokens shared by ${i.numLayers} layers), ` +
      `context ${i.maxContext}, batch ${i.maxSlots}, scheduler ${policy}, prefix cache ${
        prefixCache ? "on" : "off"
      }` +
      (options.runtime.tokenCache ? ", token-wise caching on (eLLM)" : "") +
      (i.hostBlocks > 0
        ? `; host KV ${i.hostBlocks} blocks, preempt by ${
          recompute === "auto" ? "cost (recompute auto)" : preempt ?? "recompute"
        }, write-through ${writeThrough ? "on" : "off"}` +
          (offload && offload !== "none" ? `, offload ${offload}` : "")
        : ""),
  );
  if (runtime.economics) log(`sluice: --sched auto chose ${policy}: ${runtime.economics.reason}`);
  return { runtime, tokenizer, prompts, modelDir };
}

/**
 * A model opened for the router, by what it is: a BERT-family encoder (runtime/embedding/
 * open_encoder.ts) as an embedder or reranker; a decoder whose files say it embeds or reranks
 * (runtime/embedding/model_kind.ts) as one, over its runtime (each input a pooled prefill-only
 * request); any other decoder as a chat runtime.
 */
export async function openServedModel(
  model: string,
  options: OpenOptions,
  log: (msg: string) => void = (m) => console.error(m),
): Promise<LoadedModel> {
  const path = await resolveModel(model, log);
  if (await isEncoderModel(path)) {
    const encoder = await openEncoderModel(path, { forceF32: options.engine.forceF32 });
    log(
      `sluice: model ${path}: an encoder, serving ${
        encoder.kind === "embedding" ? "embeddings" : "relevance scores"
      } (${(encoder.deviceBytes / 2 ** 20).toFixed(1)} MiB on the device)`,
    );
    return scoringModel(encoder);
  }
  const kind = await decoderModelKind(path);
  const { runtime, tokenizer, prompts } = await openRuntime(path, options, log);
  const chat = chatModel({ runtime, tokenizer, prompts });
  if (kind === "chat") return chat;
  try {
    const scorer = kind === "embedding"
      ? { embedder: await DecoderEmbedder.open(path, runtime, tokenizer) }
      : { reranker: await DecoderReranker.open(path, runtime, tokenizer) };
    log(
      `sluice: model ${path}: a decoder serving ${
        kind === "embedding" ? "embeddings" : "relevance scores"
      }`,
    );
    // Its runtime's requests are its pooled inputs: the router waits for them as for a chat's.
    const scoring = scoringModel({ ...scorer, deviceBytes: chat.deviceBytes });
    return {
      ...scoring,
      hostBytes: chat.hostBytes,
      inFlight: () => scoring.inFlight() + chat.inFlight(),
      close: chat.close,
    };
  } catch (err) {
    await chat.close();
    throw err;
  }
}

/** The model's windows for the start-up line: one for all layers, or those of its local layers. */
function windowsText(info: EngineInfo): string {
  const windows = info.layerWindows ?? new Array(info.numLayers).fill(info.slidingWindow ?? 0);
  const windowed = windows.filter((w) => w > 0);
  if (windowed.length === 0) return "";
  const on = windowed.length < info.numLayers
    ? ` on ${windowed.length} of ${info.numLayers} layers`
    : "";
  return `, sliding window ${Math.max(...windowed)}${on}`;
}
