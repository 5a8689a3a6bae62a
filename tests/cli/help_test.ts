// Every command and subcommand answers --help with its usage on stdout and exit 0, and does
// nothing else: no server, no download, no benchmark, no GPU (each returns in about the time Deno
// takes to start). A bad flag or command gets one line naming it, then the usage, exit 2, and never
// a stack trace.

import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";
import { DEAD_HUB, runSluice } from "./sluice_process.ts";

const HELP_CASES: [string[], RegExp][] = [
  [["--help"], /usage: deno task <command>/],
  [[], /usage: deno task <command>/],
  [["serve", "--help"], /usage: deno task serve[\s\S]*--model M[\s\S]*--port P/],
  [["serve", "-h"], /usage: deno task serve/],
  [["serve", "--port", "80", "--help"], /usage: deno task serve/],
  [["generate", "--help"], /usage: deno task generate[\s\S]*--prompt TEXT/],
  [["bench", "--help"], /usage: deno task bench <bench>[\s\S]*startup/],
  [["bench", "kernels", "--help"], /usage: deno task bench kernels/],
  [["bench", "decode", "--help"], /usage: deno task bench decode[\s\S]*--tokens N/],
  [["bench", "kv", "--help"], /usage: deno task bench kv/],
  [["bench", "serve", "--help"], /usage: deno task bench serve[\s\S]*--configs/],
  [["bench", "serve", "--clients", "1,2", "--help"], /usage: deno task bench serve/],
  [["bench", "responsiveness", "--help"], /usage: deno task bench responsiveness/],
  [["bench", "startup", "--help"], /usage: deno task bench startup[\s\S]*--adapters/],
];

const BAD_CASES: [string[], RegExp, RegExp][] = [
  [["serve", "--bogus"], /^sluice serve: Unknown option '--bogus'/, /usage: deno task serve/],
  [["serve", "--port", "x"], /^sluice serve: --port: /, /usage: deno task serve/],
  [["serve", "--sched", "lifo"], /^sluice serve: --sched: /, /usage: deno task serve/],
  [["serve", "--kv-dtype", "q4_0"], /^sluice serve: --kv-dtype: /, /usage: deno task serve/],
  [["serve", "stray"], /^sluice serve: Unexpected argument 'stray'/, /usage: deno task serve/],
  [
    ["serve", "--offload", "orbit", "--host-kv-mb", "0"],
    /^sluice serve: --offload: orbit needs a host KV tier: pass --host-kv-mb/,
    /usage: deno task serve/,
  ],
  [["serve", "--offload", "far"], /^sluice serve: --offload: /, /usage: deno task serve/],
  [["serve", "--recompute", "on"], /^sluice serve: --recompute: /, /usage: deno task serve/],
  [
    ["serve", "--recompute", "auto", "--preempt", "swap"],
    /^sluice serve: --preempt: is chosen per request by --recompute auto/,
    /usage: deno task serve/,
  ],
  [
    ["generate", "--prompt", "hi", "--host-kv-mb", "8", "--offload-distance", "3"],
    /^sluice generate: --offload-distance: is the distance of --offload uniform/,
    /usage: deno task generate/,
  ],
  [
    ["generate", "--prompt"],
    /^sluice generate: Option '--prompt <value>' argument missing/,
    /usage: deno task generate/,
  ],
  [
    ["generate", "--max-tokens", "3"],
    /^sluice generate: pass exactly one of --prompt/,
    /usage: deno task generate/,
  ],
  [
    ["generate", "--prompt", "hi", "--port", "1"],
    /^sluice generate: unknown flag --port/,
    /usage: deno task generate/,
  ],
  [["nope"], /^sluice: unknown command "nope"/, /usage: deno task <command>/],
  [["bench", "nope"], /^bench: unknown bench "nope"/, /usage: deno task bench <bench>/],
  [
    ["bench", "kernels", "--rows", "4"],
    /^bench kernels: Unknown option '--rows'/,
    /usage: deno task bench kernels/,
  ],
  [
    ["bench", "decode", "--tokens=abc"],
    /^bench decode: --tokens: /,
    /usage: deno task bench decode/,
  ],
  [["bench", "kv", "--only", "everything"], /^bench kv: --only: /, /usage: deno task bench kv/],
  [
    ["bench", "serve", "--nope"],
    /^bench serve: Unknown option '--nope'/,
    /usage: deno task bench serve/,
  ],
  [
    ["bench", "serve", "--clients", "1", "--nope", "1"],
    /^bench serve: Unknown option '--nope'/,
    /usage: deno task bench serve/,
  ],
  [
    ["bench", "responsiveness", "--unpaced=-1"],
    /^bench responsiveness: --unpaced: /,
    /usage: deno task bench responsiveness/,
  ],
  [
    ["bench", "startup", "--adapters", "metal"],
    /^bench startup: --adapters: /,
    /usage: deno task bench startup/,
  ],
];

/** An empty model cache and a hub that fails fast: any download attempt would show. */
async function sandbox() {
  const cache = await Deno.makeTempDir({ prefix: "sluice-cli-help-" });
  return { cache, env: { SLUICE_CACHE: cache, HF_ENDPOINT: DEAD_HUB } };
}

Deno.test("--help: every command and bench prints its usage, exit 0, and does nothing else", async () => {
  const { cache, env } = await sandbox();
  try {
    const results = await Promise.all(
      HELP_CASES.map(([args]) => runSluice(args, { env, timeoutMs: 30_000 })),
    );
    results.forEach((r, i) => {
      const [args, usage] = HELP_CASES[i];
      const what = `main.ts ${args.join(" ")}: ${r.stderr}`;
      assertEquals(r.code, 0, what);
      assertMatch(r.stdout, usage, what);
      assertEquals(r.stderr, "", what);
      // Nothing else ran: a model load writes to the cache (checked below) or logs to stderr, a
      // benchmark prints its report after the usage. (No wall-clock bound: on a loaded machine
      // it fails without anything being wrong.)
      assertEquals(r.stdout.match(/usage:/g)?.length, 1, what);
    });
    assertEquals([...Deno.readDirSync(cache)], [], "--help wrote to the model cache");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("bad flags: one line naming the problem, then the usage, exit 2, no stack trace", async () => {
  const { cache, env } = await sandbox();
  try {
    const results = await Promise.all(
      BAD_CASES.map(([args]) => runSluice(args, { env, timeoutMs: 30_000 })),
    );
    results.forEach((r, i) => {
      const [args, problem, usage] = BAD_CASES[i];
      const what = `main.ts ${args.join(" ")}: ${r.stderr}`;
      assertEquals(r.code, 2, what);
      const [first, second] = r.stderr.split("\n");
      assertMatch(first, problem, what);
      assertEquals(second, "", what);
      assertMatch(r.stderr, usage, what);
      assert(!/^\s+at /m.test(r.stderr), `stack trace: ${what}`);
      assertEquals(r.stdout, "", what);
    });
    assertEquals([...Deno.readDirSync(cache)], [], "a bad flag wrote to the model cache");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});
