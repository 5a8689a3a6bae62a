// The llama.cpp side of `bench llamacpp` (llamacpp.ts), run under Node because node-llama-cpp is a
// native Node addon. It loads GGUF files on llama.cpp's CPU backend (no GPU: `gpu: false`, the
// CPU-only prebuilt package, build "never" so nothing is compiled or downloaded) and answers one
// JSON request per stdin line with one JSON line on stdout, so the Deno side can interleave its
// measurements with Sluice's in the same sitting.
//
// usage: node bench/llamacpp_node.mjs <path of node-llama-cpp's dist/index.js>
//
// Requests: {op:"info"} | {op:"load", kind, path, contextSize, threads:[n...]}
//         | {op:"decode", kind, threads, ids, steps} | {op:"prefill", kind, threads, ids}
//         | {op:"embed", path, inputs:[[id...]...], contextSize, threads} (bench embeddings-llamacpp)
// Replies start with REPLY so that anything else a library prints on stdout is told apart.

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const REPLY = "@llamacpp ";
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(process.argv[2]).href);

const llama = await getLlama({
  gpu: false,
  build: "never",
  skipDownload: true,
  usePrebuiltBinaries: true,
  progressLogs: false,
  // 0: no cap of its own, so each context runs exactly the threads it is given.
  maxThreads: 0,
  logLevel: LlamaLogLevel.warn,
  logger: (level, message) => process.stderr.write(`[llama.cpp ${level}] ${message}\n`),
});

/** kind → { model, contexts: threads → sequence } */
const loaded = new Map();

function sequenceOf(kind, threads) {
  const seq = loaded.get(kind)?.sequences.get(threads);
  if (!seq) throw new Error(`${kind} with ${threads} threads is not loaded`);
  return seq;
}

const ops = {
  info() {
    return {
      gpu: llama.gpu,
      buildType: llama.buildType,
      release: llama.llamaCppRelease.release,
      systemInfo: llama.systemInfo.trim(),
      cpuMathCores: llama.cpuMathCores,
      node: process.version,
    };
  },
  async load({ kind, path, contextSize, threads }) {
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    const sequences = new Map();
    for (const n of threads) {
      const context = await model.createContext({
        contextSize,
        batchSize: Math.min(contextSize, 512),
        threads: { ideal: n, min: n },
        sequences: 1,
      });
      sequences.set(n, context.getSequence());
    }
    loaded.set(kind, { model, sequences });
    return { flashAttention: [...sequences.values()][0].context.flashAttention };
  },
  /** Greedy decode from `ids`: steps + 1 tokens, EOS ignored, timed from the first token. */
  async decode({ kind, threads, ids, steps }) {
    const seq = sequenceOf(kind, threads);
    await seq.clearHistory();
    const tokens = [];
    let first = 0;
    const start = performance.now();
    for await (const t of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) {
      tokens.push(t);
      if (tokens.length === 1) first = performance.now();
      if (tokens.length === steps + 1) break;
    }
    const end = performance.now();
    return {
      tokens,
      firstTokenMs: first - start,
      tokensPerS: steps / ((end - first) / 1000),
      // What the context ran with: a hint below `min` would show here.
      threadsUsed: seq.context.currentThreads,
    };
  },
  /** The prompt `ids` and one greedy token: time to first token. */
  async prefill({ kind, threads, ids }) {
    const seq = sequenceOf(kind, threads);
    await seq.clearHistory();
    const start = performance.now();
    for await (const _ of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) break;
    return { ms: performance.now() - start };
  },
  /** One pooled vector per input (token ids as given: no special tokens added), as llama.cpp's
   *  embedding context pools them (the GGUF's pooling_type). The model is loaded for this call. */
  async embed({ path, inputs, contextSize, threads }) {
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    try {
      const context = await model.createEmbeddingContext({ contextSize, threads });
      try {
        const vectors = [];
        for (const ids of inputs) vectors.push([...(await context.getEmbeddingFor(ids)).vector]);
        return { vectors };
      } finally {
        await context.dispose();
      }
    } finally {
      await model.dispose();
    }
  },
};

process.stdout.write(`${REPLY}${JSON.stringify({ ok: true, ready: true })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let reply;
  try {
    const request = JSON.parse(line);
    const op = ops[request.op];
    if (!op) throw new Error(`unknown op ${request.op}`);
    reply = { ok: true, ...(await op(request)) };
  } catch (e) {
    reply = { ok: false, error: String(e?.stack ?? e) };
  }
  process.stdout.write(`${REPLY}${JSON.stringify(reply)}\n`);
}
await llama.dispose();
