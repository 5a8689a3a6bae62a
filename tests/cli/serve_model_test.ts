// `serve`'s first run: with no --model and no way to fetch the default model, it says so loudly and
// serves the demo model; an explicit --model that cannot be had or loaded ends the process with
// exit 1 and the reason instead of a server that listens forever with /health 503. Offline by
// construction: the hub address is one where nothing listens, and the cache is private (the demo
// model's is the CLI tests' shared one: sluice_process.ts).

import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";
import { chatDemo, DEAD_HUB, runSluice, sharedCache, startServe } from "./sluice_process.ts";

async function withCache(fn: (env: Record<string, string>, cache: string) => Promise<void>) {
  const cache = await Deno.makeTempDir({ prefix: "sluice-cli-serve-" });
  try {
    await fn({ SLUICE_CACHE: cache, HF_ENDPOINT: DEAD_HUB }, cache);
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
}

Deno.test("serve with no --model and no network: a loud notice, then the demo model is served", async () => {
  // The demo model may already be in the shared cache; the default model cannot be.
  const env = { SLUICE_CACHE: await sharedCache(), HF_ENDPOINT: DEAD_HUB };
  const server = startServe([], { env });
  try {
    const port = await server.ready();
    const models = await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json();
    assertEquals(models.data.map((m: { id: string }) => m.id), ["demo"]);
    const res = await chatDemo(port, { max_tokens: 3 });
    assertEquals(res.status, 200);
    assertEquals((await res.json()).usage.completion_tokens > 0, true);
    const log = server.stderr();
    assertMatch(log, /default model HuggingFaceTB\/SmolLM2-135M-Instruct could not be fetched/);
    assertMatch(log, /the network is unavailable/);
    assertMatch(log, /Using the DEMO model instead: a small RANDOM model/);
    // The notice comes before the port opens, so a user sees it before any "ready".
    assert(log.indexOf("DEMO model") < log.indexOf("listening on"), log);
  } finally {
    assertEquals(await server.stop(), 0, server.stderr());
  }
});

Deno.test("serve --model org/name that cannot be downloaded: exit 1 with the reason, never listens", async () => {
  await withCache(async (env) => {
    const r = await runSluice(["serve", "--port", "0", "--model", "acme/missing"], { env });
    assertEquals(r.code, 1, r.stderr);
    assertMatch(r.stderr, /sluice: cannot download acme\/missing \(config\.json\)/);
    assert(!r.stderr.includes("listening on"), r.stderr);
    assert(!r.stderr.includes("DEMO"), "an explicit --model must never fall back");
  });
});

Deno.test("serve --model DIR that fails to load: the server closes and exits 1 with the message", async () => {
  await withCache(async (env, cache) => {
    const dir = `${cache}/broken-model`;
    await Deno.mkdir(dir);
    await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify({ model_type: "llama" }));
    const server = startServe(["--model", dir], { env, timeoutMs: 60_000 });
    const code = await server.exited;
    const log = server.stderr();
    assertEquals(code, 1, log);
    assertMatch(log, /listening on/);
    assertMatch(log, /sluice: model failed to load: /);
  });
});
