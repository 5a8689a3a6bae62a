// Where --model finds models other tools fetched: Hugging Face's cache (refs/main → snapshot,
// safetensors directories and GGUF repositories) and Ollama's store (manifest → blob), on
// directories generated here with HF_HOME, HF_HUB_CACHE, OLLAMA_MODELS and HOME pointed at them.

import { join } from "node:path";
import { ModelResolveError } from "../../../engine/sources/resolve_error.ts";
import { resolveModel } from "../../../engine/sources/resolve.ts";
import { parseOllamaName } from "../../../engine/sources/ollama_store.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { encodeGguf, meta } from "../../../engine/formats/gguf_writer.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const quiet = () => {};

/** Runs `fn` with the given environment variables set (or unset), restoring them after. */
async function withEnv(vars: Record<string, string | undefined>, fn: () => Promise<void>) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, value] of Object.entries(v)) {
      if (value === undefined) Deno.env.delete(k);
      else Deno.env.set(k, value);
    }
  };
  apply(vars);
  try {
    await fn();
  } finally {
    apply(saved);
  }
}

/** A repository in HF's cache layout: blobs, a snapshot of symlinks, refs/main. */
async function cacheRepo(hubDir: string, id: string, files: Record<string, Uint8Array>) {
  const repo = join(hubDir, `models--${id.replace("/", "--")}`);
  const snapshot = join(repo, "snapshots", COMMIT);
  await Deno.mkdir(join(repo, "blobs"), { recursive: true });
  await Deno.mkdir(join(repo, "refs"), { recursive: true });
  await Deno.writeTextFile(join(repo, "refs", "main"), COMMIT);
  let n = 0;
  for (const [name, bytes] of Object.entries(files)) {
    const blob = join(repo, "blobs", `blob${n++}`);
    await Deno.writeFile(blob, bytes);
    const link = join(snapshot, name);
    await Deno.mkdir(join(link, ".."), { recursive: true });
    await Deno.symlink(blob, link);
  }
  return snapshot;
}

const tinyGgufBytes = (name: string) =>
  encodeGguf({ metadata: { "general.name": meta.str(name) }, tensors: [] });

Deno.test("Hugging Face cache: safetensors snapshots and GGUF repositories", async (t) => {
  const root = await Deno.makeTempDir({ prefix: "sluice-hfcache-" });
  try {
    const hub = join(root, "hf", "hub");
    const snapshot = await cacheRepo(hub, "org/plain", {
      "config.json": new TextEncoder().encode("{}"),
    });
    const ggufSnap = await cacheRepo(hub, "org/quants-GGUF", {
      "model-Q8_0.gguf": tinyGgufBytes("q8"),
      "model-Q4_K_M.gguf": tinyGgufBytes("q4km"),
      "model-f16-00001-of-00002.gguf": tinyGgufBytes("split"),
      "model-f16-00002-of-00002.gguf": tinyGgufBytes("split, part 2"),
    });
    const splitSnap = await cacheRepo(hub, "org/split-GGUF", {
      "big-Q8_0-00001-of-00003.gguf": tinyGgufBytes("1"),
      "big-Q8_0-00002-of-00003.gguf": tinyGgufBytes("2"),
      "big-Q8_0-00003-of-00003.gguf": tinyGgufBytes("3"),
    });
    await withEnv(
      { HF_HOME: join(root, "hf"), HF_HUB_CACHE: undefined, HUGGINGFACE_HUB_CACHE: undefined },
      async () => {
        await t.step("org/name with config.json is its snapshot directory", async () => {
          assertEquals(await resolveModel("org/plain", quiet), snapshot);
        });
        await t.step("a GGUF repository picks Q4_K_M", async () => {
          assertEquals(
            await resolveModel("org/quants-GGUF", quiet),
            join(ggufSnap, "model-Q4_K_M.gguf"),
          );
        });
        await t.step("org/name:Q8_0 and org/name:file.gguf choose", async () => {
          assertEquals(
            await resolveModel("org/quants-GGUF:q8_0", quiet),
            join(ggufSnap, "model-Q8_0.gguf"),
          );
          assertEquals(
            await resolveModel("org/quants-GGUF:model-Q8_0.gguf", quiet),
            join(ggufSnap, "model-Q8_0.gguf"),
          );
        });
        await t.step("a split model is its first part", async () => {
          assertEquals(
            await resolveModel("org/quants-GGUF:F16", quiet),
            join(ggufSnap, "model-f16-00001-of-00002.gguf"),
          );
          assertEquals(
            await resolveModel("org/split-GGUF", quiet),
            join(splitSnap, "big-Q8_0-00001-of-00003.gguf"),
          );
        });
        await t.step("a missing quantization lists what there is", async () => {
          await assertRejects(
            () => resolveModel("org/quants-GGUF:Q2_K", quiet),
            (e) =>
              e instanceof ModelResolveError && /model-Q4_K_M.gguf, model-Q8_0/.test(e.message),
          );
          await assertRejects(
            () => resolveModel("org/absent:Q2_K", quiet),
            (e) =>
              e instanceof ModelResolveError && /not in the Hugging Face cache/.test(e.message),
          );
        });
      },
    );
    await withEnv({ HF_HOME: undefined, HF_HUB_CACHE: hub }, async () => {
      await t.step("HF_HUB_CACHE names the cache directly", async () => {
        assertEquals(await resolveModel("org/plain", quiet), snapshot);
      });
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("Ollama names map to manifest paths", () => {
  assertEquals(parseOllamaName("llama3.2"), {
    host: "registry.ollama.ai",
    path: ["library", "llama3.2"],
    tag: "latest",
  });
  assertEquals(parseOllamaName("llama3.2:1b"), {
    host: "registry.ollama.ai",
    path: ["library", "llama3.2"],
    tag: "1b",
  });
  assertEquals(parseOllamaName("me/mine:q8"), {
    host: "registry.ollama.ai",
    path: ["me", "mine"],
    tag: "q8",
  });
  assertEquals(parseOllamaName("hf.co/org/repo:Q4_K_M"), {
    host: "hf.co",
    path: ["org", "repo"],
    tag: "Q4_K_M",
  });
  for (const bad of ["../x", "a/../../b:c", "x:../y"]) {
    let threw = false;
    try {
      parseOllamaName(bad);
    } catch (e) {
      threw = e instanceof ModelResolveError;
    }
    assert(threw, `${bad} is refused`);
  }
});

Deno.test("Ollama store: manifest → model blob → a loadable GGUF model", async (t) => {
  const root = await Deno.makeTempDir({ prefix: "sluice-ollama-" });
  try {
    const g = await writeTinyGguf(join(root, "src"), {
      hiddenSize: 32,
      intermediateSize: 64,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      tied: true,
      dtype: "F32",
      seed: 5,
    }, { type: "Q8_0" });
    const models = join(root, "home", ".ollama", "models");
    const bytes = await Deno.readFile(g.path);
    const hex = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))]
      .map((b) => b.toString(16).padStart(2, "0")).join("");
    await Deno.mkdir(join(models, "blobs"), { recursive: true });
    await Deno.writeFile(join(models, "blobs", `sha256-${hex}`), bytes);
    const manifestDir = join(models, "manifests", "registry.ollama.ai", "library", "tiny");
    await Deno.mkdir(manifestDir, { recursive: true });
    await Deno.writeTextFile(
      join(manifestDir, "q8"),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.docker.distribution.manifest.v2+json",
        layers: [
          {
            mediaType: "application/vnd.ollama.image.template",
            digest: `sha256:${"0".repeat(64)}`,
          },
          { mediaType: "application/vnd.ollama.image.model", digest: `sha256:${hex}` },
        ],
      }),
    );
    await withEnv({ OLLAMA_MODELS: undefined, HOME: join(root, "home") }, async () => {
      await t.step("ollama:tiny:q8 under ~/.ollama/models", async () => {
        const path = await resolveModel("ollama:tiny:q8", quiet);
        assertEquals(path, join(models, "blobs", `sha256-${hex}`));
        const files = await openModelDir(path);
        assertEquals(files.config.hiddenSize, 32);
        assert(files.gguf, "the blob opens as a GGUF model");
      });
      await t.step("a missing tag says how to pull it", async () => {
        await assertRejects(
          () => resolveModel("ollama:tiny", quiet),
          (e) => e instanceof ModelResolveError && /ollama pull tiny/.test(e.message),
        );
      });
    });
    await withEnv({ OLLAMA_MODELS: models, HOME: "/nonexistent" }, async () => {
      await t.step("OLLAMA_MODELS names the store", async () => {
        assertEquals(
          await resolveModel("ollama:tiny:q8", quiet),
          join(models, "blobs", `sha256-${hex}`),
        );
      });
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
