// Gemma 2 end to end, as gemma3_test.ts runs Gemma 3: a generated model written as a Hugging Face
// directory (F32 safetensors, on both dtype paths) and as GGUF (F32, F16, Q8_0 and llama.cpp's
// Q4_K_M mix), loaded through Engine.load like --model, each within a bound of the float64
// reference at every prompt position and through a greedy decode, with the reference's greedy
// tokens.
//
// A shape where every option bites: 4 layers, even ones local (window 8 against a 22-token prompt)
// and odd ones global, one RoPE base; soft caps small enough to change the result: the attention
// scores here spread about ±1, so a cap of 1 bends most of them (real Gemma 2: 50), and the logits
// spread about ±4 (tiny_model.ts), so a cap of 8 bends the largest (real: 30). A head_dim of 128
// with 4 heads over a hidden size of 256, 2 KV heads; tied embeddings scaled by √256 on the way in;
// GeGLU; no q/k norms; the four norms of each layer, stored as w (safetensors) and as 1 + w (GGUF).
// Dropping either cap on the GPU (attention.wgsl's, or the logits' bias_act pass) fails every run.
//
// Bounds as architectures_test.ts: f32 path 2e-4, f16 path 2e-2 of the largest |logit|.

import { openModelDir } from "../../engine/formats/open_model.ts";
import { type GgufFile, type GgufTensor, readGguf } from "../../engine/formats/gguf.ts";
import { ggufLlamaConfig } from "../../engine/formats/gguf_config.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { formatRuns, writeTinyGgufSet } from "../helpers/tiny_gguf.ts";
import { checkModel, withCheckEngine } from "../helpers/model_check.ts";

const WINDOW = 8;

const SPEC: Omit<TinyModelSpec, "seed"> = {
  architecture: "gemma2",
  hiddenSize: 256,
  intermediateSize: 256,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 128,
  tied: true,
  dtype: "F32",
  slidingWindow: WINDOW,
  attnSoftcap: 1,
  finalSoftcap: 8,
};

const BOUND = { f32: 2e-4, f16: 2e-2 };
const CHECK = { prompt: 22, generated: 4 };

Deno.test("Gemma 2 GGUF metadata: llama.cpp's defaults where keys are absent, the 27B's score scale", async () => {
  // Only the metadata and token_embd's dims are read for the config.
  const file = (layers: number, extra: Record<string, number>): GgufFile => ({
    path: "gemma2.gguf",
    version: 3,
    metadata: {
      "general.architecture": "gemma2",
      "gemma2.block_count": layers,
      "gemma2.embedding_length": 4608,
      "gemma2.feed_forward_length": 36864,
      "gemma2.attention.head_count": 32,
      "gemma2.attention.head_count_kv": 16,
      "gemma2.attention.key_length": 128,
      "gemma2.attention.value_length": 128,
      ...extra,
    },
    tensors: new Map([["token_embd.weight", { dims: [4608, 256000] } as GgufTensor]]),
    dataStart: 0,
    alignment: 32,
  });
  const bare = await ggufLlamaConfig(file(46, {}));
  assertEquals([bare.attnSoftcap, bare.finalSoftcap], [50, 30]);
  assertEquals(bare.localLayers?.window, 4096);
  assertEquals(bare.localLayers?.layers.slice(0, 4), [true, false, true, false]);
  // The 27B (46 layers): 1/√(4608 / 32), its query_pre_attn_scalar of 144; the others 1/√128.
  assertEquals(bare.attentionScale, 1 / 12);
  const nine = await ggufLlamaConfig(file(42, {
    "gemma2.attn_logit_softcapping": 20,
    "gemma2.final_logit_softcapping": 10,
    "gemma2.attention.sliding_window": 512,
  }));
  assertEquals([nine.attnSoftcap, nine.finalSoftcap], [20, 10]);
  assertEquals(nine.localLayers?.window, 512);
  assertEquals(nine.attentionScale, 1 / Math.sqrt(128));
});

Deno.test("Gemma 2 in both formats: logits and greedy tokens match the float64 reference", async (t) => {
  const seed = testSeed();
  const def = await testGpu();
  const f32 = await testGpuF32();
  const dir = await Deno.makeTempDir({ prefix: "sluice-gemma2-" });
  try {
    const spec = { ...SPEC, seed };
    const files = await writeTinyGgufSet(dir, spec);
    const f32File = files.f32;
    const gguf = await readGguf(files.q4km.path);
    assertEquals(gguf.metadata["general.architecture"], "gemma2");
    assertEquals(gguf.metadata["gemma2.attn_logit_softcapping"], 1);
    assertEquals(gguf.metadata["gemma2.final_logit_softcapping"], 8);
    const types = new Set([...gguf.tensors.values()].map((x) => x.typeName));
    for (const type of ["Q4_K", "Q6_K"]) assert(types.has(type), `Q4_K_M: no ${type}`);
    assert(!gguf.tensors.has("blk.0.attn_q_norm.weight"), "gemma2 has no q norm");
    assert(gguf.tensors.has("blk.0.post_ffw_norm.weight"), "gemma2 GGUF lacks post_ffw_norm");

    const source = await openModelDir(f32File.sourceDir);
    const cfg = source.config;
    assertEquals(cfg.architecture, "gemma2");
    assertEquals(cfg.localLayers?.layers.map((local) => local ? 1 : 0).join(""), "1010");
    assertEquals(cfg.localLayers?.window, WINDOW);
    assertEquals([cfg.attnSoftcap, cfg.finalSoftcap, cfg.qkNorm], [1, 8, false]);
    const fromGguf = (await openModelDir(f32File.path)).config;
    assertEquals(fromGguf.normOffset, 0);
    assertEquals(fromGguf.localLayers, cfg.localLayers);
    assertEquals(fromGguf.attentionScale, cfg.attentionScale);
    assertEquals([fromGguf.attnSoftcap, fromGguf.finalSoftcap], [1, 8]);

    const runs = formatRuns(files, { f32, default: def });
    for (const run of runs) {
      const label = run.gpu.f16 ? "f16" : "f32";
      await t.step(`gemma2, ${run.name} (${label})`, async () => {
        await withCheckEngine({ modelDir: run.model, gpu: run.gpu, gpuKvMb: 4 }, async (engine) => {
          assertEquals(engine.info.layerWindows, [WINDOW, 0, WINDOW, 0]);
          const reference = await openModelDir(run.reference);
          await checkModel(
            engine,
            reference,
            BOUND[label],
            `gemma2 ${run.name} ${label} seed ${seed}`,
            CHECK,
          );
        });
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
