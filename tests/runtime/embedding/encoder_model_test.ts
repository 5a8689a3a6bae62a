// The encoder behind the embedding face: text and token-id inputs embedded as the float64
// reference embeds the same ids (pooling as modules.json says, mean without one; L2-normalised,
// cosine ≥ 0.9999), many inputs split into passes by the budgets with the same bits as one pass,
// truncation and every refusal as InvalidRequest, relevance scores of both classification heads
// (sigmoid of the reference's logit within 1e-4), close() releasing every buffer, and the routing
// predicate on encoder, decoder and empty directories.

import { join } from "node:path";
import { EncoderModel, EncoderTokenizer } from "../../../engine/encoder/encoder.ts";
import { writeTinyEncoder } from "../../../engine/sources/tiny_encoder.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { EncoderEmbedder, passes, relevance } from "../../../runtime/embedding/encoder_model.ts";
import { isEncoderModel, openEncoderModel } from "../../../runtime/embedding/open_encoder.ts";
import { InvalidRequest } from "../../../runtime/errors/invalid_request.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { loadReferenceBert } from "../../helpers/reference_bert.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { cosine } from "../../helpers/compare.ts";

const SHAPE = { numLayers: 2, hiddenSize: 32, numHeads: 4, intermediateSize: 64, seed: 3 };
const TEXTS = ["hello world", "the quick brown fox", "playing 42!", "x", "naïve café, 中文"];

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-embed-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("embedder: vectors as the reference's, pooled as modules.json says (mean without it)", async (t) => {
  const gpu = await testGpu();
  await withDir(async (root) => {
    for (
      const [family, pooling, mode] of [
        ["bert", "cls", "first"],
        ["bert", undefined, "mean"],
        ["xlm-roberta", "mean", "mean"],
        ["nomic_bert", "mean", "mean"],
      ] as const
    ) {
      await t.step(`${family} pooling=${pooling ?? "none"}`, async () => {
        const dir = join(root, `${family}-${pooling}`);
        const dtype = gpu.f16 ? "F16" : "F32";
        await writeTinyEncoder(dir, { family, ...SHAPE, pooling, dtype });
        const opened = await openEncoderModel(dir, { gpu });
        assertEquals(opened.kind, "embedding");
        const embedder = opened.embedder!;
        assertEquals(embedder.dimensions, SHAPE.hiddenSize);
        const tokenizer = await EncoderTokenizer.load(dir);
        const ref = await loadReferenceBert(dir);
        const ids = [5, 17, 30, 2];
        const got = await embedder.embed([...TEXTS, ids]);
        const wantIds = [...TEXTS.map((s) => tokenizer.encode(s)), { ids, typeIds: undefined }];
        assertEquals(got.promptTokens, wantIds.reduce((a, x) => a + x.ids.length, 0));
        got.vectors.forEach((v, i) => {
          const norm = Math.hypot(...v);
          assert(Math.abs(norm - 1) < 1e-5, `vector ${i} has norm ${norm}`);
          const want = ref.pooled(
            wantIds[i].ids,
            mode,
            family === "xlm-roberta" ? undefined : wantIds[i].typeIds,
          );
          const cos = cosine(v, want);
          assert(cos >= 0.9999, `input ${i}: cosine ${cos}`);
        });
        await embedder.close();
      });
    }
  });
});

Deno.test("embedder: many passes under small budgets give the bits of one pass", async () => {
  const gpu = await testGpu();
  await withDir(async (dir) => {
    await writeTinyEncoder(dir, { family: "bert", ...SHAPE, pooling: "mean", dtype: "F32" });
    const one = (await openEncoderModel(dir, { gpu })).embedder!;
    const split = (await openEncoderModel(dir, { gpu, maxBatchInputs: 2 })).embedder!;
    const inputs = [...TEXTS, ...TEXTS.map((s) => s + " " + s)];
    const a = await one.embed(inputs);
    const b = await split.embed(inputs);
    assertEquals(b.vectors.map((v) => [...v]), a.vectors.map((v) => [...v]));
    assertEquals(b.promptTokens, a.promptTokens);
    // Concurrent calls are queued, not interleaved on the shared activations.
    const [c, d] = await Promise.all([
      split.embed(inputs.slice(0, 3)),
      split.embed(inputs.slice(3)),
    ]);
    assertEquals([...c.vectors, ...d.vectors].map((v) => [...v]), a.vectors.map((v) => [...v]));
    await one.close();
    await split.close();
  });
});

Deno.test("embedder: refusals are InvalidRequest; truncate keeps the first tokens", async () => {
  const gpu = await testGpu();
  await withDir(async (dir) => {
    // 16 positions: the longest input is 16 tokens.
    await writeTinyEncoder(dir, { family: "bert", ...SHAPE, maxPositions: 16, dtype: "F32" });
    const embedder = (await openEncoderModel(dir, { gpu })).embedder!;
    assertEquals(embedder.maxInputTokens, 16);
    const refused = (inputs: (string | number[])[], code: string) =>
      assertRejects(
        () => embedder.embed(inputs),
        (e: unknown) => e instanceof InvalidRequest && e.code === code,
        JSON.stringify(inputs),
      );
    await refused([], "invalid_value");
    await refused(["hello", ""], "invalid_value");
    await refused([[]], "invalid_value");
    await refused([[1, 2, 99999]], "invalid_value");
    await refused([[1, -1]], "invalid_value");
    await refused([[1.5]], "invalid_value");
    const long = Array.from({ length: 20 }, (_, i) => 10 + i);
    await refused([long], "context_length_exceeded");
    const longText = "hello world the quick brown fox playing hello world the quick brown fox fox";
    await refused([longText], "context_length_exceeded");
    // Truncated: the first 16 ids, as if given so.
    const cut = await embedder.embed([long], { truncate: true });
    const first = await embedder.embed([long.slice(0, 16)]);
    assertEquals([...cut.vectors[0]], [...first.vectors[0]]);
    assertEquals(cut.promptTokens, 16);
    const text = await embedder.embed([longText], { truncate: true });
    assertEquals(text.promptTokens, 16);
    await embedder.close();
  });
});

Deno.test("reranker: sigmoid (or two-label softmax) of the reference's logits on the tokenized pair", async (t) => {
  const gpu = await testGpu();
  await withDir(async (root) => {
    for (const [family, numLabels] of [["bert", 1], ["xlm-roberta", 1], ["bert", 2]] as const) {
      await t.step(`${family} labels=${numLabels}`, async () => {
        const dir = join(root, `${family}-${numLabels}`);
        await writeTinyEncoder(dir, {
          family,
          ...SHAPE,
          numLabels,
          dtype: gpu.f16 ? "F16" : "F32",
        });
        const opened = await openEncoderModel(dir, { gpu });
        assertEquals(opened.kind, "reranker");
        const reranker = opened.reranker!;
        const tokenizer = await EncoderTokenizer.load(dir);
        const ref = await loadReferenceBert(dir);
        const query = "quick fox";
        const got = await reranker.rerank(query, TEXTS);
        assertEquals(got.scores.length, TEXTS.length);
        let tokens = 0;
        TEXTS.forEach((doc, i) => {
          const pair = tokenizer.encodePair(query, doc);
          tokens += pair.ids.length;
          const logits = ref.logits(pair.ids, family === "bert" ? pair.typeIds : undefined);
          const want = relevance(Float32Array.from(logits));
          assert(Math.abs(got.scores[i] - want) < 1e-4, `doc ${i}: ${got.scores[i]} vs ${want}`);
        });
        assertEquals(got.promptTokens, tokens);
        await assertRejects(() => reranker.rerank("", TEXTS), InvalidRequest);
        await assertRejects(() => reranker.rerank(query, []), InvalidRequest);
        await assertRejects(() => reranker.rerank(query, ["a", ""]), InvalidRequest);
        await reranker.close();
      });
    }
  });
});

Deno.test("embedder close(): every device buffer of the model released", async () => {
  const gpu = await testGpu();
  await withDir(async (dir) => {
    await writeTinyEncoder(dir, { family: "bert", ...SHAPE, dtype: "F32" });
    const model = await EncoderModel.load(dir, { gpu });
    const embedder = new EncoderEmbedder(model, await EncoderTokenizer.load(dir), "mean");
    await embedder.embed(["hello world"]);
    assert(model.deviceMemory().bytes > 0);
    await embedder.close();
    assertEquals(model.deviceMemory(), { buffers: 0, bytes: 0 });
  });
});

Deno.test("isEncoderModel: encoders yes; a decoder, a missing config, no", async () => {
  await withDir(async (root) => {
    for (const family of ["bert", "xlm-roberta", "nomic_bert"] as const) {
      const dir = join(root, family);
      await writeTinyEncoder(dir, { family, ...SHAPE, dtype: "F32" });
      assert(await isEncoderModel(dir), family);
    }
    const decoder = join(root, "llama");
    await writeTinyModel(decoder, {
      hiddenSize: 32,
      intermediateSize: 64,
      numLayers: 1,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F32",
      seed: 1,
    });
    assert(!(await isEncoderModel(decoder)));
    assert(!(await isEncoderModel(join(root, "nothing-here"))));
  });
});

Deno.test("passes: consecutive groups within the token and input budgets", () => {
  const x = (n: number) => ({ ids: new Array(n).fill(0) });
  const sizes = (groups: { ids: number[] }[][]) => groups.map((g) => g.map((i) => i.ids.length));
  assertEquals(sizes([...passes([x(3), x(4), x(2), x(5)], 7, 10)]), [[3, 4], [2, 5]]);
  assertEquals(sizes([...passes([x(3), x(4), x(2)], 100, 2)]), [[3, 4], [2]]);
  assertEquals(sizes([...passes([x(8)], 7, 10)]), [[8]]);
  assertEquals([...passes([], 7, 10)], []);
});
