// The flag table (cli/flags.ts) and the runtime call each preset option the same: the command line
// names a problem by the row that sets the option, the runtime's own errors by optionFlag()
// (runtime/policy/index.ts), which knows no flags. And the parseArgs spec comes from the schemas.

import { flagSetting, parseArgsSpec, rowsOf } from "../../cli/flag_row.ts";
import { ENGINE, MODEL } from "../../cli/flags.ts";
import { PROMPT } from "../../cli/generate_flags.ts";
import { optionFlag } from "../../runtime/policy/index.ts";
import type { PresetOptions } from "../../runtime/policy/preset.ts";
import { assertEquals } from "../helpers/testing.ts";

/** Every preset option (the compiler keeps the list whole). */
const PRESET_OPTIONS: Record<keyof PresetOptions, true> = {
  priority: true,
  preempt: true,
  recompute: true,
  offload: true,
  offloadDistance: true,
  prefetchBlocks: true,
  orbitWindowMax: true,
  orbitPlan: true,
  orbitPause: true,
  layerwisePrefill: true,
  tokenCache: true,
  tokenflowSafety: true,
  tokenflowIntervalS: true,
  tokenflowKeepUp: true,
  tokenflowOverload: true,
  tokenflowLate: true,
  tokenflowHoldBack: true,
};

Deno.test("flag table: each preset option is set by the flag the runtime names it by", () => {
  const rows = rowsOf([MODEL, ENGINE]);
  for (const option of Object.keys(PRESET_OPTIONS) as (keyof PresetOptions)[]) {
    assertEquals(flagSetting(rows, option), optionFlag(option), option);
  }
});

Deno.test("flag table: boolean schemas are switches, every other flag takes a value", () => {
  const spec = parseArgsSpec(rowsOf([PROMPT, MODEL]));
  const switches = Object.keys(spec).filter((name) => spec[name].type === "boolean");
  assertEquals(switches.sort(), ["chat", "f32", "json"]);
  assertEquals(spec["prompt-ids"].type, "string");
});
