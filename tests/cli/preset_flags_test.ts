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
    "layerwise-prefill: is part of --sched slo or layerkv or tokenflow",
  ]);
  // The default preset takes it (with a host tier).
  assertEquals(problems({ "layerwise-prefill": "on", "host-kv-mb": "64" }), []);
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

Deno.test("flags: TokenFlow's trade-off rules are tokenflow's, absent by default", () => {
  const rules = {
    "tokenflow-keep-up": "on",
    "tokenflow-overload": "hold",
    "tokenflow-late": "behind",
    "tokenflow-hold-back": "always",
  };
  assertEquals(problems(rules), []);
  assertEquals(problems({ sched: "fcfs", ...rules }).sort(), [
    "tokenflow-hold-back: is part of --sched tokenflow",
    "tokenflow-keep-up: is part of --sched tokenflow",
    "tokenflow-late: is part of --sched tokenflow",
    "tokenflow-overload: is part of --sched tokenflow",
  ]);
  assertEquals(problems({ "tokenflow-late": "never" }).length, 1);
});

Deno.test("flags: the host tier's own flags are refused without one, where they would do nothing", () => {
  assertEquals(problems({ "host-kv-mb": "0", "write-through": "off" }), [
    "write-through: needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(problems({ "host-kv-mb": "0", "swap-reuse": "on" }), [
    "swap-reuse: needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(problems({ "host-kv-mb": "0", preempt: "swap" }), [
    "preempt: swap needs a host KV tier: pass --host-kv-mb MB",
  ]);
  assertEquals(problems({ "write-through": "off", "swap-reuse": "off", preempt: "swap" }), []);
  // The baseline every report compares with parses as it is.
  assertEquals(
    problems({
      sched: "fcfs",
      priority: "off",
      "prefix-cache": "on",
      preempt: "recompute",
      "host-kv-mb": "0",
    }),
    [],
  );
});
