// --kv-dtype: an f32 KV cache beside f16 weights takes twice the bytes per block and gives the
// same greedy tokens as the default f16 cache, with logits as close to the float64 reference.

import { Engine } from "../../engine/engine.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { assertClose } from "../helpers/compare.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng, testSeed } from "../helpers/random.ts";
import { referenceForward } from "../helpers/reference_llama.ts";
import { assertEquals } from "../helpers/testing.ts";

const SPEC = {
  hiddenSize: 64,
  intermediateSize: 136,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  tied: true,
  dtype: "F16",
} as const;

Deno.test("f32 KV on the f16 path: same greedy tokens, reference logits", async (t) => {
  const gpu = await testGpu();
  if (!gpu.f16) return; // no shader-f16: the default KV is already f32
  const seed = testSeed();
  const dir = await Deno.makeTempDir({ prefix: "sluice-kv-dtype-" });
  try {
    await writeTinyModel(dir, { ...SPEC, seed });
    const files = await openModelDir(dir);
    const next = rng(seed + 1);
    const prompt = Array.from({ length: 9 }, () => Math.floor(next() * files.config.vocabSize));
    const runs: Record<string, { tokens: number[]; blockBytes: number }> = {};
    for (const kvDtype of [undefined, "f32"] as const) {
      await t.step(`KV ${kvDtype ?? "default (f16)"}`, async () => {
        const engine = await Engine.load({
          modelDir: dir,
          gpu,
          kvDtype,
          gpuKvMb: 1,
          maxSlots: 2,
          maxRows: 16,
          blockSize: 4,
          maxTopLogprobs: 1,
          ringSize: 2,
          skipWarmUp: true,
        });
        try {
          const ids = [...prompt];
          const pool = new BlockPool(engine.info);
          let sampling = [{ slot: 0, params: { temperature: 0, topK: 0, topP: 1, seed: 0 } }];
          for (let from = 0; ids.length < prompt.length + 8; from = ids.length - 1) {
            const added = pool.growAll(0, ids.length)!;
            const tables = added.flatMap((blocks, layer) =>
              blocks.length === 0
                ? []
                : [{ slot: 0, layer, first: pool.table(0, layer).length - blocks.length, blocks }]
            );
            const rows = ids.slice(from).map((token, i) => ({ slot: 0, pos: from + i, token }));
            const records = await engine.step({
              tables,
              sampling,
              rows,
              samples: [{ row: rows.length - 1 }],
              wantTopLogprobs: false,
            });
            sampling = [];
            const [logits] = await engine.readLogits(1);
            const want = (await referenceForward(files, ids)).at(-1)!;
            assertClose(logits, want, 2e-2, `KV ${kvDtype} at ${ids.length} (seed ${seed})`);
            ids.push(records[0].id);
          }
          runs[kvDtype ?? "default"] = {
            tokens: ids.slice(prompt.length),
            blockBytes: engine.info.kvBlockBytes,
          };
        } finally {
          await engine.close();
        }
      });
    }
    assertEquals(runs.f32.tokens, runs.default.tokens, `greedy tokens (seed ${seed})`);
    assertEquals(runs.f32.blockBytes, 2 * runs.default.blockBytes);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
