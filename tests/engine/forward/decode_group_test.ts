// Multi-step decode through Engine.step on a generated model: a decode group (StepPlan.group) gives
// exactly the ids the same rows give one step at a time, greedy and seeded, across groups and with
// rows of different lengths; a row that takes its budget or samples a stop id inside the group
// stops there and writes no KV past its end (its next table entry is another slot's live block,
// and the whole KV cache must be bitwise what single steps leave); malformed groups are refused.

import {
  Engine,
  type SampleRecord,
  type SamplingParams,
  type StepEngine,
  type StepPlan,
} from "../../../engine/engine.ts";
import { WorkerEngine } from "../../../engine/worker_engine.ts";
import { readBack } from "../../../engine/gpu/buffers.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { rng } from "../../helpers/random.ts";

const PROMPTS = [5, 9, 14];
const BLOCK = 4;
/** Each slot's own blocks: slot s holds 8s..8s+7. */
const ownBlocks = (slot: number) => Array.from({ length: 8 }, (_, i) => 8 * slot + i);

interface Run {
  /** Per slot, most samples it may take after its prefill (default: all). */
  budgets?: number[];
  /** Per slot, ids that end it (their sample is its last). */
  stopIds?: number[][];
  /** Group sizes; [] or 1s: one step at a time. */
  groups: number[];
  /** Table entries that point elsewhere: [slot, entry, block]. */
  aliases?: [number, number, number][];
  sampling: (slot: number) => SamplingParams;
  /** Ask for top logprobs, and keep every record (default: ids only). */
  logprobs?: boolean;
}

/** Prefills the three prompts, then decodes; returns each slot's ids after its prefill's. */
async function decode(engine: StepEngine, prompts: number[][], run: Run): Promise<number[][]> {
  return (await decodeRecords(engine, prompts, run)).map((recs) => recs.map((r) => r.id));
}

/** As decode, with the whole records. */
async function decodeRecords(
  engine: StepEngine,
  prompts: number[][],
  run: Run,
): Promise<SampleRecord[][]> {
  const { numLayers } = engine.info;
  const tables = prompts.flatMap((_, slot) => {
    const blocks = ownBlocks(slot);
    for (const [s, entry, block] of run.aliases ?? []) if (s === slot) blocks[entry] = block;
    return Array.from({ length: numLayers }, (_, layer) => ({ slot, layer, first: 0, blocks }));
  });
  const rows = prompts.flatMap((p, slot) => p.map((token, pos) => ({ slot, pos, token })));
  let last = -1;
  const samples = prompts.map((p) => ({ row: last += p.length }));
  const first = await engine.step({
    tables,
    sampling: prompts.map((_, slot) => ({ slot, params: run.sampling(slot) })),
    rows,
    samples,
    wantTopLogprobs: run.logprobs ?? false,
  });
  const out = prompts.map((_, s) => [first[s]]);
  const total = run.groups.reduce((a, b) => a + b, 0);
  const budget = (s: number) => run.budgets?.[s] ?? total;
  const ended = (s: number) =>
    out[s].length - 1 >= budget(s) || (run.stopIds?.[s] ?? []).includes(out[s].at(-1)!.id);
  for (const k of run.groups) {
    const live = prompts.map((_, s) => s).filter((s) => !ended(s));
    if (live.length === 0) break;
    const plan: StepPlan = {
      tables: [],
      sampling: [],
      rows: live.map((s) => ({ slot: s, pos: prompts[s].length + out[s].length - 1, token: null })),
      samples: live.map((_, row) => ({ row })),
      wantTopLogprobs: run.logprobs ?? false,
      ...(k > 1
        ? {
          group: {
            steps: k,
            budgets: live.map((s) => budget(s) - (out[s].length - 1)),
            stopIds: live.map((s) => run.stopIds?.[s] ?? []),
          },
        }
        : {}),
    };
    const records = await engine.step(plan);
    assertEquals(records.length, k * live.length);
    for (let i = 0; i < k; i++) {
      live.forEach((s, j) => {
        if (!ended(s)) out[s].push(records[i * live.length + j]);
      });
    }
  }
  return out.map((recs) => recs.slice(1));
}

/** The device KV cache, K and V of every arena, as bytes. */
async function kvBytes(engine: Engine): Promise<Uint8Array[]> {
  const buffers = [...engine.kv.k, ...engine.kv.v];
  return await Promise.all(buffers.map(async (b) => new Uint8Array(await readBack(engine.gpu, b))));
}

const OPTIONS = {
  skipWarmUp: true,
  maxSlots: 4,
  maxRows: 32,
  blockSize: BLOCK,
  gpuKvMb: 1,
  maxDecodeSteps: 8,
};

async function withEngine(
  fn: (engine: Engine, prompts: number[][], dir: string) => Promise<void> | void,
) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-group-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 136,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "BF16",
      vocabSize: 300,
      seed: 5,
    });
    const engine = await Engine.load({ modelDir: dir, gpu: await testGpu(), ...OPTIONS });
    try {
      const next = rng(42);
      const prompts = PROMPTS.map((n) =>
        Array.from({ length: n }, () => Math.floor(next() * engine.info.vocabSize))
      );
      await fn(engine, prompts, dir);
    } finally {
      await engine.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const greedy = () => ({ temperature: 0, topK: 0, topP: 1, seed: 0 });
const seeded = (slot: number) => ({ temperature: 1.3, topK: 0, topP: 1, seed: 100 + slot });

Deno.test("engine: decode groups give the ids single steps give, greedy and seeded, across groups", async () => {
  await withEngine(async (engine, prompts) => {
    for (const sampling of [greedy, seeded]) {
      const single = await decode(engine, prompts, { groups: new Array(11).fill(1), sampling });
      const grouped = await decode(engine, prompts, { groups: [4, 7], sampling });
      const eight = await decode(engine, prompts, { groups: [8, 1, 2], sampling });
      assertEquals(grouped, single);
      assertEquals(eight, single);
      assert(single.every((ids) => ids.length === 11));
    }
    // Seeded draws are not greedy ones (else the second case would test nothing new).
    const g = await decode(engine, prompts, { groups: [8, 3], sampling: greedy });
    const s = await decode(engine, prompts, { groups: [8, 3], sampling: seeded });
    assert(JSON.stringify(g) !== JSON.stringify(s), "seeded sampling drew the greedy ids");
  });
});

Deno.test("engine: decode groups run the same behind the engine Worker (serve's)", async () => {
  await withEngine(async (engine, prompts, dir) => {
    const run = { sampling: seeded, groups: [5, 3] };
    const here = await decode(engine, prompts, run);
    const worker = await WorkerEngine.load({ modelDir: dir, ...OPTIONS });
    try {
      assertEquals(worker.info.maxDecodeSteps, 8);
      assertEquals(await decode(worker, prompts, run), here);
    } finally {
      await worker.close();
    }
  });
});

Deno.test("engine: a decode group's top logprobs are those of single steps, step by step", async () => {
  await withEngine(async (engine, prompts) => {
    const run = { sampling: seeded, logprobs: true };
    const single = await decodeRecords(engine, prompts, { ...run, groups: new Array(6).fill(1) });
    const grouped = await decodeRecords(engine, prompts, { ...run, groups: [6] });
    assertEquals(grouped, single);
    assert(single.every((recs) => recs.every((r) => r.top.length === engine.info.maxTopLogprobs)));
  });
});

Deno.test("engine: a row that takes its budget or samples a stop id inside a group stops there, writing no KV past its end", async () => {
  await withEngine(async (engine, prompts) => {
    const free = await decode(engine, prompts, { groups: new Array(7).fill(1), sampling: seeded });
    // Slot 1 (prompt 9, decoding from position 9) stops on its third id, which its row sampled
    // at position 11: a row that went on would write position 12, the first of table entry 3.
    const stop = free[1][2];
    assert(!free[1].slice(0, 2).includes(stop), `id ${stop} comes earlier: pick another seed`);
    // Slot 0 (prompt 5) may take 3 ids: its rows are at positions 5..7, and position 8 would be
    // table entry 2. Both entries are slot 2's live blocks (its positions 0..7).
    const run: Run = {
      budgets: [3, 7, 7],
      stopIds: [[], [stop], []],
      aliases: [[0, 2, 16], [1, 3, 17]],
      groups: [7],
      sampling: seeded,
    };
    const single = await decode(engine, prompts, { ...run, groups: new Array(7).fill(1) });
    const singleKv = await kvBytes(engine);
    const grouped = await decode(engine, prompts, run);
    assertEquals(single, [free[0].slice(0, 3), free[1].slice(0, 3), free[2]]);
    assertEquals(grouped, single);
    // A finished row rewrites its last position with the same values and nothing else.
    assertEquals(await kvBytes(engine), singleKv);
    // The same group without budgets or stops does corrupt slot 2: the aliases catch a row that
    // writes past its end.
    const unbounded = await decode(engine, prompts, {
      ...run,
      budgets: [7, 7, 7],
      stopIds: [[], [], []],
    });
    assert(
      JSON.stringify(unbounded[2]) !== JSON.stringify(free[2]),
      "rows writing into slot 2's blocks left its ids unchanged: the test cannot see a leak",
    );
  });
});

Deno.test("engine: malformed decode groups are refused before anything runs", async () => {
  await withEngine((engine) => {
    const base: StepPlan = {
      tables: [],
      sampling: [],
      rows: [{ slot: 0, pos: 0, token: null }, { slot: 1, pos: 0, token: null }],
      samples: [{ row: 0 }, { row: 1 }],
      wantTopLogprobs: false,
      group: { steps: 2, budgets: [2, 2], stopIds: [[], []] },
    };
    const refused = (patch: Partial<StepPlan>, message: RegExp) =>
      assertThrows(() => engine.step({ ...base, ...patch }), Error, message.source);
    refused({ group: { ...base.group!, steps: 9 } }, /9 steps \(max 8\)/);
    refused({ samples: [{ row: 0 }] }, /every row of a decode group must be sampled/);
    refused({ rows: [{ slot: 0, pos: 0, token: 3 }, base.rows[1]] }, /token null/);
    refused({ rows: [base.rows[0], { slot: 0, pos: 1, token: null }] }, /two rows of one slot/);
    refused({ group: { ...base.group!, budgets: [2] } }, /a budget and stop ids per sample/);
    refused({ group: { ...base.group!, budgets: [0, 2] } }, /budgets must be integers >= 1/);
    refused({ copies: [{ direction: "out", layer: 0, deviceBlocks: [0], hostBlocks: [0] }] }, /./);
  });
});
