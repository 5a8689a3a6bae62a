// --sched auto (runtime/policy/economics.ts): a runtime over an engine whose profiled layer line is
// flat (the papers' GPU profiles) takes vLLM V1's settings; over one whose rows cost what they cost
// (the demo model on this machine's adapter, a line with no fixed cost) it takes tokenflow; flags
// the user gave stay; the command line's defaults resolve to auto.

import { COMMAND_FLAGS, serveOptions } from "../../../cli/commands.ts";
import { Runtime } from "../../../runtime/service.ts";
import { chooseByEconomics, FLAT_RATIO, widthCost } from "../../../runtime/policy/economics.ts";
import { FakeEngine } from "../../../sim/fake_engine.ts";
import { GpuEngine } from "../../../sim/gpu_engine.ts";
import { PROFILES } from "../../../sim/gpu_profiles.ts";
import { profiledCostModel } from "../../../sim/gpu_step_cost.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { DEMO_COSTS } from "../../sim/matrix_sim.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";

const DEMO = costModelWithLayer(DEMO_COSTS.fixedMs / 4, DEMO_COSTS.perRowMs / 4);
const OPTIONS = { maxQueue: 8, maxTokensLimit: 64, eosIds: [] };

Deno.test("economics: every GPU profile's layer line is flat, the demo model's is not", () => {
  for (const [id, p] of Object.entries(PROFILES)) {
    const r = widthCost(profiledCostModel(p));
    assert(r < FLAT_RATIO, `${id}: a 32-row step costs ${r.toFixed(2)}× one row`);
  }
  const demo = widthCost(DEMO);
  assert(demo >= FLAT_RATIO, `demo: ${demo.toFixed(2)}×`);
});

Deno.test("economics: a flat line takes vLLM V1's settings, a steep one or none tokenflow", () => {
  const gpu = chooseByEconomics(profiledCostModel(PROFILES.layerkv));
  assertEquals(gpu.policy, "fcfs");
  assertEquals(gpu.set, {
    policy: "fcfs",
    hostTier: false,
    writeThrough: false,
    recompute: "off",
    preempt: "recompute",
  });
  assertMatch(gpu.reason, /a 32-row step costs 1\.\d\d× a one-row step/);
  const soft = chooseByEconomics(DEMO);
  assertEquals([soft.policy, soft.set], ["tokenflow", { policy: "tokenflow" }]);
  const none = chooseByEconomics(undefined);
  assertEquals([none.policy, none.widthCost], ["tokenflow", null]);
  assertMatch(none.reason, /no cost model/);
});

Deno.test("economics: what the user gave stays", () => {
  const c = chooseByEconomics(profiledCostModel(PROFILES.tokenflow), ["writeThrough", "hostTier"]);
  assertEquals(c.set, { policy: "fcfs", recompute: "off", preempt: "recompute" });
  const d = chooseByEconomics(profiledCostModel(PROFILES.tokenflow), ["recompute", "preempt"]);
  assertEquals(d.set, { policy: "fcfs", hostTier: false, writeThrough: false });
});

Deno.test("economics: a runtime with --sched auto runs what its engine's cost model favours", async () => {
  const options = {
    ...OPTIONS,
    policy: "auto" as const,
    prefixCache: true,
    recompute: "auto" as const,
    writeThrough: true,
  };
  const onGpu = new Runtime(new GpuEngine(PROFILES.tokenflow, { hostBlocks: 64 }), options);
  assertEquals(onGpu.policy, "fcfs");
  assertEquals([onGpu.settings.writeThrough, onGpu.settings.recompute], [false, "off"]);
  assertEquals([onGpu.info.hostBlocks, onGpu.stats().hostBlocksTotal], [0, 0]);
  assertMatch(onGpu.economics!.reason, /vLLM V1's settings/);
  await onGpu.close();
  const demo = new FakeEngine({
    numLayers: 4,
    blockSize: 16,
    blocksPerArena: [64],
    maxSlots: 4,
    maxRows: 32,
    maxBlocksPerSeq: 16,
    ringSize: 1,
    hostBlocks: 64,
    costModel: DEMO,
    kvBlockBytes: 4096,
    vocabSize: 512,
  });
  const here = new Runtime(demo, options);
  assertEquals(here.policy, "tokenflow");
  assertEquals([here.settings.writeThrough, here.settings.recompute], [true, "auto"]);
  assertEquals(here.info.hostBlocks, 64);
  await here.close();
  // Offloaded layers keep the host tier on a GPU too.
  const offloading = new Runtime(new GpuEngine(PROFILES.tokenflow, { hostBlocks: 64 }), {
    ...options,
    offload: "uniform",
  });
  assertEquals([offloading.policy, offloading.info.hostBlocks], ["fcfs", 64]);
  await offloading.close();
  // An option only tokenflow takes names it; a named preset is not second-guessed.
  const keepUp = new Runtime(new GpuEngine(PROFILES.tokenflow, { hostBlocks: 64 }), {
    ...options,
    tokenflowKeepUp: true,
  });
  assertEquals(keepUp.policy, "tokenflow");
  assertMatch(keepUp.economics!.reason, /only tokenflow takes \(tokenflowKeepUp\)/);
  await keepUp.close();
  const named = new Runtime(new GpuEngine(PROFILES.tokenflow, { hostBlocks: 64 }), {
    ...options,
    policy: "tokenflow",
  });
  assertEquals([named.policy, named.economics], ["tokenflow", null]);
  await named.close();
});

Deno.test("economics: serve's defaults are auto, profiled; --sched names the policy", () => {
  const parse = (flags: Record<string, string>) =>
    serveOptions(COMMAND_FLAGS.serve.schema.parse(flags));
  const plain = parse({});
  assertEquals([plain.runtime.policy, plain.engine.profileCosts, plain.runtime.given], [
    "auto",
    true,
    [],
  ]);
  assertEquals(parse({ "tokenflow-keep-up": "on" }).runtime.policy, "auto");
  assertEquals(parse({ sched: "fcfs" }).runtime.policy, "fcfs");
  assertEquals(plain.engine.hostKvMb, 256);
  const given = parse({ "write-through": "off", preempt: "swap" });
  assertEquals([given.runtime.policy, given.engine.profileCosts, given.runtime.given], [
    "auto",
    true,
    ["hostTier", "writeThrough", "recompute", "preempt"],
  ]);
  assertEquals(parse({ "host-kv-mb": "64" }).runtime.given, ["hostTier"]);
});
