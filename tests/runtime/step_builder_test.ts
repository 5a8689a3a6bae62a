// StepBuilder (runtime/step_builder.ts): a seated request's whole table rows (no block where an
// entry is dropped or offloaded) and sampling parameters, a grown table's new entries, rows and
// samples; a step that would carry nothing is not built and its table writes wait for the next.

import { NOT_RESIDENT } from "../../engine/kv/pool_shape.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { StepBuilder } from "../../runtime/step_builder.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

const NOTHING = {
  moves: { copies: [], landings: [] },
  offload: { prefetch: [], tables: [] },
};

Deno.test("step builder: table writes for a seated and a grown request, then its rows", () => {
  const pool = new BlockPool({ blocksPerArena: [16], layerArena: [0, 0], blockSize: 2 });
  const builder = new StepBuilder(pool, { maxRows: 4, maxSlots: 4, maxBlocksPerSeq: 4 });
  const req = testRequest(1, { ids: [5, 6, 7], topLogprobs: 2 });
  pool.growAll(req.id, 4);
  pool.dropLeading(req.id, 1);
  req.admit(2, 0, 0);
  builder.seated(req);
  builder.begin();
  assertEquals(builder.finish(NOTHING.moves, NOTHING.offload), null, "nothing to run yet");
  // The dropped block is refilled at admission (the seated rows are written after it); then the
  // table grows by one block a layer.
  pool.growAll(req.id, 4);
  const added = pool.growAll(req.id, 6)!;
  builder.grew(req, added);
  builder.begin();
  assertEquals(builder.room, 4);
  assertEquals(builder.row(req, 0, 5), false);
  assertEquals(builder.row(req, 1, 6), false);
  builder.sample(req);
  assert(builder.inStep.has(req));
  const offload = { prefetch: [], tables: [{ slot: 2, layer: 1, first: 0, blocks: [9] }] };
  const step = builder.finish(NOTHING.moves, offload)!;
  const [l0, l1] = [0, 1].map((layer) => pool.table(req.id, layer));
  assertEquals(step.plan.tables.slice(0, 2), [
    { slot: 2, layer: 0, first: 0, blocks: [NOT_RESIDENT, l0[1], NOT_RESIDENT, NOT_RESIDENT] },
    { slot: 2, layer: 1, first: 0, blocks: [NOT_RESIDENT, l1[1], NOT_RESIDENT, NOT_RESIDENT] },
  ]);
  assertEquals(step.plan.tables.slice(2), [
    { slot: 2, layer: 0, first: 2, blocks: added[0] },
    { slot: 2, layer: 1, first: 2, blocks: added[1] },
    offload.tables[0], // prefetch entries last
  ]);
  assertEquals(step.plan.sampling, [{ slot: 2, params: req.spec.sampling }]);
  assertEquals(step.plan.rows, [{ slot: 2, pos: 0, token: 5 }, { slot: 2, pos: 1, token: 6 }]);
  assertEquals([step.plan.samples, step.owners, step.plan.wantTopLogprobs], [
    [{ row: 1 }],
    [req],
    true,
  ]);
  assertEquals([req.issued, builder.room], [1, 2]);
  // Taken: the next step starts with no table writes; a row computed before is a recompute.
  builder.begin();
  assertEquals(builder.row(req, 1, 6), true);
  assertEquals(builder.finish(NOTHING.moves, NOTHING.offload)!.plan.tables, []);
});

Deno.test("step builder: a seated request with penalties seeds its slot's counts with its prompt and generated ids", () => {
  const pool = new BlockPool({ blocksPerArena: [16], layerArena: [0], blockSize: 2 });
  const builder = new StepBuilder(pool, { maxRows: 4, maxSlots: 4, maxBlocksPerSeq: 4 });
  const sampling = { temperature: 0, topK: 0, topP: 1, seed: 0, presencePenalty: 0.5 };
  const plain = testRequest(1, { ids: [5, 6] });
  const penalized = testRequest(2, { ids: [7, 8, 9], sampling });
  penalized.issueSample();
  penalized.accept({ id: 3, logprob: 0, top: [] }); // generated before a preemption
  for (const [req, slot] of [[plain, 0], [penalized, 1]] as const) {
    pool.growAll(req.id, 2);
    req.admit(slot, slot, 0);
    builder.seated(req);
  }
  builder.begin();
  builder.row(penalized, 0, 7);
  const { plan } = builder.finish(NOTHING.moves, NOTHING.offload)!;
  assertEquals(plan.penaltySeeds, [{ slot: 1, prompt: [7, 8, 9], generated: [3] }]);
  builder.begin();
  builder.row(penalized, 1, 8);
  assertEquals(builder.finish(NOTHING.moves, NOTHING.offload)!.plan.penaltySeeds, undefined);
});

Deno.test("step builder: a step with landings but no rows or copies is not built; the next step carries them", () => {
  const pool = new BlockPool({ blocksPerArena: [16], layerArena: [0], blockSize: 2 });
  const builder = new StepBuilder(pool, { maxRows: 4, maxSlots: 4, maxBlocksPerSeq: 4 });
  const req = testRequest(1, { ids: [5, 6] });
  pool.growAll(req.id, 2);
  req.admit(0, 0, 0);
  builder.seated(req);
  const first = { landed: () => {} }, second = { landed: () => {} };
  builder.begin();
  // Landings alone would reach the engine as a step of no rows, which it refuses.
  assertEquals(builder.finish({ copies: [], landings: [first] }, NOTHING.offload), null);
  builder.begin();
  builder.row(req, 0, 5);
  const step = builder.finish({ copies: [], landings: [second] }, NOTHING.offload)!;
  assertEquals(step.landings, [first, second]);
  builder.begin();
  builder.row(req, 1, 6);
  assertEquals(builder.finish(NOTHING.moves, NOTHING.offload)!.landings, [], "carried once");
});
