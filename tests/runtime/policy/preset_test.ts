// Scheduling presets (runtime/policy/preset.ts, index.ts): every `--sched` name makes a preset
// whose policy, preemption and placement follow its options; the rules on which options go
// together give one problem each, fatal or only "ignored"; choosePreset throws the first fatal one;
// TokenFlow's μ and Δt are options of its own (and of no other preset), and change its horizon.

import {
  choosePreset,
  type PolicyName,
  presetProblems,
  PRESETS,
} from "../../../runtime/policy/index.ts";
import { placingOf } from "../../../runtime/policy/preset.ts";
import type { PolicyContext } from "../../../runtime/policy/policy.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { stage, testRequest } from "../../helpers/requests.ts";

const HOST = { hostTier: true, costModel: true };

Deno.test("presets: every name makes its policy, priority-wrapped unless asked not to", () => {
  for (const name of Object.keys(PRESETS) as PolicyName[]) {
    const preset = choosePreset(name, {}, HOST);
    assertEquals(preset.name, name);
    assertEquals(preset.policy.name, `${name}+priority`);
    assertEquals(choosePreset(name, { priority: false }, HOST).policy.name, name);
    assertEquals(preset.preempt, { fixed: "recompute", auto: false });
  }
  assertEquals(
    choosePreset("fcfs", { preempt: "swap", recompute: "auto" }, HOST).preempt,
    { fixed: "swap", auto: true },
  );
});

Deno.test("presets: placement from the offload options, given or implied", () => {
  assertEquals(placingOf({}), {
    offload: "none",
    distance: 0,
    offloads: false,
    layerwisePrefill: false,
    prefetchBlocks: undefined,
  });
  assertEquals(placingOf({ offload: "uniform" }).distance, 2);
  assertEquals(placingOf({ offloadDistance: 3 }).offload, "uniform");
  assertEquals(placingOf({ offload: "none", offloadDistance: 3 }).offloads, false);
  assert(placingOf({ offload: "orbit" }).offloads);
  assertEquals(placingOf({ layerwisePrefill: true, prefetchBlocks: 9 }).prefetchBlocks, 9);
});

Deno.test("presets: the rules on options that go together, each once", () => {
  const none = { hostTier: false };
  const flags = (name: PolicyName, o: Parameters<typeof presetProblems>[1], t = none) =>
    presetProblems(name, o, t).map((p) =>
      `${p.flag}${p.ignored ? " (ignored)" : ""}: ${p.message}`
    );
  assertEquals(flags("fcfs", {}), []);
  assertEquals(flags("fcfs", { offload: "orbit" }), [
    "offload: orbit needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(flags("fcfs", { offload: "none", offloadDistance: 3 }, HOST), [
    "offload-distance (ignored): is the distance of --offload uniform",
  ]);
  assertEquals(flags("fcfs", { layerwisePrefill: true }), [
    "layerwise-prefill: is part of --sched slo or layerkv or tokenflow",
    "layerwise-prefill: needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(flags("slo", { layerwisePrefill: true, prefetchBlocks: 4 }, HOST), []);
  assertEquals(flags("tokenflow", { layerwisePrefill: true }, HOST), []);
  assertEquals(flags("tokenflow", { layerwisePrefill: true }), [
    "layerwise-prefill: needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(flags("slo", { prefetchBlocks: 4 }, HOST), [
    "prefetch-blocks (ignored): needs --offload uniform or orbit, or --layerwise-prefill",
  ]);
  assertEquals(flags("fcfs", { offload: "uniform", orbitWindowMax: 64 }, HOST), [
    "orbit-window-max (ignored): caps the planning window of --offload orbit",
  ]);
  assertEquals(flags("fcfs", { offload: "orbit", orbitWindowMax: 64 }, HOST), []);
  assertEquals(flags("fcfs", { recompute: "auto", preempt: "swap" }, HOST), [
    "preempt (ignored): is chosen per request by --recompute auto; pass one or the other",
  ]);
  assertEquals(flags("fcfs", { recompute: "auto", preempt: "recompute" }, HOST), []);
  assertEquals(flags("slo", { tokenflowSafety: 3, tokenflowIntervalS: 1 }, HOST), [
    "tokenflow-safety: is part of --sched tokenflow",
    "tokenflow-interval-s: is part of --sched tokenflow",
  ]);
  assertEquals(flags("tokenflow", { tokenflowSafety: 3, tokenflowIntervalS: 1 }, HOST), []);
  // The cost model is known only once the engine is loaded.
  const noModel = { hostTier: true, costModel: false };
  assertEquals(flags("fcfs", { offload: "orbit", recompute: "auto" }, { hostTier: true }), []);
  assertEquals(flags("fcfs", { offload: "orbit", recompute: "auto" }, noModel), [
    "offload: orbit needs the engine's cost model (profiled at load)",
    "recompute: auto needs the engine's cost model (profiled at load)",
  ]);
});

Deno.test("presets: choosePreset throws the first problem that cannot work, and goes on past ignored ones", () => {
  assertThrows(() => choosePreset("fcfs", { offload: "uniform" }, { hostTier: false }), {
    name: "RangeError",
    message: "--offload: uniform needs a host KV tier: pass --host-kv-mb MB",
  });
  assertThrows(
    () => choosePreset("fcfs", { layerwisePrefill: true }, HOST),
    /--layerwise-prefill: is part of --sched slo or layerkv or tokenflow/,
  );
  assertEquals(
    choosePreset("tokenflow", { layerwisePrefill: true }, HOST).placing.layerwisePrefill,
    true,
  );
  assertEquals(
    choosePreset("fcfs", { offload: "none", offloadDistance: 3 }, HOST).placing.offloads,
    false,
  );
  assertThrows(() => choosePreset("lifo" as PolicyName, {}, HOST), /no policy named lifo/);
});

Deno.test("presets: TokenFlow's μ and Δt are its options; a larger horizon holds a reader back later", () => {
  // No cost model: switching costs nothing, so the horizon is μ·Δt + 3·Δt seconds of playout.
  const ctx: PolicyContext = {
    now: () => 0,
    maxSlots: 4,
    freeSlots: 3,
    maxRows: 16,
    blockSize: 4,
    freeBlocksPerLayer: 100,
    hostTier: false,
    stepMs: () => null,
    copyMs: () => null,
  };
  const reader = testRequest(1, { ids: [1, 2, 3], maxTokens: 100, readingRate: 10 });
  stage(reader, "decoding");
  // 3 s of playout.
  for (let i = 0; i < 30; i++) reader.accept({ id: i, logprob: 0, top: [] });
  const held = (o: Parameters<typeof choosePreset>[1]) =>
    choosePreset("tokenflow", { priority: false, ...o }, HOST).policy.holdBack!([reader], ctx, [])
      .has(reader);
  assert(held({}), "defaults: μ 2, Δt 0.5 s: a horizon of 2.5 s");
  assert(!held({ tokenflowSafety: 4, tokenflowIntervalS: 1 }), "μ 4, Δt 1 s: 7 s");
  assert(held({ tokenflowIntervalS: 0.5, tokenflowSafety: 1 }), "μ 1: 2 s");
  assertThrows(() => choosePreset("tokenflow", { tokenflowSafety: 0.5 }, HOST), /μ ≥ 1/);
  assertThrows(() => choosePreset("tokenflow", { tokenflowIntervalS: 0 }, HOST), /Δt > 0/);
});
