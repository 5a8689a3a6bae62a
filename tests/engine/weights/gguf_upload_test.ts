// How GGUF tensors of different types are stored when the forward pass fuses them: q, k and v of
// two types keep each type, as one run of row parts per type, each part naming its format (so
// each runs its own dequantizing kernel); gate and up of two types fall back to the GPU's float
// dtype, since the SwiGLU kernel reads both halves from one part in one format. The numbers such
// matrices give are checked in gguf_model_test.ts; this checks that no fallback hides behind them.

import { openModelDir } from "../../../engine/formats/open_model.ts";
import type { GgmlTypeName } from "../../../engine/formats/gguf.ts";
import { loadWeights } from "../../../engine/weights/load_weights.ts";
import type { GpuMatrix } from "../../../engine/weights/model_weights.ts";
import { assertEquals } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";

const SPEC = {
  hiddenSize: 256,
  intermediateSize: 512,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 64,
  tied: false,
  dtype: "F32" as const,
  seed: 11,
};

/** Each part's [rowStart, rows, format]. */
const layoutOf = (m: GpuMatrix) => m.parts.map((p) => [p.rowStart, p.rows, p.format ?? m.format]);

Deno.test("gguf upload: mixed q/k/v keep their types, mixed gate/up become float", async () => {
  const gpu = await testGpu();
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-upload-" });
  try {
    // Layer 1: q Q4_K, k Q5_0, v Q6_K (three runs); gate Q4_K with up Q6_K.
    const typeOf = (name: string): GgmlTypeName | undefined =>
      ({
        "blk.1.attn_k.weight": "Q5_0",
        "blk.1.attn_v.weight": "Q6_K",
        "blk.1.ffn_up.weight": "Q6_K",
      } as Record<string, GgmlTypeName>)[name];
    const g = await writeTinyGguf(dir, SPEC, { type: "Q4_K", typeOf });
    const w = await loadWeights(gpu, await openModelDir(g.path));
    const q = 4 * 64, kv = 2 * 64;
    // Layer 0: one type, one run, the format on the matrix.
    assertEquals(layoutOf(w.layers[0].qkv), [[0, q + 2 * kv, "q4_k"]]);
    assertEquals(w.layers[0].qkv.format, "q4_k");
    assertEquals(w.layers[0].gateUp.format, "q4_k");
    // Layer 1: a run per type, in row order.
    assertEquals(layoutOf(w.layers[1].qkv), [[0, q, "q4_k"], [q, kv, "q5_0"], [
      q + kv,
      kv,
      "q6_k",
    ]]);
    assertEquals(w.layers[1].gateUp.format, gpu.f16 ? "f16" : "f32");
    assertEquals(w.layers[1].down.format, "q4_k");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
