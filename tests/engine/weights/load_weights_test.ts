// loadWeights refuses a checkpoint holding NaN or Inf, naming the file and the tensor, in each
// dtype it loads (the check runs on the raw chunks as they stream to the GPU).

import { ModelLoadError } from "../../../engine/model/errors.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import type { StDtype } from "../../../engine/formats/safetensors.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { loadWeights } from "../../../engine/weights/load_weights.ts";
import { assert, assertRejects } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";

const SPEC = {
  hiddenSize: 32,
  intermediateSize: 48,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  tied: false,
  seed: 5,
};

/** Little-endian bytes of one element of `dtype`. */
function elementBytes(value: number, dtype: StDtype): Uint8Array {
  const out = new Uint8Array(dtype === "F32" ? 4 : 2);
  const view = new DataView(out.buffer);
  if (dtype === "F32") view.setFloat32(0, value, true);
  else if (Number.isNaN(value)) view.setUint16(0, dtype === "F16" ? 0x7e00 : 0x7fc0, true);
  else view.setUint16(0, (dtype === "F16" ? 0x7c00 : 0x7f80) | (value < 0 ? 0x8000 : 0), true);
  return out;
}

Deno.test("weights: NaN or Inf in a tensor fails the load and names it", async () => {
  const gpu = await testGpu();
  const cases: [StDtype, string, number, number][] = [
    ["F16", "model.layers.1.mlp.down_proj.weight", 7, NaN],
    ["BF16", "model.layers.0.self_attn.k_proj.weight", 0, Infinity],
    ["F32", "lm_head.weight", -1, -Infinity], // the very last element
    ["F32", "model.norm.weight", 3, NaN],
  ];
  for (const [dtype, name, at, value] of cases) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-weights-" });
    try {
      await writeTinyModel(dir, { ...SPEC, dtype });
      const t = (await openModelDir(dir)).tensors.get(name)!;
      const size = dtype === "F32" ? 4 : 2;
      const index = at >= 0 ? at : t.byteLength / size + at;
      const file = await Deno.open(t.file, { write: true });
      await file.seek(t.dataOffset + index * size, Deno.SeekMode.Start);
      await file.write(elementBytes(value, dtype));
      file.close();
      await assertRejects(
        async () => loadWeights(gpu, await openModelDir(dir)),
        (e: Error) => {
          assert(e instanceof ModelLoadError, String(e));
          assert(e.file === t.file, e.message);
          assert(e.problem.includes(`"${name}"`) && /NaN or Inf/.test(e.problem), e.message);
          assert(e.problem.includes(`element ${index} `), e.message);
          return true;
        },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("weights: a finite checkpoint loads", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-weights-" });
  try {
    await writeTinyModel(dir, { ...SPEC, dtype: "BF16" });
    const weights = await loadWeights(await testGpu(), await openModelDir(dir));
    assert(weights.bytes > 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
