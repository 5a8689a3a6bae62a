// When the scheduler asks for a new plan: no plan yet, a different batch, a window about to run
// out (asked one step ahead, so the new plan is ready in time), or steps drifting from the
// prediction; never otherwise.

import { shouldReplan } from "../../../runtime/plan/replan.ts";
import { assertEquals } from "../../helpers/testing.ts";

const plan = { batch: [1, 2, 3], fromStep: 100, window: 32, predictedStepMs: 200 };
const seen = (o: Partial<{ batch: number[]; step: number; observedStepMs: number }> = {}) => ({
  batch: [3, 1, 2],
  step: 110,
  observedStepMs: 210,
  ...o,
});

Deno.test("replan: nothing changed, nothing to do (batch order does not matter)", () => {
  assertEquals(shouldReplan(plan, seen()), undefined);
});

Deno.test("replan: no plan, batch change, window end, drift", () => {
  assertEquals(shouldReplan(undefined, seen()), "no-plan");
  assertEquals(shouldReplan(plan, seen({ batch: [1, 2] })), "batch");
  assertEquals(shouldReplan(plan, seen({ batch: [1, 2, 4] })), "batch");
  // The window covers steps 100..131: after step 130 the solve runs during 131, ready for 132.
  assertEquals(shouldReplan(plan, seen({ step: 129 })), undefined);
  assertEquals(shouldReplan(plan, seen({ step: 130 })), "window");
  assertEquals(shouldReplan(plan, seen({ observedStepMs: 250 })), "drift");
  assertEquals(shouldReplan(plan, seen({ observedStepMs: 150 })), "drift");
  assertEquals(shouldReplan(plan, seen({ observedStepMs: 250 }), 0.3), undefined);
});
