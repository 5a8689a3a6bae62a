// Embeddings and reranking from a decoder (a generated tiny Qwen3 declared a sentence-transformers
// model) through the real runtime and GPU engine, against the float64 reference's final-normed
// hidden states: last, mean and cls pooling of inputs of different lengths in one batch; the same
// vectors embedded alone and batched, when a prompt takes several prefill chunks (a generating
// request beside them keeping its greedy tokens), with the prefix cache on, and when an embedding
// is preempted mid-prefill; every KV block back in the pool after. Qwen3-Reranker's scores against
// the reference's yes/no logits; the inputs refused; the same vectors with f32 weights and
// through the engine Worker.

import { Engine } from "../../../engine/engine.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import type { ModelFiles } from "../../../engine/formats/model_files.ts";
import type { PoolingMode } from "../../../engine/formats/pooling_config.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { InvalidRequest, Runtime } from "../../../runtime/service.ts";
import { openRuntime } from "../../../runtime/open.ts";
import {
  DecoderEmbedder,
  END_OF_TEXT,
  tokenId,
} from "../../../runtime/embedding/decoder_embedder.ts";
import { answerTokenIds, DecoderReranker } from "../../../runtime/embedding/decoder_reranker.ts";
import { testGpu, testGpuF32 } from "../../helpers/gpu.ts";
import type { Gpu } from "../../../engine/gpu/device.ts";
import { referenceFinalHidden, referenceLmHeadRows } from "../../helpers/reference_llama.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { cosine } from "../../helpers/compare.ts";
import {
  EMBEDDING_CONTEXT,
  EMBEDDING_SPEC,
  writeTinyEmbeddingModel,
} from "../../helpers/tiny_embedding_model.ts";

const CONTEXT = EMBEDDING_CONTEXT;
const SPEC = EMBEDDING_SPEC;
const writeEmbeddingModel = () => writeTinyEmbeddingModel();

interface Served {
  runtime: Runtime;
  tokenizer: Tokenizer;
  files: ModelFiles;
}

async function serve(
  dir: string,
  maxRows: number,
  maxSlots: number,
  prefixCache = false,
  gpuKvMb = 4,
  gpu: Gpu | null = null,
): Promise<Served> {
  const files = await openModelDir(dir);
  const tokenizer = new Tokenizer(files);
  const engine = await Engine.load({
    modelDir: dir,
    gpu: gpu ?? await testGpu(),
    gpuKvMb,
    maxRows,
    maxSlots,
    skipWarmUp: true,
  });
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    prefixCache,
    maxQueue: 64,
    maxTokensLimit: 512,
    eosIds: tokenizer.eosTokenIds,
  });
  return { runtime, tokenizer, files };
}

/** The reference's pooled, L2-normalised vector of `ids`. */
async function referenceVector(files: ModelFiles, ids: number[], mode: PoolingMode) {
  const hidden = await referenceFinalHidden(files, ids);
  const D = hidden[0].length;
  let v: Float64Array;
  if (mode === "last") v = hidden.at(-1)!;
  else if (mode === "cls") v = hidden[0];
  else {
    v = new Float64Array(D);
    for (const h of hidden) for (let i = 0; i < D; i++) v[i] += h[i] / hidden.length;
  }
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assertEquals(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return Number.isNaN(m) || a.some(Number.isNaN) ? Infinity : m;
}

/** Waits for the loop's next schedule() to reap what finished, then asserts no block is held. */
async function assertKvFreed(runtime: Runtime) {
  for (let i = 0; i < 50 && runtime.stats().kvBlocksUsed > 0; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assertEquals(runtime.stats().kvBlocksUsed, 0);
  assertEquals(runtime.openRequests, 0);
}

/** Greedy tokens of `ids` (`maxTokens` of them, no early stop). */
async function generate(runtime: Runtime, ids: number[], maxTokens = 12): Promise<number[]> {
  const sampling = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  const handle = runtime.submit({ ids, sampling, maxTokens, stopIds: [] });
  const out: number[] = [];
  for await (const ev of handle.tokens) out.push(ev.id);
  await handle.done;
  return out;
}

const TEXTS = [
  "a",
  "The quick brown fox",
  "embeddings pool the hidden states of a decoder model into one vector per input",
  "short one",
];

Deno.test("decoder embedder: last, mean and cls pooling of a batch match the float64 reference, alone or batched", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, files } = await serve(dir, 64, 8);
  try {
    const embedder = await DecoderEmbedder.open(dir, runtime, tokenizer);
    assertEquals(embedder.dimensions, SPEC.hiddenSize);
    assertEquals(embedder.maxInputTokens, CONTEXT);
    // Text ends with <|endoftext|>, appended as Qwen3-Embedding's post-processor does.
    const eot = tokenId(tokenizer, END_OF_TEXT)!;
    const inputs = [...TEXTS, [5, 9, 300, 17, 42, 8, 77]];
    const ids = inputs.map((x) => typeof x === "string" ? [...tokenizer.encode(x), eot] : x);
    const batch = await embedder.embed(inputs);
    assertEquals(batch.promptTokens, ids.reduce((n, x) => n + x.length, 0));
    for (const [i, v] of batch.vectors.entries()) {
      assertEquals(v.length, SPEC.hiddenSize);
      const c = cosine(v, await referenceVector(files, ids[i], "last"));
      assert(c >= 0.9999, `input ${i}: cosine ${c}`);
      assert(Math.abs(Math.hypot(...v) - 1) < 1e-5, `input ${i} is not unit length`);
    }
    for (const [i, input] of inputs.entries()) {
      const alone = await embedder.embed([input]);
      const d = maxAbsDiff(alone.vectors[0], batch.vectors[i]);
      assert(d <= 1e-5, `input ${i}: alone and batched differ by ${d}`);
    }

    for (const mode of ["mean", "cls"] as const) {
      const pooled = new DecoderEmbedder({
        runtime,
        tokenizer,
        pooling: { mode, normalize: true },
        dimensions: SPEC.hiddenSize,
      });
      // No <|endoftext|> is appended for these modes.
      const plain = TEXTS.map((t) => tokenizer.encode(t));
      const { vectors } = await pooled.embed(TEXTS);
      for (const [i, v] of vectors.entries()) {
        const c = cosine(v, await referenceVector(files, plain[i], mode));
        assert(c >= 0.9999, `${mode} input ${i}: cosine ${c}`);
      }
    }
    await assertKvFreed(runtime);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: with f32 weights (the final norm's gain read as f32) the same holds", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, files } = await serve(dir, 64, 8, false, 4, await testGpuF32());
  try {
    const embedder = await DecoderEmbedder.open(dir, runtime, tokenizer);
    const eot = tokenId(tokenizer, END_OF_TEXT)!;
    const { vectors } = await embedder.embed(TEXTS);
    for (const [i, v] of vectors.entries()) {
      const ids = [...tokenizer.encode(TEXTS[i]), eot];
      const c = cosine(v, await referenceVector(files, ids, "last"));
      assert(c >= 0.9999, `input ${i}: cosine ${c}`);
    }
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: a prompt longer than a prefill chunk pools every chunk, beside others", async () => {
  const dir = await writeEmbeddingModel();
  // Steps of 8 rows: the 50-token input takes at least seven chunks, shared with the others.
  const { runtime, tokenizer, files } = await serve(dir, 8, 4);
  try {
    const long = Array.from({ length: 50 }, (_, i) => (i * 37 + 11) % 500);
    const inputs = [long, [3, 4, 5], long.slice(0, 21)];
    for (const mode of ["last", "mean", "cls"] as const) {
      const embedder = new DecoderEmbedder({
        runtime,
        tokenizer,
        pooling: { mode, normalize: true },
        dimensions: SPEC.hiddenSize,
      });
      const { vectors } = await embedder.embed(inputs);
      for (const [i, v] of vectors.entries()) {
        const c = cosine(v, await referenceVector(files, inputs[i], mode));
        assert(c >= 0.9999, `${mode} input ${i}: cosine ${c}`);
      }
      const alone = await embedder.embed([long]);
      const d = maxAbsDiff(alone.vectors[0], vectors[0]);
      assert(d <= 1e-5, `${mode}: alone and batched differ by ${d}`);
    }
    // A generating request's greedy tokens are the same beside embeddings as alone.
    const embedder = await DecoderEmbedder.open(dir, runtime, tokenizer);
    const prompt = long.slice(5, 30);
    const aloneTokens = await generate(runtime, prompt);
    const [beside] = await Promise.all([generate(runtime, prompt), embedder.embed(inputs)]);
    assertEquals(beside, aloneTokens);
    assertEquals(aloneTokens.length, 12);
    await assertKvFreed(runtime);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: with the prefix cache, last pooling reuses a cached prefix and mean pooling reads every row", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, files } = await serve(dir, 16, 4, true);
  try {
    const long = Array.from({ length: 70 }, (_, i) => (i * 13 + 5) % 500);
    const hits: number[] = [];
    for (const mode of ["last", "mean"] as const) {
      const embedder = new DecoderEmbedder({
        runtime,
        tokenizer,
        pooling: { mode, normalize: true },
        dimensions: SPEC.hiddenSize,
      });
      // The second time its full blocks are in the cache (last pooling may start past them).
      const first = await embedder.embed([long]);
      const again = await embedder.embed([long, long.slice(0, 40)]);
      const reference = await referenceVector(files, long, mode);
      for (const v of [first.vectors[0], again.vectors[0]]) {
        const c = cosine(v, reference);
        assert(c >= 0.9999, `${mode}: cosine ${c}`);
      }
      const c = cosine(again.vectors[1], await referenceVector(files, long.slice(0, 40), mode));
      assert(c >= 0.9999, `${mode} prefix: cosine ${c}`);
      hits.push(runtime.stats().prefix!.hitBlocks);
    }
    // Last pooling took cached blocks; mean pooling took none.
    assert(hits[0] > 0, "last pooling found nothing in the prefix cache");
    assertEquals(hits[1], hits[0]);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: inputs preempted for room (their prefill recomputed) pool every row once", async () => {
  const dir = await writeEmbeddingModel();
  // A pool of a few blocks: three long inputs cannot all hold their KV at once.
  const { runtime, tokenizer, files } = await serve(dir, 16, 4, false, 0.05);
  try {
    const inputs = [0, 1, 2].map((k) =>
      Array.from({ length: 120 + 7 * k }, (_, i) => (i * 31 + k * 101 + 3) % 500)
    );
    assert(runtime.info.maxContext < 3 * 120, `context ${runtime.info.maxContext}`);
    for (const mode of ["mean", "last"] as const) {
      const embedder = new DecoderEmbedder({
        runtime,
        tokenizer,
        pooling: { mode, normalize: true },
        dimensions: SPEC.hiddenSize,
      });
      // A generating request admitted first grows as it decodes, preempting the newest admitted:
      // an embedding in mid-prefill, whose rows are computed again and must not be read twice.
      const growing = generate(runtime, inputs[1].slice(0, 60), 60);
      const { vectors } = await embedder.embed(inputs);
      await growing;
      for (const [i, v] of vectors.entries()) {
        const c = cosine(v, await referenceVector(files, inputs[i], mode));
        assert(c >= 0.9999, `${mode} input ${i}: cosine ${c}`);
      }
    }
    assert(runtime.stats().preemptions > 0, "nothing was preempted");
    await assertKvFreed(runtime);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder reranker: scores are the reference's two-way softmax of the yes and no logits", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, files } = await serve(dir, 64, 8);
  try {
    const reranker = await DecoderReranker.open(dir, runtime, tokenizer);
    const query = "what is a fox";
    const documents = ["A fox is a small animal.", "Tables have four legs", "fox fox fox"];
    const { scores, promptTokens } = await reranker.rerank(query, documents);
    const rows = await referenceLmHeadRows(files, answerTokenIds(tokenizer));
    let total = 0;
    for (const [i, doc] of documents.entries()) {
      const ids = reranker.pairIds(query, doc, i, false);
      total += ids.length;
      const h = (await referenceFinalHidden(files, ids)).at(-1)!;
      const [yes, no] = rows.map((r) => r.reduce((s, w, j) => s + w * h[j], 0));
      const expected = Math.exp(yes) / (Math.exp(yes) + Math.exp(no));
      assert(Math.abs(scores[i] - expected) <= 1e-4, `document ${i}: ${scores[i]} vs ${expected}`);
      // Near 0 or 1 a score says little: its log-odds are the logits' difference.
      const logOdds = Math.log(scores[i] / (1 - scores[i]));
      assert(
        Math.abs(logOdds - (yes - no)) <= 1e-2,
        `document ${i}: log-odds ${logOdds} vs ${yes - no}`,
      );
    }
    assertEquals(promptTokens, total);
    // A pair over the context is refused, or truncated to it.
    const longDoc = "fox ".repeat(400);
    await assertRejects(() => reranker.rerank(query, [longDoc]), InvalidRequest);
    const cut = await reranker.rerank(query, [longDoc], { truncate: true });
    assertEquals(cut.promptTokens, CONTEXT);
    assert(cut.scores[0] > 0 && cut.scores[0] < 1);
    await assertKvFreed(runtime);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: refuses empty inputs, ids outside the vocabulary and over-long inputs unless truncating", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, files } = await serve(dir, 64, 8);
  try {
    const embedder = await DecoderEmbedder.open(dir, runtime, tokenizer);
    const refused = async (inputs: (string | number[])[], param: string, code: string) => {
      await assertRejects(
        () => embedder.embed(inputs),
        (e) => e instanceof InvalidRequest && e.param === param && e.code === code,
      );
    };
    await refused(["fine", ""], "input[1]", "invalid_value");
    await refused([[]], "input[0]", "invalid_value");
    await refused([[1, files.config.vocabSize]], "input[0]", "invalid_value");
    await refused([[1, -1]], "input[0]", "invalid_value");
    await refused([[1, 2.5]], "input[0]", "invalid_value");
    const long = Array.from({ length: CONTEXT + 5 }, (_, i) => i + 1);
    await refused([long], "input[0]", "context_length_exceeded");
    // The whole context is readable, and truncation keeps the first maxInputTokens ids.
    const full = await embedder.embed([long.slice(0, CONTEXT)]);
    const cut = await embedder.embed([long], { truncate: true });
    assertEquals(cut.promptTokens, CONTEXT);
    assert(maxAbsDiff(full.vectors[0], cut.vectors[0]) <= 1e-5);
    // Truncated text keeps its final <|endoftext|>.
    const eot = tokenId(tokenizer, END_OF_TEXT)!;
    const text = "word ".repeat(400);
    const textIds = [...tokenizer.encode(text).slice(0, CONTEXT - 1), eot];
    const { vectors } = await embedder.embed([text], { truncate: true });
    assert(cosine(vectors[0], await referenceVector(files, textIds, "last")) >= 0.9999);
    await assertKvFreed(runtime);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decoder embedder: the hidden reads cross from the engine Worker as they do in-process", async () => {
  const dir = await writeEmbeddingModel();
  const { runtime, tokenizer, prompts } = await openRuntime(
    dir,
    {
      engine: { gpuKvMb: 4, maxRows: 8, maxSlots: 4, skipWarmUp: true },
      runtime: { policy: "fcfs", maxQueue: 64, maxTokensLimit: 512 },
      inProcess: false,
    },
    () => {},
  );
  try {
    const files = await openModelDir(dir);
    const embedder = await DecoderEmbedder.open(dir, runtime, tokenizer);
    const eot = tokenId(tokenizer, END_OF_TEXT)!;
    const { vectors } = await embedder.embed(TEXTS);
    for (const [i, v] of vectors.entries()) {
      const ids = [...tokenizer.encode(TEXTS[i]), eot];
      const c = cosine(v, await referenceVector(files, ids, "last"));
      assert(c >= 0.9999, `input ${i}: cosine ${c}`);
    }
    await assertKvFreed(runtime);
  } finally {
    prompts.close();
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});
