// The host KV tier and the engine's copies. HostKv: sizing from the budget, storage allocated
// only when touched, K and V views per run within one chunk. Engine: a request swapped out, its
// device blocks poisoned with NaN, and swapped back into other blocks gives bitwise the logits of
// a run never swapped (copies are exact); a block copied out and refilled by another request in
// the same step keeps the copied data; copy-only steps; refused plans change nothing; close waits
// for copies in flight; the copy counters, in-process and behind a Worker. The swap round trip
// runs with a q8_0 KV cache too: its blocks move as they are, so the logits stay bitwise equal.

import { Engine, type KvCopy, type KvPrefetch, type StepRow } from "../../engine/engine.ts";
import type { KvDtype } from "../../engine/gpu/device.ts";
import { HostKv } from "../../engine/kv/host_kv.ts";
import { WorkerEngine } from "../../engine/worker_engine.ts";
import { BlockPool, type SeqId } from "../../runtime/kv/block_pool.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng, testSeed } from "../helpers/random.ts";

Deno.test("HostKv: blocks from the budget, K and V of a block, nothing allocated until touched", () => {
  assertEquals(HostKv.blocksFor(10_000, 100), 50);
  const host = new HostKv(256, 1 << 30, 4096); // 2M blocks; chunks of 8 blocks (K and V)
  assertEquals([host.blocks, host.chunkBlocks, host.allocatedBytes], [2 << 20, 8, 0]);
  const k = host.k(9, 3), v = host.v(9, 3);
  assertEquals([k.byteLength, v.byteLength, host.allocatedBytes], [768, 768, 4096]);
  k.fill(1);
  assertEquals(v.every((x) => x === 0), true);
  assertEquals(host.k(10, 1)[0], 1);
  assertThrows(() => host.k(6, 3), /not within one chunk/);
  assertThrows(() => host.k(2 << 20, 1), /not within one chunk/);
  assertThrows(() => new HostKv(0, 1024), /bytesPerBlock/);
  assertEquals(new HostKv(256, 0).blocks, 0);
});

Deno.test("HostKv: a last chunk shorter than the others", () => {
  const host = new HostKv(100, 2 * 100 * 10, 2 * 100 * 4); // 10 blocks in chunks of 4
  assertEquals(host.v(8, 2).byteLength, 200);
  assertThrows(() => host.v(9, 2), /not within one chunk/);
  assertEquals(host.allocatedBytes, 2 * 100 * 2);
});

const SPEC = {
  hiddenSize: 64,
  intermediateSize: 136,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  tied: true,
  dtype: "F32",
} as const;

/** SPEC with a head dim q8_0 KV takes (a multiple of 32). */
const SPEC_Q8 = { ...SPEC, headDim: 32 } as const;

/** A tiny engine with a host tier, and the runtime-side bookkeeping a test needs. */
async function open(
  dir: string,
  options: { hostKvMb?: number; kvDtype?: KvDtype } = {},
) {
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await testGpu(),
    kvDtype: options.kvDtype,
    gpuKvMb: 1,
    hostKvMb: options.hostKvMb ?? 1,
    maxSlots: 8,
    maxRows: 16,
    blockSize: 4,
    maxTopLogprobs: 5,
    ringSize: 2,
    skipWarmUp: true,
  });
  const pool = new BlockPool(engine.info);
  const layers = Array.from({ length: engine.info.numLayers }, (_, l) => l);
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  return {
    engine,
    pool,
    /** Points `slot`'s tables at `id`'s blocks on every layer. */
    tables: (slot: number, id: SeqId) =>
      layers.map((layer) => ({ slot, layer, first: 0, blocks: pool.table(id, layer) })),
    /** Prefills `prompt` into `slot` with blocks for one more token (no samples). */
    async prefill(id: SeqId, slot: number, prompt: number[]) {
      assert(pool.growAll(id, prompt.length + 1), "test pool too small");
      const rows = prompt.map((token, pos) => ({ slot, pos, token }));
      await engine.step({
        tables: this.tables(slot, id),
        sampling: [{ slot, params: greedy }],
        rows,
        samples: [],
        wantTopLogprobs: false,
      });
    },
    /** Copies between `id`'s blocks and host blocks `host[layer]`. */
    copies: (direction: "out" | "in", id: SeqId, host: number[][]): KvCopy[] =>
      layers.map((layer) => ({
        direction,
        layer,
        deviceBlocks: pool.table(id, layer),
        hostBlocks: host[layer],
      })),
    /** Overwrites `id`'s device blocks, K and V, on every layer with NaN. */
    poison(id: SeqId) {
      const per = engine.info.kvBlockBytes / 2;
      const nan = new Uint8Array(per).fill(0xff);
      for (const layer of layers) {
        for (const b of pool.table(id, layer)) {
          engine.gpu.device.queue.writeBuffer(engine.kv.kOf(layer), b * per, nan);
          engine.gpu.device.queue.writeBuffer(engine.kv.vOf(layer), b * per, nan);
        }
      }
    },
  };
}

type Harness = Awaited<ReturnType<typeof open>>;

/** One decode row at `pos` in `slot`, sampled; its raw logits as bits. */
async function decode(
  h: Harness,
  slot: number,
  pos: number,
  token: number,
  extra: { copies?: KvCopy[]; tables?: ReturnType<Harness["tables"]> } = {},
): Promise<Uint32Array> {
  const rows: StepRow[] = [{ slot, pos, token }];
  await h.engine.step({
    copies: extra.copies,
    tables: extra.tables ?? [],
    sampling: [],
    rows,
    samples: [{ row: 0 }],
    wantTopLogprobs: false,
  });
  const [logits] = await h.engine.readLogits(1);
  return new Uint32Array(Float32Array.from(logits).buffer);
}

/** Host blocks for `count` blocks per layer: layer l gets from + l*count.. (contiguous). */
function hostRange(layers: number, count: number, from = 0): number[][] {
  return Array.from(
    { length: layers },
    (_, l) => Array.from({ length: count }, (_, i) => from + l * count + i),
  );
}

async function withModel(
  fn: (dir: string, seed: number) => Promise<void>,
  spec: typeof SPEC | typeof SPEC_Q8 = SPEC,
): Promise<void> {
  const seed = testSeed();
  const dir = await Deno.makeTempDir({ prefix: "sluice-host-kv-" });
  try {
    await writeTinyModel(dir, { ...spec, seed });
    await fn(dir, seed);
  } catch (e) {
    throw new Error(`seed ${seed}: ${(e as Error).message}`, { cause: e });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function prompts(seed: number, vocab: number, lengths: number[]): number[][] {
  const next = rng(seed);
  return lengths.map((n) => Array.from({ length: n }, () => Math.floor(next() * vocab)));
}

for (const kvDtype of [undefined, "q8_0"] as const) {
  Deno.test(`swapped out, poisoned, swapped into other blocks: the next logits are bitwise equal (KV ${kvDtype ?? "as the weights"})`, async (t) => {
    await withModel(async (dir, seed) => {
      for (const coalesceCopies of [true, false]) {
        await t.step(coalesceCopies ? "block groups" : "one copy per block", async () => {
          const h = await open(dir, { kvDtype });
          try {
            const { info } = h.engine;
            const [prompt] = prompts(seed, info.vocabSize, [13]);
            const P = prompt.length, next = 7;
            // Reference: request "ref" in slot 0, never swapped.
            await h.prefill("ref", 0, prompt);
            const want = await decode(h, 0, P, next);

            // The same prompt in slot 1, swapped out in a copy-only step.
            await h.prefill("a", 1, prompt);
            const blocks = h.pool.table("a", 0).length; // 4 per layer
            // The engine merges blocks consecutive on both sides into one copy; host blocks two
            // apart make every block a copy of its own.
            const host = hostRange(info.numLayers, blocks, 3)
              .map((l) => coalesceCopies ? l : l.map((b) => 2 * b));
            const before = h.engine.copyStats();
            const records = await h.engine.step({
              copies: h.copies("out", "a", host),
              tables: [],
              sampling: [],
              rows: [],
              samples: [],
              wantTopLogprobs: false,
            });
            assertEquals(records, []);
            const moved = h.engine.copyStats();
            const perBlock = 2 * info.numLayers * blocks; // K and V of every block
            assertEquals(moved.out.copies - before.out.copies, coalesceCopies ? 2 : perBlock);
            assertEquals(
              moved.out.bytes - before.out.bytes,
              info.numLayers * blocks * info.kvBlockBytes,
            );

            // Its device blocks are poisoned and freed; it comes back into other blocks.
            h.poison("a");
            h.pool.release("a");
            assert(h.pool.growAll("hold", P + 1), "pool too small"); // takes a's old blocks
            assert(h.pool.growAll("a", P + 1), "pool too small");
            const got = await decode(h, 1, P, next, {
              copies: h.copies("in", "a", host),
              tables: h.tables(1, "a"),
            });
            const stats = h.engine.copyStats();
            assertEquals(
              stats.in.bytes - moved.in.bytes,
              info.numLayers * blocks * info.kvBlockBytes,
            );
            assertEquals(got, want, "logits after the swap differ from the unswapped run");
          } finally {
            await h.engine.close();
          }
        });
      }
    }, kvDtype === "q8_0" ? SPEC_Q8 : SPEC);
  });
}

Deno.test("a block copied out and refilled in the same step keeps the copied data", async () => {
  await withModel(async (dir, seed) => {
    const h = await open(dir);
    try {
      const { info } = h.engine;
      const [pa, pc] = prompts(seed, info.vocabSize, [11, 14]);
      // References: each request alone, never swapped.
      await h.prefill("refA", 2, pa);
      const wantA = await decode(h, 2, pa.length, 5);
      await h.prefill("refC", 3, pc);
      const wantC = await decode(h, 3, pc.length, 9);

      await h.prefill("a", 0, pa);
      await h.prefill("c", 1, pc);
      const n = h.pool.table("a", 0).length; // 3 blocks; c has 4
      const hostC = hostRange(info.numLayers, 4, 0);
      const hostA = hostRange(info.numLayers, n, 100);
      await h.engine.step({
        copies: h.copies("out", "c", hostC),
        tables: [],
        sampling: [],
        rows: [],
        samples: [],
        wantTopLogprobs: false,
      });

      // One step: a goes out of its blocks while c comes into them (a has one block fewer than
      // c, so c's last block is one of its own old blocks), and c decodes there.
      const outA = h.copies("out", "a", hostA);
      const cOld = [0, 1].map((l) => h.pool.table("c", l));
      const cNew = [0, 1].map((l) => [...h.pool.table("a", l), cOld[l][3]]);
      h.poison("c");
      const inC: KvCopy[] = [0, 1].map((layer) => ({
        direction: "in",
        layer,
        deviceBlocks: cNew[layer],
        hostBlocks: hostC[layer],
      }));
      const tablesC = [0, 1].map((layer) => ({ slot: 1, layer, first: 0, blocks: cNew[layer] }));
      const gotC = await decode(h, 1, pc.length, 9, { copies: [...outA, ...inC], tables: tablesC });
      assertEquals(gotC, wantC, "the request copied in differs");

      // a comes back into c's other old blocks, which were poisoned.
      const aNew = [0, 1].map((l) => cOld[l].slice(0, n));
      const inA: KvCopy[] = [0, 1].map((layer) => ({
        direction: "in",
        layer,
        deviceBlocks: aNew[layer],
        hostBlocks: hostA[layer],
      }));
      const tablesA = [0, 1].map((layer) => ({ slot: 0, layer, first: 0, blocks: aNew[layer] }));
      const gotA = await decode(h, 0, pa.length, 5, { copies: inA, tables: tablesA });
      assertEquals(gotA, wantA, "the request copied out in the same step differs");
    } finally {
      await h.engine.close();
    }
  });
});

Deno.test("refused steps change nothing; reading a host block still being filled is refused", async () => {
  await withModel(async (dir) => {
    const h = await open(dir);
    try {
      const { engine } = h;
      const empty = { tables: [], sampling: [], rows: [], samples: [], wantTopLogprobs: false };
      const copy = (over: Partial<KvCopy>): KvCopy => ({
        direction: "out",
        layer: 0,
        deviceBlocks: [0, 1],
        hostBlocks: [0, 1],
        ...over,
      });
      const oneRow = { ...empty, rows: [{ slot: 0, pos: 0, token: 1 }] };
      const prefetch = (over: Partial<KvPrefetch>): KvPrefetch => ({
        layer: 1,
        deviceBlocks: [6, 7],
        hostBlocks: [0, 1],
        ...over,
      });
      const bad: [object, RegExp][] = [
        [{ ...empty }, /step has 0 rows/],
        [{ ...empty, copies: [copy({ layer: 2 })] }, /layer 2 is out of range/],
        [{ ...empty, copies: [copy({ hostBlocks: [0] })] }, /2 device blocks but 1 host/],
        [{ ...empty, copies: [copy({ hostBlocks: [0, engine.info.hostBlocks] })] }, /host block/],
        [{ ...empty, copies: [copy({ deviceBlocks: [0, 1e6] })] }, /device block 1000000/],
        [{ ...empty, copies: [copy({})], samples: [{ row: 0 }] }, /no rows cannot sample/],
        [
          { ...empty, copies: [copy({})], tables: [{ slot: 99, layer: 0, first: 0, blocks: [] }] },
          /slot 99/,
        ],
        [
          {
            ...empty,
            copies: [copy({})],
            rows: new Array(17).fill({ slot: 0, pos: 0, token: 1 }),
          },
          /step has 17 rows/,
        ],
        [
          { ...empty, copies: [copy({})], prefetch: [prefetch({ hostBlocks: [2, 3] })] },
          /no rows cannot prefetch/,
        ],
        [{ ...oneRow, prefetch: [prefetch({ layer: 5 })] }, /layer 5 is out of range/],
        [{ ...oneRow, prefetch: [prefetch({ deviceBlocks: [7, 7] })] }, /written twice/],
        [
          { ...oneRow, copies: [copy({})], prefetch: [prefetch({})] },
          /host block 0 is still being filled/,
        ],
      ];
      for (const [plan, message] of bad) {
        assertThrows(() => engine.step(plan as never), message);
      }
      assertEquals(engine.copyStats().steps, 0, "a refused step executed copies");

      // An "out" copy in flight: its host blocks cannot be read yet, only written again.
      const landed = engine.step({ ...empty, copies: [copy({})] });
      assertThrows(
        () => engine.step({ ...empty, copies: [copy({ direction: "in", deviceBlocks: [4, 5] })] }),
        /host block 0 is still being filled/,
      );
      const again = engine.step({ ...empty, copies: [copy({ deviceBlocks: [2, 3] })] });
      await Promise.all([landed, again]);
      await engine.step({ ...empty, copies: [copy({ direction: "in", deviceBlocks: [4, 5] })] });
      assertEquals(engine.copyStats(), {
        steps: 3,
        out: { copies: 4, blocks: 4, bytes: 4 * engine.info.kvBlockBytes },
        in: { copies: 2, blocks: 2, bytes: 2 * engine.info.kvBlockBytes },
        prefetch: { copies: 0, blocks: 0, bytes: 0 },
      });
    } finally {
      await h.engine.close();
    }
  });
});

Deno.test("no host tier: hostBlocks 0 and copies refused; close waits for copies in flight", async () => {
  await withModel(async (dir) => {
    const none = await open(dir, { hostKvMb: 0 });
    const empty = { tables: [], sampling: [], rows: [], samples: [], wantTopLogprobs: false };
    const copy: KvCopy = { direction: "out", layer: 0, deviceBlocks: [0], hostBlocks: [0] };
    try {
      assertEquals(none.engine.info.hostBlocks, 0);
      assertThrows(() => none.engine.step({ ...empty, copies: [copy] }), /no host KV tier/);
    } finally {
      await none.engine.close();
    }
    const h = await open(dir);
    assertEquals(h.engine.info.hostBlocks, Math.floor((1 << 20) / h.engine.info.kvBlockBytes));
    const landed = h.engine.step({ ...empty, copies: [copy] });
    await h.engine.close();
    assertEquals(await landed, []);
  });
});

Deno.test("behind a Worker: copy-only steps run and the counters come back with the records", async () => {
  await withModel(async (dir) => {
    const engine = await WorkerEngine.load({
      modelDir: dir,
      gpuKvMb: 1,
      hostKvMb: 1,
      maxSlots: 4,
      maxRows: 8,
      blockSize: 4,
      skipWarmUp: true,
    });
    try {
      assert(engine.info.hostBlocks > 0);
      const empty = { tables: [], sampling: [], rows: [], samples: [], wantTopLogprobs: false };
      const copy = (direction: "out" | "in"): KvCopy => ({
        direction,
        layer: 1,
        deviceBlocks: [4, 5, 6],
        hostBlocks: [10, 11, 12],
      });
      assertEquals(await engine.step({ ...empty, copies: [copy("out")] }), []);
      assertEquals(await engine.step({ ...empty, copies: [copy("in")] }), []);
      const bytes = 3 * engine.info.kvBlockBytes;
      assertEquals(engine.copyStats(), {
        steps: 2,
        out: { copies: 2, blocks: 3, bytes },
        in: { copies: 2, blocks: 3, bytes },
        prefetch: { copies: 0, blocks: 0, bytes: 0 },
      });
    } finally {
      await engine.close();
    }
  });
});
