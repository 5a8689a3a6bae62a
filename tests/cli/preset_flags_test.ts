// The scheduling flags main.ts checks with the presets' rules (runtime/policy/index.ts) before
// anything loads: TokenFlow's μ and Δt are tokenflow's flags, within their ranges; flags another
// preset takes are refused; the offload and preemption rules name their flags.

import { COMMAND_FLAGS } from "../../main.ts";
import { assertEquals } from "../helpers/testing.ts";

/** The problems `serve` finds in `flags`, as "flag: message". */
function problems(flags: Record<string, string>): string[] {
  const parsed = COMMAND_FLAGS.serve.schema.safeParse(flags);
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

Deno.test("flags: --tokenflow-safety and --tokenflow-interval-s are tokenflow's", () => {
  assertEquals(problems({ "tokenflow-safety": "3", "tokenflow-interval-s": "0.25" }), []);
  assertEquals(problems({ sched: "slo", "tokenflow-safety": "3" }), [
    "tokenflow-safety: is part of --sched tokenflow",
  ]);
  assertEquals(problems({ "tokenflow-safety": "0.5" }).length, 1, "μ ≥ 1");
  assertEquals(problems({ "tokenflow-interval-s": "0" }).length, 1, "Δt > 0");
});

Deno.test("flags: the offload, layer-wise and preemption rules, each on its flag", () => {
  assertEquals(problems({ sched: "fcfs", "layerwise-prefill": "on" }), [
    "layerwise-prefill: is part of --sched slo",
  ]);
  assertEquals(problems({ sched: "slo", "layerwise-prefill": "on", "host-kv-mb": "0" }), [
    "layerwise-prefill: needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(problems({ "prefetch-blocks": "4" }), [
    "prefetch-blocks: needs --offload uniform or orbit, or --layerwise-prefill",
  ]);
  assertEquals(problems({ offload: "uniform", "prefetch-blocks": "4" }), []);
  assertEquals(problems({ preempt: "partial" }), []);
  assertEquals(problems({ preempt: "partial", recompute: "auto" }), [
    "preempt: is chosen per request by --recompute auto; pass one or the other",
  ]);
});

Deno.test("flags: --token-cache (eLLM), off by default, refused where layers live on the host", () => {
  assertEquals(problems({ "token-cache": "on" }), []);
  assertEquals(problems({ "token-cache": "on", preempt: "partial" }), []);
  assertEquals(problems({ "token-cache": "on", offload: "uniform" }), [
    "token-cache: cannot work with layers offloaded to the host: drop --offload or --layerwise-prefill",
  ]);
  assertEquals(problems({ "token-cache": "maybe" }).length, 1);
  const parsed = COMMAND_FLAGS.serve.schema.safeParse({});
  assertEquals(parsed.success && parsed.data["token-cache"], "off");
});
