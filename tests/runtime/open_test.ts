// openRuntime's start-up line names the model's architecture, and its window where it has one,
// beside the model's path (what `serve` and `generate` print); with --sched auto, a second line
// says which policy the profiled cost model chose and from what figure.

import { openRuntime } from "../../runtime/open.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import type { Architecture } from "../../engine/model/config.ts";
import { assertMatch } from "../helpers/testing.ts";

const SPEC = {
  hiddenSize: 64,
  intermediateSize: 128,
  numLayers: 1,
  numHeads: 4,
  numKvHeads: 2,
  tied: true,
  dtype: "F16",
  seed: 3,
} as const;

const CASES: {
  architecture: Architecture;
  slidingWindow?: number;
  numLayers?: number;
  slidingWindowPattern?: number;
  want: RegExp;
}[] = [
  { architecture: "qwen3", want: /sluice: model \S+ \(qwen3\) on / },
  { architecture: "mistral", slidingWindow: 16, want: /\(mistral, sliding window 16\) on / },
  {
    architecture: "gemma3",
    slidingWindow: 16,
    numLayers: 2,
    slidingWindowPattern: 2,
    want: /\(gemma3, sliding window 16 on 1 of 2 layers\) on /,
  },
];

Deno.test("the start-up line names the architecture and the sliding window", async (t) => {
  for (const c of CASES) {
    await t.step(c.architecture, async () => {
      const dir = await Deno.makeTempDir({ prefix: "sluice-open-" });
      const lines: string[] = [];
      try {
        await writeTinyModel(dir, { ...SPEC, ...c });
        const opened = await openRuntime(dir, {
          engine: { gpuKvMb: 1, maxSlots: 2, maxRows: 8, skipWarmUp: true },
          runtime: { policy: "fcfs", maxQueue: 1, maxTokensLimit: 16 },
          inProcess: true,
        }, (line) => lines.push(line));
        await opened.runtime.close();
        await opened.prompts.close();
        assertMatch(lines.join("\n"), c.want);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});

Deno.test("with --sched auto the start-up says what the profiled cost model chose, and why", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-open-" });
  const lines: string[] = [];
  try {
    await writeTinyModel(dir, { ...SPEC, architecture: "qwen3" });
    const opened = await openRuntime(dir, {
      // The profile runs after the warm-up, which compiles what it steps through.
      engine: { gpuKvMb: 1, maxSlots: 2, maxRows: 8, profileCosts: true },
      runtime: { policy: "auto", maxQueue: 1, maxTokensLimit: 16 },
      inProcess: true,
    }, (line) => lines.push(line));
    const policy = opened.runtime.policy;
    await opened.runtime.close();
    await opened.prompts.close();
    const log = lines.join("\n");
    assertMatch(log, new RegExp(`scheduler ${policy}, `));
    assertMatch(
      log,
      new RegExp(`--sched auto chose ${policy}: a 32-row step costs \\d+\\.\\d\\d× a one-row step`),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
