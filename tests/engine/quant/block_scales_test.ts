// The block-scale check: clean quantized bytes pass; a NaN or Inf in any scale of any block (d,
// and dmin where the format has one) is found at that block, in every format; and a GGUF file
// whose quantized tensor holds one fails the load, naming the tensor.

import { ModelLoadError } from "../../../engine/model/errors.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import type { GgmlTypeName } from "../../../engine/formats/gguf.ts";
import { firstNonFiniteBlock } from "../../../engine/quant/block_scales.ts";
import {
  QUANT_FORMATS,
  QUANT_TYPES,
  quantize,
  type QuantType,
} from "../../../engine/quant/formats.ts";
import { loadWeights } from "../../../engine/weights/load_weights.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";

/** Scales' byte offsets as the formats' own decoders read them (independent of the check's). */
const SCALES: Record<string, number[]> = {
  q8_0: [0],
  q4_0: [0],
  q4_k: [0, 2],
  q6_k: [208],
  q4_1: [0, 2],
  q5_0: [0],
  q5_1: [0, 2],
  q5_k: [0, 2],
  q3_k: [108],
  iq4_nl: [0],
  iq4_xs: [0],
};
const NAN = [0x00, 0x7e];
const NEG_INF = [0x00, 0xfc];

Deno.test("block scales: a NaN or Inf scale is found at its block, in every format", () => {
  for (const type of QUANT_TYPES) {
    const { blockElems, blockBytes } = QUANT_FORMATS[type];
    const blocks = 5;
    const values = Float32Array.from({ length: blocks * blockElems }, (_, i) => Math.sin(i) * 3);
    const raw = quantize(type, values);
    assertEquals(raw.byteLength, blocks * blockBytes);
    assertEquals(firstNonFiniteBlock(raw, type), -1, `${type}: clean`);
    for (const offset of SCALES[type]) {
      for (const [block, bits] of [[3, NAN], [0, NEG_INF], [4, NAN]] as const) {
        const bad = raw.slice();
        bad.set(bits, block * blockBytes + offset);
        assertEquals(firstNonFiniteBlock(bad, type), block, `${type} @${offset} block ${block}`);
      }
    }
  }
});

Deno.test("block scales: a GGUF whose quantized tensor has a NaN scale fails the load", async () => {
  const gpu = await testGpu();
  const spec = {
    hiddenSize: 256,
    intermediateSize: 512,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    tied: true,
    dtype: "F32" as const,
    seed: 3,
  };
  for (const type of ["Q8_0", "Q4_K", "Q5_0", "Q3_K", "IQ4_XS"] as GgmlTypeName[]) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-block-scales-" });
    try {
      const g = await writeTinyGguf(dir, spec, { type });
      const files = await openModelDir(g.path);
      const t = files.gguf!.tensors.get("blk.0.ffn_down.weight")!;
      assertEquals(t.typeName, type);
      const quant = type.toLowerCase() as QuantType;
      const { blockBytes, blockElems } = QUANT_FORMATS[quant];
      const block = 7;
      const file = await Deno.open(t.file, { write: true });
      await file.seek(t.dataOffset + block * blockBytes + SCALES[quant][0], Deno.SeekMode.Start);
      await file.write(new Uint8Array(NAN));
      file.close();
      await assertRejects(
        async () => loadWeights(gpu, await openModelDir(g.path)),
        (e: Error) => {
          assert(e instanceof ModelLoadError, String(e));
          assert(e.problem.includes('"blk.0.ffn_down.weight"'), e.message);
          assert(/NaN or Inf/.test(e.problem), e.message);
          assert(e.problem.includes(`element ${block * blockElems} `), e.message);
          return true;
        },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
