// --model resolution: demo, local directories, hub downloads through a stubbed fetch (never the
// network) and their failures.

import { join } from "node:path";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { SMALL, tempDir } from "../../helpers/model_files.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { demoModelDir } from "../../../engine/sources/demo.ts";
import { DEFAULT_MODEL } from "../../../engine/sources/default_model.ts";
import { resolveModel } from "../../../engine/sources/resolve.ts";
import { ModelResolveError } from "../../../engine/sources/resolve_error.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";

/** Serves a model directory's files as huggingface.co would, counting requests. */
async function fakeHub(dir: string, id: string, hide: string[] = []) {
  const files = new Map<string, Uint8Array<ArrayBuffer>>();
  for await (const entry of Deno.readDir(dir)) {
    if (!hide.includes(entry.name)) {
      files.set(entry.name, await Deno.readFile(join(dir, entry.name)));
    }
  }
  const requests: string[] = [];
  const fetchStub = (input: string | URL | Request): Promise<Response> => {
    const url = String(input instanceof Request ? input.url : input);
    requests.push(url);
    const prefix = `https://huggingface.co/${id}/resolve/main/`;
    const body = url.startsWith(prefix) ? files.get(url.slice(prefix.length)) : undefined;
    if (!body) return Promise.resolve(new Response("Entry not found", { status: 404 }));
    return Promise.resolve(
      new Response(body, { headers: { "content-length": String(body.length) } }),
    );
  };
  return { fetch: fetchStub as typeof fetch, requests };
}

Deno.test("resolveModel: demo, local directories, hub downloads and their failures", async (t) => {
  const cache = await tempDir();
  const source = await tempDir();
  const logs: string[] = [];
  const log = (m: string) => logs.push(m);
  const saved = Deno.env.get("SLUICE_CACHE");
  Deno.env.set("SLUICE_CACHE", cache);
  try {
    assertEquals(DEFAULT_MODEL, "HuggingFaceTB/SmolLM2-135M-Instruct");

    await t.step("demo is built once into the cache and says it is random", async () => {
      const dir = await resolveModel("demo", log);
      assertEquals(dir, join(cache, "demo-v1"));
      assert(logs.some((m) => /RANDOM/.test(m)), "demo must announce itself loudly");
      const files = await openModelDir(dir);
      assertEquals([files.config.hiddenSize, files.config.numLayers, files.config.numKvHeads], [
        256,
        4,
        2,
      ]);
      const before = (await Deno.stat(join(dir, "model.safetensors"))).mtime;
      assertEquals(await demoModelDir(), dir);
      assertEquals((await Deno.stat(join(dir, "model.safetensors"))).mtime, before);
      const leftovers = [...Deno.readDirSync(cache)].map((e) => e.name);
      assertEquals(leftovers, ["demo-v1"]);
    });

    await t.step("an existing directory is used as is", async () => {
      assertEquals(await resolveModel(source, log), source);
    });

    await t.step("a path that does not exist is not mistaken for a hub id", async () => {
      await assertRejects(
        () => resolveModel("./no/such/model/dir", log),
        (e) => e instanceof ModelResolveError && /no such directory.*--model demo/.test(e.message),
      );
    });

    await writeTinyModel(source, { ...SMALL, shards: 2 });

    await t.step("offline: a clear error that suggests a local directory or demo", async () => {
      let calls = 0;
      const offline = (() => {
        calls++;
        return Promise.reject(new TypeError("error sending request: dns error"));
      }) as typeof fetch;
      await assertRejects(
        () => resolveModel("acme/offline-model", log, { fetch: offline, onProgress: () => {} }),
        (e) =>
          e instanceof ModelResolveError && /network is unavailable/.test(e.message) &&
          /--model \/path\/to\/dir/.test(e.message) && /--model demo/.test(e.message),
      );
      assertEquals(calls, 1);
      assertEquals([...Deno.readDirSync(join(cache, "hub"))], [], "no partial download is left");
    });

    await t.step("HTTP errors name the status", async () => {
      const hub = await fakeHub(source, "acme/other");
      await assertRejects(
        () => resolveModel("acme/missing", log, { fetch: hub.fetch, onProgress: () => {} }),
        (e) =>
          e instanceof ModelResolveError && /HTTP 404/.test(e.message) &&
          /config.json/.test(e.message),
      );
    });

    await t.step("a sharded model downloads, lands in the cache, and is reused", async () => {
      const id = "acme/tiny-sharded";
      const hub = await fakeHub(source, id);
      const progress: { file: string; doneBytes: number; totalBytes: number | null }[] = [];
      const dir = await resolveModel(id, log, {
        fetch: hub.fetch,
        onProgress: (p) => progress.push(p),
      });
      assertEquals(dir, join(cache, "hub", "acme--tiny-sharded"));
      const files = await openModelDir(dir);
      assertEquals(files.config.numLayers, SMALL.numLayers);
      for (const name of ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]) {
        assertEquals(await Deno.readFile(join(dir, name)), await Deno.readFile(join(source, name)));
        const size = (await Deno.stat(join(source, name))).size;
        assert(
          progress.some((p) => p.file === name && p.doneBytes === size && p.totalBytes === size),
        );
      }
      assert(
        hub.requests.some((u) => u.endsWith("/model.safetensors")),
        "tries the single file first",
      );
      const count = hub.requests.length;
      assertEquals(await resolveModel(id, log, { fetch: hub.fetch }), dir);
      assertEquals(hub.requests.length, count, "a cached model is not fetched again");
    });

    await t.step("a single-file model without generation_config.json", async () => {
      const single = await tempDir();
      try {
        await writeTinyModel(single, SMALL);
        const hub = await fakeHub(single, "acme/tiny", ["generation_config.json"]);
        const dir = await resolveModel("acme/tiny", log, {
          fetch: hub.fetch,
          onProgress: () => {},
        });
        const files = await openModelDir(dir);
        assertEquals(files.generationConfig, null);
      } finally {
        await Deno.remove(single, { recursive: true });
      }
    });
  } finally {
    if (saved === undefined) Deno.env.delete("SLUICE_CACHE");
    else Deno.env.set("SLUICE_CACHE", saved);
    await Deno.remove(cache, { recursive: true });
    await Deno.remove(source, { recursive: true });
  }
});
