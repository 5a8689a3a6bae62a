// Head-of-line prefill (issue 31): a step's prefill rows are shared (runtime/prefill_share.ts), so
// a short prompt that arrives while a long one prefills gets its first token within a few steps,
// under the server's default options and fcfs-vllm's alike, with the tokens its prompt alone
// determines; and the rule itself on small cases.

import { prefillShares } from "../../runtime/prefill_share.ts";
import { Runtime } from "../../runtime/service.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { FakeEngine, toyGeneration } from "../../sim/fake_engine.ts";
import { assert, assertEquals, useFakeTime } from "../helpers/testing.ts";
import { DEFAULT, FCFS_VLLM } from "../sim/matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

Deno.test("prefill shares: a newcomer shorter than what the oldest has left shares the rows evenly, and leaves what it does not need", () => {
  assertEquals(prefillShares([1700, 60], 128), [68, 60]);
  assertEquals(prefillShares([1700, 200], 128), [64, 64]);
  // Odd rows go to the oldest.
  assertEquals(prefillShares([1700, 200], 127), [64, 63]);
  assertEquals(prefillShares([1700, 200, 30, 2], 128), [48, 48, 30, 2]);
});

Deno.test("prefill shares: prefills with as many rows left as the oldest or more wait for rows nobody else needs, oldest first", () => {
  assertEquals(prefillShares([1800, 1800], 128), [128, 0]);
  assertEquals(prefillShares([1700, 1800, 60], 128), [68, 0, 60]);
  assertEquals(prefillShares([100, 1800, 60, 500], 128), [68, 0, 60, 0]);
  assertEquals(prefillShares([40, 1800, 60, 500], 128), [40, 88, 0, 0]);
});

Deno.test("prefill shares: one prefill, or none, takes what it wants of the room", () => {
  assertEquals(prefillShares([1800], 128), [128]);
  assertEquals(prefillShares([60], 128), [60]);
  assertEquals(prefillShares([], 128), []);
  assertEquals(prefillShares([60, 20], 0), [0, 0]);
  // A constrained request waiting for its mask wants nothing.
  assertEquals(prefillShares([0, 60], 128), [0, 60]);
});

const VOCAB = 512;
const ROWS = 128;
const LONG = 1800;
const SHORT = 60;
const ids = (n: number, from: number) =>
  Array.from({ length: n }, (_, i) => 1 + (from + 7 * i) % 500);

/**
 * An 1,800-token prompt, then a 60-token one submitted after the long one's third step; each step
 * takes 8 ms plus 3 ms a row, two steps in flight, as the server runs them. Returns the steps the
 * engine ran between the newcomer's submission and its first token, and checks both requests'
 * tokens.
 */
async function newcomerBesideLongPrefill(config: SimConfig) {
  const clock = useFakeTime(0);
  try {
    const engine: FakeEngine = new FakeEngine(
      {
        numLayers: 4,
        blockSize: 16,
        blocksPerArena: [4 * 256],
        maxSlots: 8,
        maxRows: ROWS,
        maxBlocksPerSeq: 128,
        vocabSize: VOCAB,
        ringSize: 2,
        hostBlocks: config.hostBlocks,
        // The default's recompute-or-reload choice reads it: what the steps below take.
        costModel: costModelWithLayer(2, 0.75, { roundTripMs: 0 }),
        kvBlockBytes: 4096,
      },
      () => new Promise((r) => setTimeout(r, 8 + 3 * engine.rowsPerStep.at(-1)!)),
    );
    const rt = new Runtime(engine, {
      ...config.options,
      maxQueue: 10,
      maxTokensLimit: 4096,
      eosIds: [],
    });
    const sampling = { temperature: 0, topP: 1, topK: 0, seed: 0 };
    const prompts = [ids(LONG, 3), ids(SHORT, 5)];
    const run = (prompt: number[], onFirst = () => {}) => {
      const h = rt.submit({ ids: prompt, maxTokens: 8, sampling });
      return (async () => {
        const got: number[] = [];
        for await (const ev of h.tokens) {
          if (got.length === 0) onFirst();
          got.push(ev.id);
        }
        return got;
      })();
    };
    const long = run(prompts[0]);
    while (engine.steps < 3) await clock.tickAsync(1);
    let firstAt = -1;
    const submittedAt = engine.steps;
    const short = run(prompts[1], () => firstAt = engine.steps);
    for (let t = 0; t < 1000 && rt.openRequests > 0; t++) await clock.tickAsync(50);
    const got = await Promise.all([long, short]);
    prompts.forEach((p, i) => assertEquals(got[i], toyGeneration(p, 8, 0, VOCAB), `request ${i}`));
    await rt.close();
    return { steps: firstAt - submittedAt, longSteps: Math.ceil(LONG / ROWS) };
  } finally {
    clock.uninstall();
  }
}

for (const config of [DEFAULT, FCFS_VLLM]) {
  Deno.test(`head-of-line prefill (${config.name}): a 60-token prompt arriving while an 1,800-token prompt prefills gets its first token within 3 steps, not after the long prompt's chunks`, async () => {
    const { steps, longSteps } = await newcomerBesideLongPrefill(config);
    // Its chunk rides in the next step built (one step may be in flight ahead of it), and its
    // token is read back once that step is done.
    assert(steps >= 1 && steps <= 3, `first token ${steps} steps after it was submitted`);
    assert(steps < longSteps - 3, `the long prompt prefills in ${longSteps} steps`);
  });
}
