// GGUF files: the header and metadata of versions 2 and 3, the llama config they give, the tensors
// a model must have, and friendly errors for what Sluice cannot load.

import { join } from "node:path";
import { readGguf } from "../../../engine/formats/gguf.ts";
import { ModelLoadError } from "../../../engine/model/errors.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { ropeInvFreq } from "../../../engine/model/rope_freqs.ts";
import type { TinyModelSpec } from "../../../engine/sources/tiny_model.ts";
import { unpermuteRows } from "../../../engine/formats/rope_permutation.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";
import { encodeGguf, meta, writeGguf } from "../../../engine/formats/gguf_writer.ts";
import { permuteRows } from "../../../engine/formats/rope_permutation.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";

const SPEC: TinyModelSpec = {
  hiddenSize: 64,
  intermediateSize: 96,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  tied: true,
  dtype: "F32",
  seed: 7,
};

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function loadError(file: string, problem: RegExp) {
  return (e: unknown) => {
    assert(e instanceof ModelLoadError, `expected ModelLoadError, got ${e}`);
    assertEquals(e.file, file);
    assert(problem.test(e.problem), `problem "${e.problem}" does not match ${problem}`);
    return true;
  };
}

for (const version of [2, 3] as const) {
  Deno.test(`GGUF v${version}: metadata, tensor infos and data offsets`, async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, "x.gguf");
      const a = new Uint8Array(4 * 6).map((_, i) => i);
      const b = new Uint8Array(34 * 2).map((_, i) => 255 - i);
      await writeGguf(path, {
        version,
        alignment: 64,
        metadata: {
          "general.architecture": meta.str("llama"),
          "llama.block_count": meta.u32(3),
          "llama.rope.freq_base": meta.f32(500000),
          "some.count": meta.u64(2 ** 40),
          "tokenizer.ggml.tokens": meta.strs(["a", "ü", "<s>"]),
          "tokenizer.ggml.scores": meta.f32s([0, -1.5, -2]),
          "flag": meta.bool(true),
        },
        tensors: [
          { name: "a", ggmlType: 0, dims: [3, 2], data: a },
          { name: "b", ggmlType: 8, dims: [64], data: b },
        ],
      });
      const g = await readGguf(path);
      assertEquals(g.version, version);
      assertEquals(g.alignment, 64);
      assertEquals(g.dataStart % 64, 0);
      assertEquals(g.metadata["llama.block_count"], 3);
      assertEquals(g.metadata["llama.rope.freq_base"], 500000);
      assertEquals(Number(g.metadata["some.count"]), 2 ** 40);
      assertEquals(g.metadata["tokenizer.ggml.tokens"], ["a", "ü", "<s>"]);
      assertEquals(g.metadata["tokenizer.ggml.scores"], [0, -1.5, -2]);
      assertEquals(g.metadata["flag"], true);
      const ta = g.tensors.get("a")!, tb = g.tensors.get("b")!;
      assertEquals([ta.typeName, ta.dims, ta.byteLength], ["F32", [3, 2], 24]);
      assertEquals([tb.typeName, tb.dims, tb.byteLength], ["Q8_0", [64], 68]);
      assertEquals(tb.dataOffset - ta.dataOffset, 64);
      const bytes = await Deno.readFile(path);
      assertEquals(bytes.subarray(ta.dataOffset, ta.dataOffset + 24), a);
      assertEquals(bytes.subarray(tb.dataOffset, tb.dataOffset + 68), b);
    });
  });
}

Deno.test("a truncated or foreign file is a ModelLoadError naming the file", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "cut.gguf");
    const whole = encodeGguf({
      metadata: { "general.architecture": meta.str("llama") },
      tensors: [{ name: "w", ggmlType: 0, dims: [256], data: new Uint8Array(1024) }],
    });
    await Deno.writeFile(path, whole.subarray(0, whole.length - 100));
    await assertRejects(() => readGguf(path), loadError(path, /truncated/));
    await Deno.writeFile(path, new TextEncoder().encode("not a gguf at all"));
    await assertRejects(() => readGguf(path), loadError(path, /not a valid GGUF/));
    await assertRejects(
      () => readGguf(join(dir, "none.gguf")),
      loadError(join(dir, "none.gguf"), /missing/),
    );
  });
});

Deno.test("the RoPE row permutation is undone exactly", () => {
  const heads = 3, group = 8, cols = 5;
  const values = Float64Array.from({ length: heads * group * cols }, (_, i) => i);
  const permuted = new Uint8Array(new Float64Array(permuteRows(values, heads, group, cols)).buffer);
  const back = unpermuteRows(permuted, heads, group, cols * 8);
  assertEquals(new Float64Array(back.buffer), values);
});

Deno.test("config from llama, qwen2 and qwen3 metadata: GQA, head dim, rope, tied output, family", async (t) => {
  const cases: { name: string; spec: TinyModelSpec }[] = [
    { name: "GQA, tied", spec: SPEC },
    { name: "untied, explicit head dim", spec: { ...SPEC, tied: false, headDim: 32 } },
    {
      name: "linear rope scaling",
      spec: { ...SPEC, ropeScaling: { type: "linear", factor: 4 } },
    },
    {
      name: "llama3 rope scaling (rope_freqs)",
      spec: {
        ...SPEC,
        ropeTheta: 500000,
        ropeScaling: {
          type: "llama3",
          factor: 8,
          lowFreqFactor: 1,
          highFreqFactor: 4,
          originalMaxPositionEmbeddings: 64,
        },
      },
    },
    { name: "qwen2 (biases)", spec: { ...SPEC, architecture: "qwen2", tied: false } },
    { name: "qwen3 (q/k norms, head dim)", spec: { ...SPEC, architecture: "qwen3", headDim: 48 } },
    // Written as llama.cpp writes Mistral: arch "llama" with llama.attention.sliding_window.
    { name: "mistral (window)", spec: { ...SPEC, architecture: "mistral", slidingWindow: 16 } },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      await withTempDir(async (dir) => {
        const g = await writeTinyGguf(dir, c.spec, { type: "F16", version: 2 });
        const want = (await openModelDir(g.sourceDir)).config;
        const got = await openModelDir(g.path);
        const { ropeScaling: gotScaling, ...gotRest } = got.config;
        const { ropeScaling: wantScaling, ...wantRest } = want;
        assertEquals({ ...gotRest, rmsNormEps: want.rmsNormEps }, {
          ...wantRest,
          eosTokenIds: [2],
          // float32 metadata
          ropeTheta: Math.fround(want.ropeTheta),
        });
        assert(Math.abs(got.config.rmsNormEps - want.rmsNormEps) < 1e-9);
        if (wantScaling?.type === "llama3") assertEquals(gotScaling?.type, "freq_factors");
        else assertEquals(gotScaling, wantScaling);
        const a = ropeInvFreq(got.config), b = ropeInvFreq(want);
        a.forEach((x, i) => assert(Math.abs(x - b[i]) <= 1e-6 * b[i], `inv freq ${i}`));
        assert(got.gguf, "a GGUF model carries its file");
      });
    });
  }
});

Deno.test("unsupported tensor types, architectures and shapes are named", async (t) => {
  await withTempDir(async (dir) => {
    const g = await writeTinyGguf(dir, SPEC, { type: "F32" });
    const original = await readGguf(g.path);
    const bytes = await Deno.readFile(g.path);
    const rewrite = async (edit: (b: Uint8Array) => void) => {
      const copy = bytes.slice();
      edit(copy);
      const path = join(dir, "edited.gguf");
      await Deno.writeFile(path, copy);
      return path;
    };
    /** Offset of the u32 type field of tensor `name` in the header. */
    const typeField = (name: string) => {
      const key = new TextEncoder().encode(name);
      for (let i = 0; i < bytes.length; i++) {
        if (key.every((k, j) => bytes[i + j] === k)) {
          const dims = original.tensors.get(name)!.dims.length;
          return i + key.length + 4 + 8 * dims;
        }
      }
      throw new Error(`no ${name}`);
    };
    await t.step("an IQ2_XS matrix", async () => {
      const path = await rewrite((b) => {
        new DataView(b.buffer).setUint32(typeField("blk.1.ffn_up.weight"), 17, true);
      });
      await assertRejects(
        () => openModelDir(path),
        loadError(path, /"blk.1.ffn_up.weight" has type IQ2_XS.*supported: F32, F16, BF16/),
      );
    });
    await t.step("another architecture", async () => {
      const path = join(dir, "gemma.gguf");
      await writeGguf(path, {
        metadata: { "general.architecture": meta.str("gemma") },
        tensors: [],
      });
      await assertRejects(
        () => openModelDir(path),
        loadError(path, /"gemma".*supported GGUF architectures are llama, qwen2, qwen3.*gemma2/),
      );
    });
    await t.step("a missing tensor", async () => {
      const path = await rewrite((b) => {
        const at = typeField("blk.0.attn_k.weight") - 4 - 16 - "blk.0.attn_k.weight".length;
        b.set(new TextEncoder().encode("blk.0.attn_x"), at);
      });
      await assertRejects(
        () => openModelDir(path),
        loadError(path, /missing tensor "blk.0.attn_k/),
      );
    });
  });
});
