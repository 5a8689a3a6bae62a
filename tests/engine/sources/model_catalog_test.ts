// The models a server offers and their ids: --model arguments (NAME=SOURCE names one; a hub id on
// the right stays an alias), a --models-dir's directories and .gguf files (split parts after the
// first left out), the Hugging Face cache's repositories (org/name) and Ollama's manifests
// (name:tag, namespace and host kept where they are not Ollama's), first one of an id winning.

import { join } from "node:path";
import {
  catalogModels,
  modelArgId,
  modelArgSource,
} from "../../../engine/sources/model_catalog.ts";
import { assertEquals } from "../../helpers/testing.ts";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";

async function write(path: string, bytes = 1) {
  await Deno.mkdir(join(path, ".."), { recursive: true });
  await Deno.writeFile(path, new Uint8Array(bytes));
}

async function hfRepo(cache: string, id: string, files: Record<string, number>) {
  const repo = join(cache, `models--${id.replace("/", "--")}`);
  for (const [name, bytes] of Object.entries(files)) {
    await write(join(repo, "snapshots", COMMIT, name), bytes);
  }
  await write(join(repo, "refs", "main"));
  await Deno.writeTextFile(join(repo, "refs", "main"), COMMIT);
}

async function ollamaModel(store: string, path: string[], tag: string, blob: boolean) {
  // Each model its own blob: a missing one must not be found under another's digest.
  const digest = [...path, tag].join("/").split("").reduce(
    (h, ch) => (Math.imul(h, 31) + ch.charCodeAt(0)) >>> 0,
    7,
  ).toString(16).padStart(8, "0").repeat(8);
  const manifest = join(store, "manifests", ...path, tag);
  await write(manifest);
  await Deno.writeTextFile(
    manifest,
    JSON.stringify({
      layers: [{ mediaType: "application/vnd.ollama.image.model", digest: `sha256:${digest}` }],
    }),
  );
  if (blob) await write(join(store, "blobs", `sha256-${digest}`), 7);
}

Deno.test("model catalog: --model, --models-dir, the Hugging Face cache and Ollama's store", async () => {
  const root = await Deno.makeTempDir({ prefix: "sluice-catalog-" });
  try {
    const dir = join(root, "models");
    await write(join(dir, "qwen-chat", "config.json"));
    await write(join(dir, "qwen-chat", "model.safetensors"), 300);
    await write(join(dir, "notes", "README.md")); // no config.json: not a model
    await write(join(dir, "smol-Q8_0.gguf"), 50);
    await write(join(dir, "big-00001-of-00002.gguf"), 20);
    await write(join(dir, "big-00002-of-00002.gguf"), 20);
    const cache = join(root, "hf");
    await hfRepo(cache, "org/embed", { "config.json": 1, "model.safetensors": 40 });
    await hfRepo(cache, "org/quants", { "m-Q4_K_M.gguf": 9, "m-Q8_0.gguf": 12 });
    await hfRepo(cache, "org/empty", { "README.md": 1 });
    const store = join(root, "ollama");
    await ollamaModel(store, ["registry.ollama.ai", "library", "llama3.2"], "1b", true);
    await ollamaModel(store, ["registry.ollama.ai", "someone", "tool"], "latest", true);
    await ollamaModel(store, ["hf.co", "org", "repo"], "Q4_K_M", true);
    await ollamaModel(store, ["registry.ollama.ai", "library", "broken"], "latest", false);

    const chosen = join(root, "chosen");
    await write(join(chosen, "config.json"));
    const entries = await catalogModels({
      models: [
        { arg: "chat=Qwen/Qwen3-0.6B", dir: chosen },
        { arg: join(dir, "qwen-chat"), dir: join(dir, "qwen-chat") },
      ],
      modelsDir: dir,
      discover: true,
      hfCache: cache,
      ollamaStore: store,
    });
    assertEquals(
      entries.map((e) => [e.id, e.aliases, e.sizeBytes]),
      [
        ["chat", ["Qwen/Qwen3-0.6B"], 0],
        [join(dir, "qwen-chat"), [], 300],
        ["big-00001-of-00002", [], 20],
        ["qwen-chat", [], 300],
        ["smol-Q8_0", [], 50],
        ["org/embed", [], 40],
        ["org/quants", [], 9],
        ["hf.co/org/repo:Q4_K_M", ["ollama:hf.co/org/repo:Q4_K_M"], 7],
        ["llama3.2:1b", ["ollama:llama3.2:1b"], 7],
        ["someone/tool:latest", ["ollama:someone/tool:latest"], 7],
      ],
    );
    // Without discovery, only the arguments and the folder.
    const plain = await catalogModels({ models: [], modelsDir: dir, discover: false });
    assertEquals(plain.map((e) => e.id), ["big-00001-of-00002", "qwen-chat", "smol-Q8_0"]);
    assertEquals([modelArgId("a=b/c"), modelArgSource("a=b/c")], ["a", "b/c"]);
    assertEquals([modelArgId("./dir"), modelArgSource("./dir")], ["./dir", "./dir"]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
