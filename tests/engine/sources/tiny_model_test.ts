// Generated tiny models: every flavour (attention shapes, dtypes, tied or not, RoPE scaling,
// shards) opens cleanly with the tensors the config implies, and a seed gives the same model.

import { join } from "node:path";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { SMALL, tempDir } from "../../helpers/model_files.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { expectedTensors } from "../../../engine/model/tensors.ts";
import { type TinyModelSpec, writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { TOKENIZER_VOCAB_SIZE } from "../../../engine/sources/tiny_tokenizer.ts";

Deno.test("tiny models of every flavour open cleanly", async (t) => {
  const cases: [string, Partial<TinyModelSpec>][] = [
    ["MHA f32 untied", { numKvHeads: 4 }],
    ["GQA f16 tied", { dtype: "F16", tied: true }],
    ["MQA bf16", { numKvHeads: 1, dtype: "BF16" }],
    ["llama3 rope", {
      ropeTheta: 500000,
      ropeScaling: {
        type: "llama3",
        factor: 8,
        lowFreqFactor: 1,
        highFreqFactor: 4,
        originalMaxPositionEmbeddings: 64,
      },
    }],
    ["linear rope", { ropeScaling: { type: "linear", factor: 2 } }],
    ["sharded x3 bf16", { shards: 3, dtype: "BF16" }],
    ["head_dim != hidden/heads", { headDim: 12 }],
    ["full tokenizer vocab", { vocabSize: undefined }],
    ["padded vocab", { vocabSize: 600 }],
    ["qwen2 (q, k, v biases)", { architecture: "qwen2" }],
    ["qwen3 (q and k norms)", { architecture: "qwen3", headDim: 16 }],
    ["mistral (sliding window)", { architecture: "mistral", slidingWindow: 32 }],
  ];
  for (const [label, overrides] of cases) {
    await t.step(label, async () => {
      const spec = { ...SMALL, ...overrides };
      const dir = await tempDir();
      try {
        await writeTinyModel(dir, spec);
        const files = await openModelDir(dir);
        const c = files.config;
        assertEquals(files.dir, dir);
        assertEquals(
          [c.numHeads, c.numKvHeads, c.headDim, c.tieWordEmbeddings, c.vocabSize],
          [
            spec.numHeads,
            spec.numKvHeads,
            spec.headDim ?? spec.hiddenSize / spec.numHeads,
            spec.tied,
            spec.vocabSize ?? TOKENIZER_VOCAB_SIZE,
          ],
        );
        assertEquals(c.ropeScaling, spec.ropeScaling ?? null);
        assertEquals(
          [c.architecture, c.qkvBias, c.qkNorm, c.slidingWindow],
          [
            spec.architecture ?? "llama",
            spec.architecture === "qwen2",
            spec.architecture === "qwen3",
            spec.slidingWindow ?? null,
          ],
        );
        const expected = expectedTensors(c);
        // 9 per layer, Qwen2's 3 biases or Qwen3's 2 norms beside them.
        const extra = { qwen2: 3, qwen3: 2 }[spec.architecture as string] ?? 0;
        assertEquals(expected.length, 2 + (9 + extra) * spec.numLayers + (spec.tied ? 0 : 1));
        for (const want of expected) {
          const info = files.tensors.get(want.name)!;
          assertEquals([info.shape, info.dtype], [want.shape, spec.dtype], want.name);
        }
        const shardFiles = new Set([...files.tensors.values()].map((i) => i.file));
        assertEquals(shardFiles.size, spec.shards ?? 1);
        assert(files.generationConfig !== null && files.tokenizerConfig.chat_template);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});

Deno.test("tiny models are deterministic from the seed", async () => {
  const dirs = [await tempDir(), await tempDir(), await tempDir()];
  try {
    await writeTinyModel(dirs[0], SMALL);
    await writeTinyModel(dirs[1], SMALL);
    await writeTinyModel(dirs[2], { ...SMALL, seed: SMALL.seed + 1 });
    const read = (d: string) => Deno.readFile(join(d, "model.safetensors"));
    assertEquals(await read(dirs[0]), await read(dirs[1]));
    const [a, c] = [await read(dirs[0]), await read(dirs[2])];
    assert(
      a.length === c.length && a.some((b, i) => b !== c[i]),
      "a different seed gives other weights",
    );
  } finally {
    for (const d of dirs) await Deno.remove(d, { recursive: true });
  }
});
