// chooseModel: an explicit --model is resolved as given and its failure is the command's; with no
// --model the default hub model is used when it can be fetched, else the demo model with a notice.
// The hub is a fake fetch here (no network).

import { join } from "node:path";
import { chooseModel, fallbackNotice } from "../../../engine/sources/default_model.ts";
import { DEFAULT_MODEL } from "../../../engine/sources/default_model.ts";
import { ModelResolveError } from "../../../engine/sources/resolve_error.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assert, assertEquals, assertMatch, assertRejects } from "../../helpers/testing.ts";

const TINY = {
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  tied: true,
  dtype: "F32",
  seed: 3,
} as const;

/** A hub that serves the files of `dir` as DEFAULT_MODEL's, or fails as told. */
function fakeHub(behaviour: { dir?: string; status?: number; offline?: boolean }): typeof fetch {
  return (async (input: string | URL | Request) => {
    if (behaviour.offline) throw new TypeError("fetch failed");
    if (behaviour.status) return new Response("no", { status: behaviour.status });
    const url = String(input instanceof Request ? input.url : input);
    const prefix = `https://huggingface.co/${DEFAULT_MODEL}/resolve/main/`;
    try {
      const bytes = await Deno.readFile(join(behaviour.dir!, url.slice(prefix.length)));
      return new Response(bytes, { headers: { "content-length": String(bytes.length) } });
    } catch {
      return new Response("Entry not found", { status: 404 });
    }
  }) as typeof fetch;
}

async function withCache(fn: (cache: string, logs: string[]) => Promise<void>) {
  const cache = await Deno.makeTempDir({ prefix: "sluice-default-model-" });
  const saved = Deno.env.get("SLUICE_CACHE");
  Deno.env.set("SLUICE_CACHE", cache);
  try {
    await fn(cache, []);
  } finally {
    if (saved === undefined) Deno.env.delete("SLUICE_CACHE");
    else Deno.env.set("SLUICE_CACHE", saved);
    await Deno.remove(cache, { recursive: true });
  }
}

const quiet = { onProgress: () => {}, hubUrl: "https://huggingface.co" };

Deno.test("chooseModel: no --model and no network gives the demo model, with the notice", async () => {
  await withCache(async (cache, logs) => {
    const choice = await chooseModel(undefined, (m) => logs.push(m), {
      ...quiet,
      fetch: fakeHub({ offline: true }),
    });
    assertEquals(choice, { id: "demo", dir: join(cache, "demo-v1") });
    assertEquals(logs.length, 2, logs.join("\n")); // "downloading ...", then the notice
    assertMatch(
      logs[1],
      /could not be fetched:\n\* {3}the network is unavailable \(fetch failed\)/,
    );
    assertMatch(logs[1], /DEMO model/);
  });
});

Deno.test("chooseModel: no --model and a hub that refuses gives the demo model too", async () => {
  await withCache(async (_cache, logs) => {
    const choice = await chooseModel(undefined, (m) => logs.push(m), {
      ...quiet,
      fetch: fakeHub({ status: 503 }),
    });
    assertEquals(choice.id, "demo");
    assertMatch(logs.at(-1)!, /answered HTTP 503/);
  });
});

Deno.test("chooseModel: no --model and a reachable hub downloads the default model", async () => {
  await withCache(async (cache) => {
    const source = join(cache, "source");
    await writeTinyModel(source, TINY);
    const choice = await chooseModel(undefined, () => {}, {
      ...quiet,
      fetch: fakeHub({ dir: source }),
    });
    assertEquals(choice.id, DEFAULT_MODEL);
    assertEquals(choice.dir, join(cache, "hub", DEFAULT_MODEL.replace("/", "--")));
    assert((await Deno.stat(join(choice.dir, "model.safetensors"))).isFile);
  });
});

Deno.test("chooseModel: an explicit --model never falls back", async () => {
  await withCache(async (_cache, logs) => {
    await assertRejects(
      () =>
        chooseModel("acme/missing", (m) => logs.push(m), {
          ...quiet,
          fetch: fakeHub({ offline: true }),
        }),
      (e) => e instanceof ModelResolveError && /cannot download acme\/missing/.test(e.message),
    );
    assert(!logs.some((m) => /DEMO/.test(m)), logs.join("\n"));
    const demo = await chooseModel("demo", (m) => logs.push(m));
    assertEquals(demo.id, "demo");
  });
});

Deno.test("fallbackNotice: several lines, the reason and the way out", () => {
  const notice = fallbackNotice("the network is unavailable (fetch failed)");
  const lines = notice.split("\n");
  assert(lines.length >= 5, notice);
  assertMatch(notice, /the network is unavailable \(fetch failed\)/);
  assertMatch(notice, /--model \/path\/to\/model-dir/);
  assert(lines.every((l) => l.length <= 100), notice);
});
