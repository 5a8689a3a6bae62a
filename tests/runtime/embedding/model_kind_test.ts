// How a decoder model directory's kind is told: a sentence-transformers Pooling module, the
// architecture's name, the model card's pipeline_tag, and last the directory's name.

import { join } from "node:path";
import { decoderModelKind, pipelineTag } from "../../../runtime/embedding/model_kind.ts";
import { assertEquals } from "../../helpers/testing.ts";

async function modelDir(
  name: string,
  files: Record<string, unknown>,
): Promise<{ dir: string; root: string }> {
  const root = await Deno.makeTempDir({ prefix: "sluice-kind-" });
  const dir = join(root, name);
  await Deno.mkdir(dir);
  for (const [path, content] of Object.entries(files)) {
    await Deno.mkdir(join(dir, path, ".."), { recursive: true });
    const text = typeof content === "string" ? content : JSON.stringify(content);
    await Deno.writeTextFile(join(dir, path), text);
  }
  return { dir, root };
}

const CAUSAL = { "config.json": { architectures: ["Qwen3ForCausalLM"], model_type: "qwen3" } };
const POOLING = {
  "modules.json": [
    { path: "", type: "sentence_transformers.models.Transformer" },
    { path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
  ],
  "1_Pooling/config.json": { pooling_mode_lasttoken: true },
};

Deno.test("decoderModelKind: pooling config, architecture, pipeline_tag, then the name", async () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["model", { ...CAUSAL, ...POOLING }, "embedding"],
    ["model", { "config.json": { architectures: ["Qwen3Embedding"] } }, "embedding"],
    ["model", { "config.json": { architectures: ["Qwen3ForReranking"] } }, "reranker"],
    ["model", {
      ...CAUSAL,
      "README.md": "---\nlicense: apache-2.0\npipeline_tag: text-ranking\n---\n# x",
    }, "reranker"],
    [
      "model",
      { ...CAUSAL, "README.md": "---\npipeline_tag: feature-extraction\n---\n" },
      "embedding",
    ],
    ["model", { ...CAUSAL, "README.md": "---\npipeline_tag: text-generation\n---\n" }, "chat"],
    ["Qwen3-Reranker-0.6B", CAUSAL, "reranker"],
    ["Qwen3-Embedding-0.6B", CAUSAL, "embedding"],
    // What the files declare wins over the name.
    ["Qwen3-Reranker-copy", { ...CAUSAL, ...POOLING }, "embedding"],
    ["Qwen3-0.6B", CAUSAL, "chat"],
    [
      "Qwen3-0.6B",
      { ...CAUSAL, "README.md": "pipeline_tag: text-ranking (not front matter)" },
      "chat",
    ],
  ];
  for (const [name, files, kind] of cases) {
    const { dir, root } = await modelDir(name, files);
    try {
      assertEquals(await decoderModelKind(dir), kind, `${name} ${JSON.stringify(files)}`);
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  }
});

Deno.test("pipelineTag reads the front matter only", () => {
  assertEquals(pipelineTag("---\npipeline_tag: 'text-ranking'\ntags: [a]\n---\n"), "text-ranking");
  assertEquals(pipelineTag("# no front matter\npipeline_tag: text-ranking\n"), null);
  assertEquals(pipelineTag(null), null);
});
