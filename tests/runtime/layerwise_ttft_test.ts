// LayerKV's headline on the fake engine, in fake time: under long-context queueing a queued prefill
// starts sooner with layer-wise prefill (every prefill given its layer split by the cost model,
// the free blocks and the Eq. 5 forecast) than when it must wait for a whole request's blocks.
// Steps take what the engine's cost model says they take, so the split sees the clock it runs on.

import { PROFILE_WEIGHT, sumsOf } from "../../engine/kv/cost_model.ts";
import type { CostModel } from "../../engine/engine.ts";
import { FakeEngine, toyGeneration } from "../../sim/fake_engine.ts";
import { assert, assertEquals, useFakeTime } from "../helpers/testing.ts";
import { Runtime } from "../../runtime/service.ts";
import type { PolicyName } from "../../runtime/policy/index.ts";

const LAYERS = 4;
const BLOCK_BYTES = 1024;
/** Per layer: 2.5 ms + 0.5 ms a row; a copy out: 0.1 ms + 1 µs a byte (about 1 ms a block). */
const LAYER = { fixedMs: 2.5, perUnitMs: 0.5 };

function costs(): CostModel {
  const points = [1, 8].map((rows) =>
    [rows, LAYER.fixedMs + LAYER.perUnitMs * rows] as [
      number,
      number,
    ]
  );
  const flat = { fixedMs: 0, perUnitMs: 0 };
  return {
    numLayers: LAYERS,
    roundTripMs: 0,
    layer: LAYER,
    sample: flat,
    hostToDevice: { fixedMs: 0.1, perUnitMs: 0.001 },
    deviceToHost: { fixedMs: 0.1, perUnitMs: 0.001 },
    overlap: 0,
    layerFit: sumsOf(points, PROFILE_WEIGHT),
  };
}

const REGION = 28;
const VOCAB = 50;
const ids = (n: number, from: number) => Array.from({ length: n }, (_, i) => (from + 7 * i) % 50);

/**
 * One request with a 48-token prompt decoding 40 tokens, then three 112-token prompts queued
 * behind it (each 28 blocks a layer: 112 blocks, more than is free beside it). Returns each
 * request's TTFT (fake ms), the run's stats, and checks every request's tokens.
 */
async function longContextQueue(policy: PolicyName, layerwisePrefill: boolean) {
  const clock = useFakeTime(0);
  try {
    const engine: FakeEngine = new FakeEngine(
      {
        numLayers: LAYERS,
        blockSize: 4,
        blocksPerArena: [128 + REGION],
        maxSlots: 4,
        maxRows: 8,
        maxBlocksPerSeq: 40,
        vocabSize: VOCAB,
        hostBlocks: 1024,
        ringSize: 1,
        costModel: costs(),
        kvBlockBytes: BLOCK_BYTES,
      },
      () =>
        new Promise((r) =>
          setTimeout(r, LAYERS * (LAYER.fixedMs + LAYER.perUnitMs * engine.rowsPerStep.at(-1)!))
        ),
    );
    const rt = new Runtime(engine, {
      policy,
      layerwisePrefill,
      prefetchBlocks: layerwisePrefill ? REGION : undefined,
      maxQueue: 10,
      maxTokensLimit: 10_000,
      eosIds: [],
    });
    const prompts = [{ prompt: ids(48, 1), maxTokens: 40, at: 0 }];
    for (let i = 0; i < 3; i++) prompts.push({ prompt: ids(112, 3 + i), maxTokens: 4, at: 100 });
    const ttft: number[] = [];
    const runs: Promise<number[]>[] = [];
    for (const [i, p] of prompts.entries()) {
      if (p.at > Date.now()) await clock.tickAsync(p.at - Date.now());
      const submitted = Date.now();
      const h = rt.submit({
        ids: p.prompt,
        maxTokens: p.maxTokens,
        sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 },
      });
      runs.push((async () => {
        const got: number[] = [];
        for await (const ev of h.tokens) {
          if (got.length === 0) ttft[i] = Date.now() - submitted;
          got.push(ev.id);
        }
        return got;
      })());
    }
    for (let t = 0; t < 200 && rt.openRequests > 0; t++) await clock.tickAsync(100);
    const got = await Promise.all(runs);
    prompts.forEach((p, i) => {
      assertEquals(got[i], toyGeneration(p.prompt, p.maxTokens, 0, VOCAB), `request ${i}`);
    });
    await clock.tickAsync(100);
    const stats = rt.stats();
    await rt.close();
    return { ttft, stats };
  } finally {
    clock.uninstall();
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

for (const policy of ["slo", "tokenflow"] as const) {
  Deno.test(`layer-wise prefill (${policy}): queued long prompts start sooner, every admission is split, no block is left on either tier`, async () => {
    const off = await longContextQueue(policy, false);
    const on = await longContextQueue(policy, true);
    const long = (r: { ttft: number[] }) => r.ttft.slice(1);
    // Off, the first long prompt waits for the short request's blocks, the next ones for its.
    assert(
      mean(long(on)) < mean(long(off)),
      `mean TTFT of the long prompts: on ${mean(long(on))} ms, off ${mean(long(off))} ms`,
    );
    assert(long(on)[0] < long(off)[0], `first long prompt: on ${long(on)[0]}, off ${long(off)[0]}`);
    // Every admission was given a split (each request once, and again after each preemption),
    // and some kept layers on the host.
    assertEquals(on.stats.prefillSplits, 4 + on.stats.preemptions);
    assert(on.stats.layerwiseAdmissions! > 0, "no prefill offloaded a layer");
    // Copied out in the steps that wrote them, right after their layers (the fake engine copies
    // after-layer copies after the layer's rows are written: placed before, they would miss
    // this step's positions and a later step would find no KV there).
    assert(on.stats.offload!.blocksOutAfterLayer > 0, "no block was copied out after its layer");
    for (const { stats } of [off, on]) {
      assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
      assertEquals(stats.running + stats.waiting + stats.paused, 0);
    }
  });
}
