// Encoders from GGUF files written as llama.cpp writes them (engine/sources/tiny_encoder_gguf.ts):
// BERT with separate and fused q/k/v, NomicBERT, F32 and F16 matrices; each against the float64
// reference on the directory it was written from (cosine ≥ 0.9999 after L2 normalisation, each
// element within 1e-4 of the largest: the GGUF holds the directory's values exactly, F16 ones from
// an F16 directory). The WordPiece vocabulary rebuilt from the GGUF's phantom-space tokens encodes
// as the directory's tokenizer.json does; pooling_type becomes the embedder's pooling; the routing
// predicate knows GGUF encoders from other GGUF files.

import { join } from "node:path";
import { EncoderModel, EncoderTokenizer } from "../../../engine/encoder/encoder.ts";
import { writeTinyEncoder } from "../../../engine/sources/tiny_encoder.ts";
import { meta, writeGguf } from "../../../engine/formats/gguf_writer.ts";
import { isEncoderModel, openEncoderModel } from "../../../runtime/embedding/open_encoder.ts";
import { testGpu, testGpuF32 } from "../../helpers/gpu.ts";
import { loadReferenceBert } from "../../helpers/reference_bert.ts";
import { writeTinyEncoderGguf } from "../../../engine/sources/tiny_encoder_gguf.ts";
import { assertClose } from "../../helpers/compare.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const SHAPE = { numLayers: 2, hiddenSize: 32, numHeads: 4, intermediateSize: 64, seed: 5 };
const TEXTS = ["Hello world", "the quick brown fox, playing 42!", "naïve café 中文"];

function normalised(v: ArrayLike<number>): number[] {
  const n = Math.hypot(...Array.from(v));
  return Array.from(v, (x) => x / n);
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const x = normalised(a), y = normalised(b);
  const c = x.reduce((s, v, i) => s + v * y[i], 0);
  return Number.isFinite(c) ? c : -1;
}

Deno.test("GGUF encoders: BERT (separate, fused qkv), NomicBERT, F32 and F16, match the reference", async (t) => {
  const root = await Deno.makeTempDir({ prefix: "sluice-gguf-encoder-" });
  try {
    for (
      const [family, type, fusedQkv] of [
        ["bert", "F32", false],
        ["bert", "F16", true],
        ["nomic_bert", "F32", false],
        ["nomic_bert", "F16", false],
      ] as const
    ) {
      await t.step(`${family} ${type}${fusedQkv ? " fused qkv" : ""}`, async () => {
        const dir = join(root, `${family}-${type}-${fusedQkv}`);
        await writeTinyEncoder(dir, { family, ...SHAPE, dtype: type });
        const path = join(root, `${family}-${type}-${fusedQkv}.gguf`);
        await writeTinyEncoderGguf(dir, path, { type, fusedQkv, poolingType: 1 });
        // F32 matrices on the f32 path; F16 ones wherever the adapter reads f16.
        const gpu = type === "F32" ? await testGpuF32() : await testGpu();
        const model = await EncoderModel.load(path, { gpu });
        const ref = await loadReferenceBert(dir);
        const inputs = [[2, 40, 41, 77, 3], [2, 9], [2, 100, 101, 102, 103, 104, 3]].map((ids) => ({
          ids,
        }));
        const got = await model.pooled(inputs, "mean");
        inputs.forEach((x, i) => {
          const want = ref.pooled(x.ids, "mean");
          assert(cosine(got[i], want) >= 0.9999, `input ${i}: cosine ${cosine(got[i], want)}`);
          assertClose(got[i], want, 1e-4, `input ${i}`);
        });
        model.close();
      });
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("GGUF encoders: the rebuilt WordPiece encodes as tokenizer.json; pooling_type is the pooling", async () => {
  const gpu = await testGpuF32();
  const root = await Deno.makeTempDir({ prefix: "sluice-gguf-encoder-tok-" });
  try {
    const dir = join(root, "bert");
    await writeTinyEncoder(dir, { family: "bert", ...SHAPE, dtype: "F32" });
    const path = join(root, "bert.gguf");
    await writeTinyEncoderGguf(dir, path, { type: "F32", poolingType: 2 });
    const fromDir = await EncoderTokenizer.load(dir);
    const fromGguf = await EncoderTokenizer.load(path);
    for (const text of TEXTS) {
      assertEquals(fromGguf.encode(text), fromDir.encode(text), text);
      assertEquals(fromGguf.encodePair(text, "the fox"), fromDir.encodePair(text, "the fox"), text);
    }
    assert(await isEncoderModel(path));
    const opened = await openEncoderModel(path, { gpu });
    assertEquals(opened.kind, "embedding");
    const ref = await loadReferenceBert(dir);
    const { vectors } = await opened.embedder!.embed(TEXTS);
    vectors.forEach((v, i) => {
      const e = fromDir.encode(TEXTS[i]);
      // pooling_type 2: the CLS row.
      const want = ref.pooled(e.ids, "first", e.typeIds);
      assert(cosine(v, want) >= 0.9999, `text ${i}: cosine ${cosine(v, want)}`);
    });
    await opened.embedder!.close();
    // A GGUF of another architecture is not an encoder.
    const llama = join(root, "llama.gguf");
    await writeGguf(llama, {
      metadata: { "general.architecture": meta.str("llama") },
      tensors: [],
    });
    assert(!(await isEncoderModel(llama)));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
