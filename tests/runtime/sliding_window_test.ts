// Sliding-window models served by the runtime over a real engine (Mistral, window 8 on every layer;
// Gemma 3, window 8 on two local layers of three): a request's blocks that fall wholly behind a
// layer's window go back to the pool while it runs, and its greedy tokens are still the float64
// reference's. Two requests run side by side, so blocks one frees
// are taken and written by the other (freeing a block still in a window would show); with the
// prefix cache on, a request sharing an earlier one's cached prompt blocks gets its tokens too.

import { Engine } from "../../engine/engine.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import { Runtime } from "../../runtime/service.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { EXPIRED, SlidingWindow } from "../../runtime/sliding_window.ts";
import { stage, testRequest } from "../helpers/requests.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testGpuF32 } from "../helpers/gpu.ts";
import { rng, testSeed } from "../helpers/random.ts";
import { referenceForward } from "../helpers/reference_llama.ts";

const WINDOW = 8;
const BLOCK = 4;
const PROMPT = 22;
const MAX_TOKENS = 12;
const LAYERS = 2; // of the unit tests' pools

/** Each model: its spec's own fields, and how many of its layers have the window. */
const MODELS: { name: string; spec: Partial<TinyModelSpec>; layers: number; local: number }[] = [
  { name: "mistral", spec: { architecture: "mistral", numLayers: 2 }, layers: 2, local: 2 },
  {
    name: "gemma3, layers local, local, global",
    spec: { architecture: "gemma3", numLayers: 3, slidingWindowPattern: 3 },
    layers: 3,
    local: 2,
  },
];

/**
 * The f32 path, so that a wrong KV entry shows: logits within 2e-4 of the largest |logit| of the
 * reference (model_logits_test.ts), so each token's logprob within twice that, and a greedy choice
 * may differ from the reference's argmax only on a near-tie within it.
 */
const BOUND = 2e-4;

for (const model of MODELS) {
  Deno.test(`sliding window (${model.name}): blocks behind the window are freed, tokens stay the reference's`, async (t) => {
    const seed = testSeed();
    const dir = await Deno.makeTempDir({ prefix: "sluice-window-" });
    try {
      await writeTinyModel(dir, {
        slidingWindow: WINDOW,
        hiddenSize: 64,
        intermediateSize: 136,
        numLayers: model.layers,
        ...model.spec,
        numHeads: 4,
        numKvHeads: 2,
        headDim: 16,
        tied: true,
        dtype: "F32",
        seed,
      });
      const files = await openModelDir(dir);
      const next = rng(seed + 1);
      const randomPrompt = (length: number) =>
        Array.from({ length }, () => Math.floor(next() * files.config.vocabSize));
      // Lengths 22 and 19: the two cross block boundaries at different phases of each other's window.
      const prompts = [randomPrompt(PROMPT), randomPrompt(PROMPT - 3)];
      const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

      for (const prefixCache of [false, true]) {
        await t.step(`prefix cache ${prefixCache ? "on" : "off"}`, async () => {
          const engine = await Engine.load({
            modelDir: dir,
            gpu: await testGpuF32(),
            gpuKvMb: 1,
            maxSlots: 4,
            maxRows: 8, // the prompt prefills in chunks, freeing between them
            blockSize: BLOCK,
            skipWarmUp: true,
          });
          const runtime = new Runtime(engine, {
            policy: "fcfs",
            prefixCache,
            maxQueue: 10,
            maxTokensLimit: 1000,
            eosIds: [],
          });
          try {
            // Cache off: two prompts side by side. Cache on: the first prompt, then again.
            const waves = prefixCache ? [[prompts[0]], [prompts[0]]] : [prompts];
            const outputs: { id: number; logprob: number }[][] = [];
            for (const wave of waves) {
              let peak = 0;
              const handles = wave.map((ids) =>
                runtime.submit({ ids, maxTokens: MAX_TOKENS, sampling: greedy, stopIds: [] })
              );
              const got = await Promise.all(handles.map(async (handle) => {
                const tokens: { id: number; logprob: number }[] = [];
                for await (const ev of handle.tokens) {
                  tokens.push({ id: ev.id, logprob: ev.logprob });
                  if (tokens.length >= 2) peak = Math.max(peak, runtime.stats().kvBlocksUsed);
                }
                await handle.done;
                return tokens;
              }));
              // Once decoding, a request holds its window's blocks and the one being written: at
              // most ceil(W / B) + 2 per local layer (9 per layer at the end without freeing); a
              // global layer holds all 9.
              const perRequest = model.local * (Math.ceil(WINDOW / BLOCK) + 2) +
                (model.layers - model.local) * Math.ceil((PROMPT + MAX_TOKENS) / BLOCK);
              const bound = wave.length * perRequest;
              assert(
                peak <= bound,
                `seed ${seed}: ${peak} blocks held while decoding (> ${bound})`,
              );
              outputs.push(...got);
            }
            const runs = outputs.length;
            const stats = runtime.stats();
            // By its last row (position 32, or 29) the first floor((32 - 8 + 1) / 4) = 6 (5) blocks
            // per layer were behind the window; one admitted on a cached prefix frees shared ones.
            assert(
              stats.windowReleasedBlocks >= runs * model.local * 5,
              `seed ${seed}: only ${stats.windowReleasedBlocks} entries released`,
            );
            assertEquals(stats.kvBlocksUsed, 0);
            if (prefixCache) {
              assert(stats.prefix!.hitBlocks > 0, "the second request shared the cached prompt");
              assertEquals(
                outputs[1].map((t) => t.id),
                outputs[0].map((t) => t.id),
                `seed ${seed}: tokens with a cached prefix`,
              );
            }
            // The reference, fed the same tokens, chooses each one, with the logprob the GPU gave.
            for (const [r, output] of outputs.entries()) {
              const seq = [...(prefixCache ? prompts[0] : prompts[r])];
              for (const [i, { id, logprob }] of output.entries()) {
                const logits = (await referenceForward(files, seq)).at(-1)!;
                const best = Math.max(...logits);
                const scale = Math.max(...logits.map(Math.abs));
                const what = `seed ${seed}: request ${r} token ${i} (${id})`;
                assert(best - logits[id] <= 2 * BOUND * scale, `${what} is below the best logit`);
                const logSum = best + Math.log(logits.reduce((s, v) => s + Math.exp(v - best), 0));
                const want = logits[id] - logSum;
                assert(
                  Math.abs(logprob - want) <= 2 * BOUND * scale,
                  `${what}: logprob ${logprob}, reference ${want}`,
                );
                seq.push(id);
              }
            }
          } finally {
            await runtime.close();
          }
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("sliding window: exactly the blocks wholly before the next row's window are freed", () => {
  const pool = new BlockPool({ blockSize: BLOCK, blocksPerArena: [64], layerArena: [0, 0] });
  const window = new SlidingWindow(pool, [WINDOW, WINDOW]);
  const req = stage(
    testRequest(1, { ids: Array.from({ length: 41 }, (_, i) => i + 1) }),
    "prefilling",
  );
  assert(pool.growAll(1, 40));
  for (let computed = 0; computed <= 40; computed++) {
    req.computeTo(computed);
    window.expire(req);
    // The next row (position `computed`) reads from computed - W + 1: blocks ending before it go.
    const first = Math.max(0, computed - WINDOW + 1);
    const gone = Math.floor(first / BLOCK);
    for (let layer = 0; layer < LAYERS; layer++) {
      const table = pool.table(1, layer);
      assertEquals(table.slice(0, gone), new Array(gone).fill(EXPIRED), `computed ${computed}`);
      assert(table.slice(gone).every((b) => b >= 0), `computed ${computed}: a block in the window`);
    }
    assertEquals(pool.used, LAYERS * (10 - gone));
  }
  assertEquals(window.released, LAYERS * Math.floor((40 - WINDOW + 1) / BLOCK));
  // Growing again extends the table after its expired entries; releasing frees what is left.
  assert(pool.growAll(1, 44));
  assertEquals(pool.table(1, 0).length, 11);
  assertEquals(pool.release(1), LAYERS * (11 - 8));
  assertEquals(pool.used, 0);
});

Deno.test("sliding window: only windowed layers free their blocks (Gemma's local and global layers)", () => {
  // Layers 0 and 2 local (window 8), layer 1 global: its table keeps every block.
  const windows = [WINDOW, 0, WINDOW];
  const pool = new BlockPool({ blockSize: BLOCK, blocksPerArena: [64], layerArena: [0, 0, 0] });
  const window = new SlidingWindow(pool, windows);
  const req = stage(
    testRequest(1, { ids: Array.from({ length: 41 }, (_, i) => i + 1) }),
    "prefilling",
  );
  assert(pool.growAll(1, 40));
  assertEquals(window.hasExpired(req), false);
  req.computeTo(40);
  window.expire(req);
  const gone = Math.floor((40 - WINDOW + 1) / BLOCK);
  assertEquals(pool.table(1, 0).slice(0, gone), new Array(gone).fill(EXPIRED));
  assertEquals(pool.table(1, 2).slice(0, gone), new Array(gone).fill(EXPIRED));
  assert(pool.table(1, 1).every((b) => b >= 0), "the global layer keeps all its blocks");
  assertEquals(pool.used, 3 * 10 - 2 * gone);
  assertEquals(window.released, 2 * gone);
  assert(window.hasExpired(req));
  assertEquals(pool.release(1), 3 * 10 - 2 * gone);
  // No layer windowed: no window at all; a window for every layer of a shape without layerWindows.
  assertEquals(SlidingWindow.of(pool, { layerWindows: [0, 0, 0] }), null);
  assertEquals(SlidingWindow.of(pool, { slidingWindow: 5 })!.windows, [5, 5, 5]);
});
