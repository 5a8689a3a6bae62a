// StepLoop (runtime/loop.ts) over a scripted step source and an engine whose steps finish when the
// test says: steps are pipelined up to the ring's depth and delivered in order; an idle loop sleeps
// until kicked, or looks again by itself while requests are held back; a failed step fails every
// request and the loop goes on; stop() returns once nothing is left; each step is timed from when
// it could start.

import type { EngineInfo, SampleRecord, StepEngine, StepPlan } from "../../engine/engine.ts";
import { StepLoop, type StepSource } from "../../runtime/loop.ts";
import type { BuiltStep } from "../../runtime/step_builder.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

/** A step of `samples` sample rows, named by its first row's position. */
function stepOf(name: number, samples = 1): BuiltStep {
  const rows = Array.from({ length: samples }, (_, i) => ({ slot: i, pos: name, token: 1 }));
  return {
    plan: {
      tables: [],
      sampling: [],
      rows,
      samples: rows.map((_, row) => ({ row })),
      wantTopLogprobs: false,
    },
    owners: [],
    landings: [],
  };
}

/** Hands out the steps queued in `steps`, then nothing; records what it was told. */
class Script implements StepSource {
  readonly steps: BuiltStep[] = [];
  readonly delivered: number[] = [];
  readonly failed: string[] = [];
  holding = 0;
  work = true;
  scheduled = 0;

  schedule(): BuiltStep | null {
    this.scheduled++;
    return this.steps.shift() ?? null;
  }
  deliver(step: BuiltStep, records: SampleRecord[]): void {
    this.delivered.push(step.plan.rows[0].pos);
    assertEquals(records.length, step.plan.samples.length);
  }
  failAll(message: string): void {
    this.failed.push(message);
  }
  get hasWork(): boolean {
    return this.work;
  }
}

/** An engine whose steps finish (or fail) only when the test calls finish(). */
class Manual implements StepEngine {
  readonly info = {} as EngineInfo;
  readonly pending: { plan: StepPlan; done: (fail?: string) => void }[] = [];

  step(plan: StepPlan): Promise<SampleRecord[]> {
    return new Promise((resolve, reject) => {
      this.pending.push({
        plan,
        done: (fail) =>
          fail ? reject(new Error(fail)) : resolve(
            plan.samples.map(() => ({ id: 0, logprob: 0, top: [] })),
          ),
      });
    });
  }
  /** Finishes the oldest step. */
  finish(fail?: string): void {
    this.pending.shift()!.done(fail);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Lets the loop run until it waits again. */
const turn = () => new Promise((r) => setTimeout(r, 0));

Deno.test("loop: steps go out up to the ring's depth, are delivered in order, and timed from when they could start", async () => {
  const script = new Script();
  const engine = new Manual();
  let clock = 0;
  const timed: number[] = [];
  script.steps.push(stepOf(1), stepOf(2, 3), stepOf(3), stepOf(4));
  const loop = new StepLoop(engine, script, 2, () => clock, (_, ms) => timed.push(ms));
  await turn();
  assertEquals(engine.pending.length, 2, "two in flight: the depth");
  clock = 10;
  engine.finish();
  await turn();
  assertEquals(script.delivered, [1]);
  assertEquals(engine.pending.length, 2, "the third went out as the first came back");
  clock = 25;
  engine.finish();
  engine.finish();
  await turn();
  engine.finish();
  await turn();
  assertEquals(script.delivered, [1, 2, 3, 4]);
  assertEquals([loop.steps, loop.tokens], [4, 6]);
  // Step 1 ran 0..10; step 2, submitted at 0, could start only at 10 and ended at 25.
  assertEquals(timed.slice(0, 2), [10, 15]);
  assertEquals(loop.takeStepTimes().length, 4);
  assertEquals(loop.takeStepTimes(), []);
  script.work = false;
  await loop.stop();
});

Deno.test("loop: an idle loop sleeps until kicked; while requests are held back it looks again by itself", async () => {
  const script = new Script();
  const loop = new StepLoop(new Manual(), script, 2);
  await turn();
  const asked = script.scheduled;
  await new Promise((r) => setTimeout(r, 60));
  assertEquals(script.scheduled, asked, "nobody asked, nobody held: it slept");
  loop.kick();
  await turn();
  assertEquals(script.scheduled, asked + 1);
  script.holding = 1;
  loop.kick();
  await new Promise((r) => setTimeout(r, 200));
  assert(script.scheduled >= asked + 4, `only ${script.scheduled - asked} looks while holding`);
  script.holding = 0;
  script.work = false;
  await loop.stop();
});

Deno.test("loop: a failed step fails every request and the loop serves on; stop waits for the last step", async () => {
  const script = new Script();
  const engine = new Manual();
  script.steps.push(stepOf(1));
  const loop = new StepLoop(engine, script, 2);
  await turn();
  const error = console.error;
  console.error = () => {};
  try {
    engine.finish("device lost");
    await turn();
  } finally {
    console.error = error;
  }
  assertEquals(script.failed, ["device lost"]);
  script.steps.push(stepOf(2));
  loop.kick();
  await turn();
  let stopped = false;
  script.work = false;
  const stopping = loop.stop().then(() => stopped = true);
  await turn();
  assert(!stopped, "a step is still in flight");
  engine.finish();
  await stopping;
  assertEquals(script.delivered, [2]);
});
