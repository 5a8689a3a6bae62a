// A GGUF model split over several files (NAME-00001-of-00003.gguf, as llama.cpp's gguf-split
// writes them) opens as one model from any of its parts: the first part's metadata, every part's
// tensors with their bytes read from the right file, and on the GPU the same logits and greedy
// tokens as the unsplit file. A missing part, a part of another set, a part whose split.no
// disagrees with its name, and a wrong split.tensors.count fail the load naming the file.

import { join } from "node:path";
import { Engine } from "../../../engine/engine.ts";
import { readTensorInto } from "../../../engine/formats/safetensors.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import type { ModelFiles } from "../../../engine/formats/model_files.ts";
import type { GgufTensor } from "../../../engine/formats/gguf.ts";
import { meta, writeGguf } from "../../../engine/formats/gguf_writer.ts";
import { ModelLoadError } from "../../../engine/model/errors.ts";
import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { rng } from "../../helpers/random.ts";
import { splitGguf } from "../../helpers/split_gguf.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";

const SPEC = {
  hiddenSize: 64,
  intermediateSize: 96,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: false,
  dtype: "F32" as const,
  seed: 7,
};

async function withSplitModel(
  fn: (whole: string, parts: string[], dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-split-" });
  try {
    const g = await writeTinyGguf(dir, SPEC, { type: "Q8_0" });
    const parts = await splitGguf(g.path, dir, "tiny-Q8_0", 3);
    await fn(g.path, parts, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function tensorBytes(t: GgufTensor): Promise<Uint8Array> {
  const bytes = new Uint8Array(t.byteLength);
  await readTensorInto({ ...t, dtype: "U8", shape: [t.byteLength] } as never, bytes);
  return bytes;
}

async function assertSameModel(got: ModelFiles, want: ModelFiles): Promise<void> {
  assertEquals(got.config, want.config);
  assertEquals(got.tokenizerJson, want.tokenizerJson);
  const gotTensors = got.gguf!.tensors, wantTensors = want.gguf!.tensors;
  assertEquals([...gotTensors.keys()].sort(), [...wantTensors.keys()].sort());
  for (const [name, t] of wantTensors) {
    const g = gotTensors.get(name)!;
    assertEquals([g.typeName, g.dims], [t.typeName, t.dims], name);
    assertEquals(await tensorBytes(g), await tensorBytes(t), `bytes of ${name}`);
  }
}

Deno.test("split GGUF: any part opens the whole set, tensors read from their own file", async () => {
  await withSplitModel(async (whole, parts) => {
    const want = await openModelDir(whole);
    for (const part of parts) {
      const got = await openModelDir(part);
      assertEquals(got.dir, parts[0], "the set is named by its first part");
      await assertSameModel(got, want);
    }
    // The tensors really are spread: each part holds some.
    const files = new Set(
      [...(await openModelDir(parts[0])).gguf!.tensors.values()].map((t) => t.file),
    );
    assertEquals([...files].sort(), [...parts].sort());
  });
});

Deno.test("split GGUF: missing and mismatched parts fail naming the file", async () => {
  await withSplitModel(async (_whole, parts, dir) => {
    const rejects = async (path: string, file: string, problem: RegExp) => {
      await assertRejects(() => openModelDir(path), (e: unknown) => {
        assert(e instanceof ModelLoadError, String(e));
        assert(e.message.includes(file) && problem.test(e.message), e.message);
        return true;
      });
    };
    const saved = await Deno.readFile(parts[2]);
    await Deno.remove(parts[2]);
    await rejects(parts[0], parts[2], /missing: part 3 of 3 of a split model/);
    await rejects(parts[1], parts[2], /missing/);

    // A part whose split.no is not the one its name says.
    await writeGguf(parts[2], {
      metadata: {
        "split.no": meta.u16(1),
        "split.count": meta.u16(3),
        "split.tensors.count": meta.i32(1),
      },
      tensors: [],
    });
    await rejects(parts[0], parts[2], /says it is part 2 of 3/);

    // The right numbering but a tensor short: split.tensors.count disagrees.
    await writeGguf(parts[2], {
      metadata: {
        "split.no": meta.u16(2),
        "split.count": meta.u16(3),
        "split.tensors.count": meta.i32(1),
      },
      tensors: [],
    });
    await rejects(parts[0], parts[0], /split.tensors.count/);

    // A part renamed out of its set cannot find the others.
    await Deno.writeFile(parts[2], saved);
    const renamed = join(dir, "renamed.gguf");
    await Deno.copyFile(parts[1], renamed);
    await rejects(renamed, renamed, /name is not NAME-0000i-of-00003.gguf/);
  });
});

Deno.test("split GGUF on the GPU: the same logits and greedy tokens as the unsplit file", async () => {
  const gpu = await testGpu();
  await withSplitModel(async (whole, parts) => {
    const runs: { logits: Float32Array[]; tokens: number[] }[] = [];
    for (const modelDir of [whole, parts[1]]) {
      const engine = await Engine.load({
        modelDir,
        gpu,
        gpuKvMb: 1,
        maxSlots: 16,
        maxRows: 32,
        blockSize: 16,
        maxTopLogprobs: 1,
        ringSize: 2,
        skipWarmUp: true,
      });
      try {
        runs.push(await greedyRun(engine));
      } finally {
        await engine.close();
      }
    }
    const [a, b] = runs;
    assertEquals(b.tokens, a.tokens, "greedy tokens");
    a.logits.forEach((row, i) => assertEquals(b.logits[i], row, `logits of row ${i}`));
    assert(a.logits.every((row) => row.every(Number.isFinite)), "finite logits");
  });
});

/** A 10-token prompt, then 4 greedy steps: every row's logits and the chosen ids. */
async function greedyRun(engine: Engine): Promise<{ logits: Float32Array[]; tokens: number[] }> {
  const vocab = engine.info.vocabSize;
  const next = rng(vocab);
  const ids = Array.from({ length: 10 }, () => Math.floor(next() * vocab));
  const pool = new BlockPool(engine.info);
  let sampling = [{ slot: 0, params: { temperature: 0, topK: 0, topP: 1, seed: 0 } }];
  const logits: Float32Array[] = [];
  const tokens: number[] = [];
  let from = 0;
  for (let step = 0; step < 5; step++) {
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
      samples: rows.map((_, row) => ({ row })),
      wantTopLogprobs: false,
    });
    sampling = [];
    logits.push(...await engine.readLogits(rows.length));
    from = ids.length;
    ids.push(records.at(-1)!.id);
    tokens.push(records.at(-1)!.id);
  }
  pool.release(0);
  return { logits, tokens };
}
