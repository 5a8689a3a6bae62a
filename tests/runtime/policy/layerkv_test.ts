// `--sched layerkv` (LayerKV's Algorithm 1, runtime/policy/layerkv.ts) on the fake engine, with a
// fake cost model and the fake clock: a step takes 10 ms plus 1 ms per token row, so a prefill's
// rows add 1 ms each to the steps the decodes share with it (Eq. 2's T_prefill), and a decode
// alone takes 11 ms (the current TPOT). A request decoding alone since its first token has, after
// N_past more tokens, T_allow = T_tpot·(N_past + 1) − 11·(N_past + 1) (Eq. 1 with N_future = 1).

import { FakeEngine, type FakeEngineShape, toyGeneration } from "../../../sim/fake_engine.ts";
import { assert, assertEquals, useFakeTime } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";
import type { CostModel, StepPlan } from "../../../engine/engine.ts";
import { predictStepMs, sumsOf } from "../../../engine/kv/cost_model.ts";
import type { Request, RequestSlo } from "../../../runtime/request/request.ts";
import { Scheduler } from "../../../runtime/scheduler.ts";
import { layerkvPolicy } from "../../../runtime/policy/layerkv.ts";
import { sloPolicy } from "../../../runtime/policy/slo.ts";
import type { SchedulingPolicy } from "../../../runtime/policy/policy.ts";

const line = (fixedMs: number, perUnitMs: number) => ({ fixedMs, perUnitMs });

/** 10 ms a step plus 1 ms per token row; sampling and copies free. */
const COSTS: CostModel = {
  numLayers: 1,
  roundTripMs: 0,
  layer: line(10, 1),
  sample: line(0, 0),
  hostToDevice: line(0, 0),
  deviceToHost: line(0, 0),
  overlap: 0,
  layerFit: sumsOf([[1, 11], [100, 110]], 8),
};

const SHAPE: FakeEngineShape = {
  numLayers: 2,
  blockSize: 4,
  blocksPerArena: [256],
  maxSlots: 4,
  maxRows: 16,
  maxBlocksPerSeq: 64,
  vocabSize: 50,
};

/** A scheduler over a fake engine in fake time: each step moves the clock by its predicted ms. */
class Bench {
  readonly scheduler: Scheduler;
  private readonly engine = new FakeEngine(SHAPE);
  private nextId = 1;

  constructor(
    policy: SchedulingPolicy,
    private readonly clock: ReturnType<typeof useFakeTime>,
    costs: CostModel | null = COSTS,
  ) {
    this.scheduler = new Scheduler({
      kv: { shape: { ...this.engine.info, hostBlocks: 0 } },
      limits: this.engine.info,
      policy,
      time: { now: () => performance.now(), costModel: () => costs ?? undefined },
    });
  }

  submit(length: number, maxTokens: number, slo: RequestSlo = {}): Request {
    const ids = Array.from({ length }, (_, i) => (i * 7 + this.nextId) % 50);
    const req = testRequest(this.nextId++, { ids, maxTokens, slo }, performance.now());
    this.scheduler.submit(req);
    return req;
  }

  async step(): Promise<StepPlan | null> {
    const built = this.scheduler.schedule();
    if (!built) return null;
    const records = await this.engine.step(built.plan);
    this.clock.tick(predictStepMs(COSTS, {
      rows: built.plan.rows.length,
      samples: built.plan.samples.length,
    }));
    this.scheduler.deliver(built, records);
    return built.plan;
  }
}

/** Steps until `req` has `tokens` tokens. */
async function stepUntil(bench: Bench, req: Request, tokens: number): Promise<void> {
  for (let i = 0; req.generated.length < tokens; i++) {
    await bench.step();
    if (i > 200) throw new Error("stuck");
  }
}

Deno.test("layerkv (Eq. 1–2): a prefill is admitted once its time fits the decoding request's TPOT slack", async () => {
  const clock = useFakeTime(0);
  try {
    // Just after d's first token: T_allow = 50 − 11 = 39 ms. 30 rows (30 ms) fit at once; 60 rows
    // wait one step, until d has one more token: 50·2 − (11 + 11) = 78 ms.
    for (const [rows, heldSteps] of [[30, 0], [60, 1], [100, 2]]) {
      const bench = new Bench(layerkvPolicy, clock);
      const d = bench.submit(4, 40, { tbtMs: 50 });
      await stepUntil(bench, d, 1);
      const q = bench.submit(rows, 2);
      let held = 0;
      while (q.state === "waiting") {
        await bench.step();
        if (q.state === "waiting") held++;
      }
      assertEquals(held, heldSteps, `${rows} rows`);
      // 100 rows: after 2 tokens past the first, 39·3 = 117 > 100 (78 was not).
      while (!d.finish || !q.finish) await bench.step();
      for (const r of [d, q]) {
        assertEquals(r.generated, toyGeneration(r.spec.ids, r.spec.maxTokens, 0, 50));
      }
    }
  } finally {
    clock.uninstall();
  }
});

Deno.test("layerkv (Eq. 1): a request that ran faster than its TPOT has banked slack; slo's per-step TBT gate has none", async () => {
  const clock = useFakeTime(0);
  try {
    // TPOT SLO 20 ms over decode steps of 11: 9 ms banked per token. A 60-row prefill makes
    // steps of 26 ms (over 20: slo holds it while d decodes) but needs 60 < 9·(N_past + 1):
    // layerkv admits it once d has N_past = 6 tokens after its first (63 ms of slack), in the
    // step that makes d's 8th.
    for (const [policy, admitAt] of [[layerkvPolicy, 8], [sloPolicy, Infinity]] as const) {
      const bench = new Bench(policy, clock);
      const d = bench.submit(4, 12, { tbtMs: 20 });
      await stepUntil(bench, d, 1);
      const q = bench.submit(60, 2);
      let admittedWith = Infinity;
      while (!q.finish) {
        if (q.state !== "waiting" && admittedWith === Infinity && !d.finish) {
          admittedWith = d.generated.length;
        }
        await bench.step();
      }
      assertEquals(admittedWith, admitAt, policy.name);
      assertEquals(q.generated, toyGeneration(q.spec.ids, 2, 0, 50));
      assertEquals(d.generated, toyGeneration(d.spec.ids, 12, 0, 50));
    }
  } finally {
    clock.uninstall();
  }
});

Deno.test("layerkv: with no decoding request, no TPOT SLO or no cost model the gate is open", async () => {
  const clock = useFakeTime(0);
  try {
    for (const [costs, slo] of [[COSTS, {}], [null, { tbtMs: 1 }]] as const) {
      const bench = new Bench(layerkvPolicy, clock, costs);
      const d = bench.submit(4, 20, slo);
      await stepUntil(bench, d, 1);
      const q = bench.submit(60, 2);
      await bench.step();
      assert(q.state !== "waiting", `held (cost model: ${costs !== null})`);
    }
  } finally {
    clock.uninstall();
  }
});
