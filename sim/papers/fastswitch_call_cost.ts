// The copy call's cost, which FastSwitch's paper leaves unsettled: Table 1 fits 5 µs a call (the
// profile's), while §2's "dispatch is 90–95% of a copy's time, against ~10 µs of execution" implies
// 100–190 µs. This reruns vllm-swap and fastswitch at a quarter of the derived budget, 50
// conversations, with every call costing `--call-us` (default 100):
//
//   deno run -A --config tests/deno.json sim/papers/fastswitch_call_cost.ts [--call-us N]

import { parseArgs } from "node:util";
import { PROFILES } from "../gpu_profiles.ts";
import { FASTSWITCH, fastswitchRun, fastswitchWorkload, VLLM_SWAP } from "./fastswitch.ts";
import { fmt } from "../experiment.ts";

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { "call-us": { type: "string", default: "100" } },
  });
  const callUs = Number(values["call-us"]);
  const profile = {
    ...PROFILES.fastswitch,
    kvTokens: Math.round(PROFILES.fastswitch.kvTokens / 4),
  };
  const workload = fastswitchWorkload(0.05);
  console.log(
    `Every copy call ${callUs} µs; device KV ${profile.kvTokens} tokens; 50 conversations.`,
  );
  console.log("");
  console.log(
    "| pattern | system | P95 TTFT s | P99 TTFT s | P99.9 TTFT s | P99.9 TBT ms | preemptions |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  for (const pattern of ["markov", "random"] as const) {
    for (const system of [VLLM_SWAP, FASTSWITCH]) {
      const r = await fastswitchRun(profile, workload, pattern, {
        ...system,
        limits: { ...system.limits, copyCallUs: callUs },
      });
      console.log(
        `| ${pattern} | ${r.system} | ${
          r.ttft.map((x) => fmt(x === null ? null : x / 1000, 2)).join(" | ")
        } | ${fmt(r.tbt999)} | ${r.stats.preemptions} |`,
      );
    }
  }
}
