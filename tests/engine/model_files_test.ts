// Model files on disk: config.json parsing, RoPE frequencies, the safetensors reader/writer,
// model directory validation (every failure names its file), generated tiny models, and the
// --model resolution (demo, local, hub download through a stubbed fetch; never the network).

import { join } from "node:path";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/testing.ts";
import { rng, testSeed } from "../helpers/random.ts";
import { ModelLoadError } from "../../engine/model/errors.ts";
import { type LlamaConfig, parseLlamaConfig } from "../../engine/model/config.ts";
import { ropeInvFreq } from "../../engine/model/rope_freqs.ts";
import {
  decodeTensor,
  encodeTensor,
  f32ToBf16Bits,
  readSafetensorsContents,
  readSafetensorsHeader,
  readTensorInto,
  type StDtype,
  writeSafetensors,
} from "../../engine/formats/safetensors.ts";
import { expectedTensors } from "../../engine/model/tensors.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { demoModelDir } from "../../engine/sources/demo.ts";
import { type TinyModelSpec, writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { TOKENIZER_VOCAB_SIZE } from "../../engine/sources/tiny_tokenizer.ts";
import { DEFAULT_MODEL } from "../../engine/sources/default_model.ts";
import { ModelResolveError } from "../../engine/sources/resolve_error.ts";
import { resolveModel } from "../../engine/sources/resolve.ts";
import { f16BitsToF32, f32ToF16Bits } from "../../engine/quant/half.ts";

const CONFIG_FILE = "/models/x/config.json";

function baseConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    architectures: ["LlamaForCausalLM"],
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    vocab_size: 100,
    ...overrides,
  };
}

/** Asserts that `fn` throws a ModelLoadError blaming a file ending in `fileSuffix`. */
function expectLoadError(err: unknown, fileSuffix: string, problem: RegExp): true {
  assert(err instanceof ModelLoadError, `expected ModelLoadError, got ${err}`);
  assert(err.file.endsWith(fileSuffix), `error blames ${err.file}, expected …${fileSuffix}`);
  assert(problem.test(err.problem), `problem "${err.problem}" does not match ${problem}`);
  assertEquals(err.message, `${err.file}: ${err.problem}`);
  return true;
}

function configError(json: unknown, problem: RegExp): void {
  assertThrows(
    () => parseLlamaConfig(json, CONFIG_FILE),
    (e) => expectLoadError(e, "config.json", problem),
  );
}

Deno.test("config: defaults follow transformers' LlamaConfig", () => {
  const c = parseLlamaConfig(baseConfig(), CONFIG_FILE);
  const want: LlamaConfig = {
    hiddenSize: 64,
    intermediateSize: 128,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 4,
    headDim: 16,
    vocabSize: 100,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    ropeScaling: null,
    maxPositionEmbeddings: 2048,
    tieWordEmbeddings: false,
    bosTokenId: null,
    eosTokenIds: [],
  };
  assertEquals(c, want);
  // model_type alone identifies a Llama checkpoint too.
  const byType = parseLlamaConfig(
    baseConfig({ architectures: undefined, model_type: "llama" }),
    CONFIG_FILE,
  );
  assertEquals(byType.hiddenSize, 64);
});

Deno.test("config: GQA, MQA, explicit head_dim, token ids", () => {
  const gqa = parseLlamaConfig(
    baseConfig({
      num_key_value_heads: 2,
      bos_token_id: 1,
      eos_token_id: 2,
      tie_word_embeddings: true,
    }),
    CONFIG_FILE,
  );
  assertEquals([
    gqa.numKvHeads,
    gqa.headDim,
    gqa.bosTokenId,
    gqa.eosTokenIds,
    gqa.tieWordEmbeddings,
  ], [
    2,
    16,
    1,
    [2],
    true,
  ]);
  const mqa = parseLlamaConfig(
    baseConfig({ num_key_value_heads: 1, eos_token_id: [5, 7] }),
    CONFIG_FILE,
  );
  assertEquals([mqa.numKvHeads, mqa.eosTokenIds], [1, [5, 7]]);
  const wide = parseLlamaConfig(baseConfig({ head_dim: 32 }), CONFIG_FILE);
  assertEquals(wide.headDim, 32); // q_proj is then 128 x 64, not square
  const odd = parseLlamaConfig(
    baseConfig({ hidden_size: 60, num_attention_heads: 3, head_dim: 24 }),
    CONFIG_FILE,
  );
  assertEquals(odd.headDim, 24);
});

Deno.test("config: rope scaling under rope_type, type and rope_parameters", () => {
  const llama3 = parseLlamaConfig(
    baseConfig({
      rope_theta: 500000,
      rope_scaling: {
        rope_type: "llama3",
        factor: 32,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 8192,
      },
    }),
    CONFIG_FILE,
  );
  assertEquals(llama3.ropeTheta, 500000);
  assertEquals(llama3.ropeScaling, {
    type: "llama3",
    factor: 32,
    lowFreqFactor: 1,
    highFreqFactor: 4,
    originalMaxPositionEmbeddings: 8192,
  });
  const linear = parseLlamaConfig(
    baseConfig({ rope_scaling: { type: "linear", factor: 2 } }),
    CONFIG_FILE,
  );
  assertEquals(linear.ropeScaling, { type: "linear", factor: 2 });
  const plain = parseLlamaConfig(
    baseConfig({ rope_scaling: { rope_type: "default" } }),
    CONFIG_FILE,
  );
  assertEquals(plain.ropeScaling, null);
  const v5 = parseLlamaConfig(
    baseConfig({ rope_parameters: { rope_type: "linear", factor: 4, rope_theta: 1234 } }),
    CONFIG_FILE,
  );
  assertEquals([v5.ropeTheta, v5.ropeScaling], [1234, { type: "linear", factor: 4 }]);
});

Deno.test("config: bad fields are rejected naming config.json and the field", () => {
  configError([1, 2], /JSON object/);
  configError(
    baseConfig({ architectures: ["MistralForCausalLM"] }),
    /unsupported architecture.*Mistral/,
  );
  configError(baseConfig({ architectures: undefined }), /unsupported architecture/);
  configError(baseConfig({ hidden_size: "64" }), /"hidden_size"/);
  configError(baseConfig({ vocab_size: undefined }), /"vocab_size"/);
  configError(baseConfig({ num_hidden_layers: 0 }), /"num_hidden_layers"/);
  configError(baseConfig({ intermediate_size: 1.5 }), /"intermediate_size"/);
  configError(baseConfig({ num_key_value_heads: 3 }), /"num_key_value_heads".*does not divide/);
  configError(baseConfig({ hidden_size: 66 }), /"hidden_size".*not divisible/);
  configError(baseConfig({ head_dim: 15 }), /"head_dim".*even/);
  configError(baseConfig({ eos_token_id: "2" }), /"eos_token_id"/);
  configError(baseConfig({ attention_bias: true }), /"attention_bias"/);
  configError(baseConfig({ hidden_act: "gelu" }), /"hidden_act"/);
  configError(
    baseConfig({ rope_scaling: { rope_type: "yarn", factor: 4 } }),
    /"rope_scaling.rope_type".*yarn/,
  );
  configError(baseConfig({ rope_scaling: { type: "linear" } }), /"rope_scaling.factor"/);
  configError(
    baseConfig({
      rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4 },
    }),
    /"rope_scaling.original_max_position_embeddings"/,
  );
});

function ropeConfig(
  headDim: number,
  theta: number,
  ropeScaling: LlamaConfig["ropeScaling"],
): LlamaConfig {
  return { ...parseLlamaConfig(baseConfig(), CONFIG_FILE), headDim, ropeTheta: theta, ropeScaling };
}

function assertAllClose(got: ArrayLike<number>, want: number[], what: string): void {
  assertEquals(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]) / Math.abs(want[i]);
    assert(err < 1e-12, `${what}[${i}]: got ${got[i]}, want ${want[i]}`);
  }
}

Deno.test("rope: inverse frequencies match hand-computed values", () => {
  // theta^(-2i/d) for d = 8: 1, 10000^-1/4, 10000^-1/2, 10000^-3/4.
  assertAllClose(ropeInvFreq(ropeConfig(8, 10000, null)), [1, 0.1, 0.01, 0.001], "default");
  assertAllClose(
    ropeInvFreq(ropeConfig(8, 10000, { type: "linear", factor: 4 })),
    [0.25, 0.025, 0.0025, 0.00025],
    "linear",
  );
  // llama3 with original context 1024, low 1, high 4: wavelengths 2π/f = 6.28, 62.8, 628, 6283
  // against bands [256, 1024]: two kept, one smoothed, one divided by 8. The smoothed value is
  // s = (1024/628.3185 - 1) / 3 = 0.2099155…, (1-s)·0.01/8 + s·0.01 = 0.0030867609670…
  assertAllClose(
    ropeInvFreq(ropeConfig(8, 10000, {
      type: "llama3",
      factor: 8,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalMaxPositionEmbeddings: 1024,
    })),
    [1, 0.1, 0.003086760967011274, 0.000125],
    "llama3",
  );
  // Llama 3.1's own settings (head 128, theta 5e5, factor 8, original 8192), values from the
  // transformers formula evaluated in float64: one per band.
  const l31 = ropeInvFreq(ropeConfig(128, 500000, {
    type: "llama3",
    factor: 8,
    lowFreqFactor: 1,
    highFreqFactor: 4,
    originalMaxPositionEmbeddings: 8192,
  }));
  assertEquals(l31.length, 64);
  assertAllClose(
    [l31[0], l31[20], l31[30], l31[40], l31[63]],
    [1, 0.016560440080994446, 0.0013718935677611381, 3.428102195952591e-05, 3.068925988914511e-07],
    "llama3.1",
  );
});

// ---- safetensors ----

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "sluice-model-test-" });
}

/** Writes a safetensors file with an arbitrary (possibly lying) header. */
async function writeRaw(path: string, header: unknown, data: Uint8Array): Promise<void> {
  const json = new TextEncoder().encode(
    typeof header === "string" ? header : JSON.stringify(header),
  );
  const bytes = new Uint8Array(8 + json.length + data.length);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
  bytes.set(json, 8);
  bytes.set(data, 8 + json.length);
  await Deno.writeFile(path, bytes);
}

function roundTo(dtype: StDtype, v: number): number {
  if (dtype === "F32") return Math.fround(v);
  if (dtype === "F16") return f16BitsToF32(f32ToF16Bits(v));
  return Math.fround(v); // BF16 is checked separately against hand-rounded values
}

Deno.test("safetensors: write → header → readTensorInto round-trips F32, F16 and BF16", async () => {
  const seed = testSeed();
  const next = rng(seed);
  const dir = await tempDir();
  try {
    const dtypes: StDtype[] = ["F32", "F16", "BF16"];
    const shapes = [[3, 5], [7], [2, 3, 4], [], [0, 4]];
    const tensors = dtypes.flatMap((dtype) =>
      shapes.map((shape, i) => {
        const n = shape.reduce((a, b) => a * b, 1);
        const values = Array.from({ length: n }, () => (next() * 2 - 1) * 10);
        return { name: `${dtype}.t${i}`, dtype, shape, values, data: encodeTensor(values, dtype) };
      })
    );
    const path = join(dir, "m.safetensors");
    await writeSafetensors(path, tensors, { format: "pt" });
    const header = await readSafetensorsHeader(path);
    assertEquals([...header.keys()], tensors.map((t) => t.name));
    const { metadata } = await readSafetensorsContents(path);
    assertEquals(metadata, { format: "pt" });
    for (const t of tensors) {
      const info = header.get(t.name)!;
      assertEquals([info.dtype, info.shape, info.file], [t.dtype, t.shape, path]);
      const bytes = new Uint8Array(info.byteLength);
      await readTensorInto(info, bytes);
      assertEquals(bytes, t.data, `${t.name} bytes (seed ${seed})`);
      const decoded = decodeTensor(bytes, t.dtype);
      for (let i = 0; i < t.values.length; i++) {
        const v = t.values[i];
        if (t.dtype === "BF16") {
          // bf16 keeps 8 significant bits: within half an ulp (2^-8 relative) of the input.
          assert(
            Math.abs(decoded[i] - v) <= Math.abs(v) * 2 ** -8,
            `${t.name}[${i}] (seed ${seed})`,
          );
        } else {
          assertEquals(decoded[i], roundTo(t.dtype, v), `${t.name}[${i}] (seed ${seed})`);
        }
      }
    }
    // The data section starts 8-byte aligned (the header is space-padded).
    const first = header.get("F32.t0")!;
    assertEquals(first.dataOffset % 8, 0);
    await assertRejects(
      () => readTensorInto(first, new Uint8Array(first.byteLength + 1)),
      RangeError,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors: bf16 rounds to nearest even", () => {
  const bits = (v: number) => f32ToBf16Bits(v);
  assertEquals(bits(1), 0x3f80);
  assertEquals(bits(-2), 0xc000);
  assertEquals(bits(1 + 2 ** -8), 0x3f80); // halfway, tie to the even mantissa (1.0)
  assertEquals(bits(1 + 3 * 2 ** -8), 0x3f82); // halfway, tie to even (1 + 2^-6)
  assertEquals(bits(1 + 2 ** -8 + 2 ** -12), 0x3f81); // above halfway rounds up
  assertEquals(bits(Infinity), 0x7f80);
  assertEquals(bits(NaN) & 0x7fc0, 0x7fc0);
  assertEquals([...decodeTensor(encodeTensor([1.5, -0.375, 3e38], "BF16"), "BF16")].slice(0, 2), [
    1.5,
    -0.375,
  ]);
});

Deno.test("safetensors: lying or broken headers are rejected", async (t) => {
  const dir = await tempDir();
  const path = join(dir, "bad.safetensors");
  const fails = async (problem: RegExp) =>
    await assertRejects(
      () => readSafetensorsHeader(path),
      (e) => expectLoadError(e, "bad.safetensors", problem),
    );
  const data = new Uint8Array(64);
  try {
    await t.step("missing file", async () => {
      await fails(/missing/);
    });
    await t.step("shorter than the length prefix", async () => {
      await Deno.writeFile(path, new Uint8Array(5));
      await fails(/too short/);
    });
    await t.step("header length past the end of the file", async () => {
      const bytes = new Uint8Array(40);
      new DataView(bytes.buffer).setBigUint64(0, 1000n, true);
      await Deno.writeFile(path, bytes);
      await fails(/header length 1000 runs past the end/);
    });
    await t.step("header is not JSON", async () => {
      await writeRaw(path, "{not json", data);
      await fails(/not valid JSON/);
    });
    await t.step("offsets past the end of the file", async () => {
      await writeRaw(path, { a: { dtype: "F32", shape: [32], data_offsets: [0, 128] } }, data);
      await fails(/"a" ends at byte \d+ but the file has only \d+ bytes/);
    });
    await t.step("offsets disagree with the shape", async () => {
      await writeRaw(path, { a: { dtype: "F32", shape: [4], data_offsets: [0, 12] } }, data);
      await fails(/span 12 bytes but F32 shape \[4\] needs 16/);
    });
    await t.step("overlapping tensors", async () => {
      await writeRaw(path, {
        a: { dtype: "F32", shape: [8], data_offsets: [0, 32] },
        empty: { dtype: "F32", shape: [0], data_offsets: [20, 20] },
        b: { dtype: "F16", shape: [8], data_offsets: [24, 40] },
      }, data);
      await fails(/"a" \[0, 32\) and "b" \[24, 40\) overlap/);
    });
    await t.step("unsupported and unknown dtypes", async () => {
      await writeRaw(path, {
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        q: { dtype: "I8", shape: [4], data_offsets: [8, 12] },
      }, data);
      await fails(/"q" has dtype I8, which is not supported/);
      const contents = await readSafetensorsContents(path);
      assertEquals([...contents.tensors.keys()], ["a"]);
      assertEquals(contents.unsupported.get("q")?.dtype, "I8");
      await writeRaw(path, { a: { dtype: "Q4_K", shape: [2], data_offsets: [0, 8] } }, data);
      await fails(/unknown dtype "Q4_K"/);
    });
    await t.step("truncated after a valid header", async () => {
      await writeSafetensors(path, [{
        name: "w",
        dtype: "F16",
        shape: [16],
        data: new Uint8Array(32),
      }]);
      const full = await Deno.readFile(path);
      await Deno.writeFile(path, full.subarray(0, full.length - 5));
      await fails(/"w" ends at byte \d+ but the file has only \d+ bytes \(truncated\?\)/);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---- model directories ----

const SMALL: TinyModelSpec = {
  hiddenSize: 32,
  intermediateSize: 48,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: false,
  dtype: "F32",
  vocabSize: 300,
  seed: 11,
};

Deno.test("tiny models of every flavour open cleanly", async (t) => {
  const cases: [string, Partial<TinyModelSpec>][] = [
    ["MHA f32 untied", { numKvHeads: 4 }],
    ["GQA f16 tied", { dtype: "F16", tied: true }],
    ["MQA bf16", { numKvHeads: 1, dtype: "BF16" }],
    ["llama3 rope", {
      ropeTheta: 500000,
      ropeScaling: {
        type: "llama3",
        factor: 8,
        lowFreqFactor: 1,
        highFreqFactor: 4,
        originalMaxPositionEmbeddings: 64,
      },
    }],
    ["linear rope", { ropeScaling: { type: "linear", factor: 2 } }],
    ["sharded x3 bf16", { shards: 3, dtype: "BF16" }],
    ["head_dim != hidden/heads", { headDim: 12 }],
    ["full tokenizer vocab", { vocabSize: undefined }],
    ["padded vocab", { vocabSize: 600 }],
  ];
  for (const [label, overrides] of cases) {
    await t.step(label, async () => {
      const spec = { ...SMALL, ...overrides };
      const dir = await tempDir();
      try {
        await writeTinyModel(dir, spec);
        const files = await openModelDir(dir);
        const c = files.config;
        assertEquals(files.dir, dir);
        assertEquals(
          [c.numHeads, c.numKvHeads, c.headDim, c.tieWordEmbeddings, c.vocabSize],
          [
            spec.numHeads,
            spec.numKvHeads,
            spec.headDim ?? spec.hiddenSize / spec.numHeads,
            spec.tied,
            spec.vocabSize ?? TOKENIZER_VOCAB_SIZE,
          ],
        );
        assertEquals(c.ropeScaling, spec.ropeScaling ?? null);
        const expected = expectedTensors(c);
        assertEquals(expected.length, 2 + 9 * spec.numLayers + (spec.tied ? 0 : 1));
        for (const want of expected) {
          const info = files.tensors.get(want.name)!;
          assertEquals([info.shape, info.dtype], [want.shape, spec.dtype], want.name);
        }
        const shardFiles = new Set([...files.tensors.values()].map((i) => i.file));
        assertEquals(shardFiles.size, spec.shards ?? 1);
        assert(files.generationConfig !== null && files.tokenizerConfig.chat_template);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});

Deno.test("tiny models are deterministic from the seed", async () => {
  const dirs = [await tempDir(), await tempDir(), await tempDir()];
  try {
    await writeTinyModel(dirs[0], SMALL);
    await writeTinyModel(dirs[1], SMALL);
    await writeTinyModel(dirs[2], { ...SMALL, seed: SMALL.seed + 1 });
    const read = (d: string) => Deno.readFile(join(d, "model.safetensors"));
    assertEquals(await read(dirs[0]), await read(dirs[1]));
    const [a, c] = [await read(dirs[0]), await read(dirs[2])];
    assert(
      a.length === c.length && a.some((b, i) => b !== c[i]),
      "a different seed gives other weights",
    );
  } finally {
    for (const d of dirs) await Deno.remove(d, { recursive: true });
  }
});

interface RawTensor {
  name: string;
  dtype: string;
  shape: number[];
  data: Uint8Array;
}

async function readAll(path: string): Promise<RawTensor[]> {
  const header = await readSafetensorsHeader(path);
  const out: RawTensor[] = [];
  for (const info of header.values()) {
    const data = new Uint8Array(info.byteLength);
    await readTensorInto(info, data);
    out.push({ name: info.name, dtype: info.dtype, shape: info.shape, data });
  }
  return out;
}

/** Writes tensors of any dtype string (writeSafetensors only takes loadable ones). */
async function writeAnyDtype(path: string, tensors: RawTensor[]): Promise<void> {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = {
      dtype: t.dtype,
      shape: t.shape,
      data_offsets: [offset, offset + t.data.length],
    };
    offset += t.data.length;
  }
  const data = new Uint8Array(offset);
  offset = 0;
  for (const t of tensors) {
    data.set(t.data, offset);
    offset += t.data.length;
  }
  await writeRaw(path, header, data);
}

async function editJson(path: string, edit: (json: any) => void): Promise<void> {
  const json = JSON.parse(await Deno.readTextFile(path));
  edit(json);
  await Deno.writeTextFile(path, JSON.stringify(json));
}

Deno.test("bad model directories fail naming the file and the problem", async (t) => {
  const cases: {
    label: string;
    spec?: Partial<TinyModelSpec>;
    breakIt: (dir: string) => Promise<void>;
    file: string;
    problem: RegExp;
  }[] = [
    {
      label: "missing config.json",
      breakIt: (d) => Deno.remove(join(d, "config.json")),
      file: "config.json",
      problem: /missing/,
    },
    {
      label: "config.json is not JSON",
      breakIt: (d) => Deno.writeTextFile(join(d, "config.json"), "{"),
      file: "config.json",
      problem: /not valid JSON/,
    },
    {
      label: "unknown architecture",
      breakIt: (d) =>
        editJson(join(d, "config.json"), (c) => {
          c.architectures = ["GPT2LMHeadModel"];
          c.model_type = "gpt2";
        }),
      file: "config.json",
      problem: /unsupported architecture \["GPT2LMHeadModel"\]/,
    },
    {
      label: "missing tokenizer.json",
      breakIt: (d) => Deno.remove(join(d, "tokenizer.json")),
      file: "tokenizer.json",
      problem: /missing/,
    },
    {
      label: "missing tokenizer_config.json",
      breakIt: (d) => Deno.remove(join(d, "tokenizer_config.json")),
      file: "tokenizer_config.json",
      problem: /missing/,
    },
    {
      label: "no weights at all",
      breakIt: (d) => Deno.remove(join(d, "model.safetensors")),
      file: "model.safetensors",
      problem: /model.safetensors.index.json/,
    },
    {
      label: "missing shard",
      spec: { shards: 3 },
      breakIt: (d) => Deno.remove(join(d, "model-00002-of-00003.safetensors")),
      file: "model-00002-of-00003.safetensors",
      problem: /missing \(named by .*model.safetensors.index.json\)/,
    },
    {
      label: "index puts a tensor in the wrong shard",
      spec: { shards: 2 },
      breakIt: (d) =>
        editJson(join(d, "model.safetensors.index.json"), (idx) => {
          idx.weight_map["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
        }),
      file: "model.safetensors.index.json",
      problem: /"model.embed_tokens.weight" in model-00002-of-00002.safetensors.*does not contain/,
    },
    {
      label: "index names a path outside the directory",
      spec: { shards: 2 },
      breakIt: (d) =>
        editJson(join(d, "model.safetensors.index.json"), (idx) => {
          idx.weight_map["model.norm.weight"] = "../elsewhere.safetensors";
        }),
      file: "model.safetensors.index.json",
      problem: /not a .safetensors file name/,
    },
    {
      label: "shape mismatch with config.json",
      breakIt: (d) => editJson(join(d, "config.json"), (c) => (c.intermediate_size = 50)),
      file: "model.safetensors",
      problem: /"model.layers.0.mlp.gate_proj.weight" has shape \[48, 32\], expected \[50, 32\]/,
    },
    {
      label: "missing tensor (untied without lm_head)",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        await writeAnyDtype(path, (await readAll(path)).filter((x) => x.name !== "lm_head.weight"));
      },
      file: "model.safetensors",
      problem: /missing tensor "lm_head.weight"/,
    },
    {
      label: "missing tensor in a sharded checkpoint",
      spec: { shards: 2 },
      breakIt: (d) =>
        editJson(join(d, "model.safetensors.index.json"), (idx) => {
          delete idx.weight_map["model.layers.1.self_attn.v_proj.weight"];
        }),
      file: "model.safetensors.index.json",
      problem: /missing tensor "model.layers.1.self_attn.v_proj.weight"/,
    },
    {
      label: "unsupported dtype I8",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        const tensors = await readAll(path);
        const q = tensors.find((x) => x.name === "model.layers.0.self_attn.q_proj.weight")!;
        q.dtype = "I8";
        q.data = q.data.subarray(0, q.data.length / 4);
        await writeAnyDtype(path, tensors);
      },
      file: "model.safetensors",
      problem: /"model.layers.0.self_attn.q_proj.weight" has dtype I8, which is not supported/,
    },
    {
      label: "truncated safetensors",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        const bytes = await Deno.readFile(path);
        await Deno.writeFile(path, bytes.subarray(0, bytes.length - 100));
      },
      file: "model.safetensors",
      problem: /truncated/,
    },
    {
      label: "header offsets past the end of the file",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        const tensors = await readAll(path);
        await writeAnyDtype(path, tensors);
        const bytes = await Deno.readFile(path);
        // Same header, data cut: a header that promises more than the file holds.
        await Deno.writeFile(path, bytes.subarray(0, bytes.length - tensors.at(-1)!.data.length));
      },
      file: "model.safetensors",
      problem: /ends at byte \d+ but the file has only/,
    },
    {
      label: "header overlaps two tensors",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        const tensors = await readAll(path);
        const header: Record<string, unknown> = {};
        let offset = 0;
        for (const x of tensors) {
          header[x.name] = {
            dtype: x.dtype,
            shape: x.shape,
            data_offsets: [offset, offset + x.data.length],
          };
          offset += x.data.length;
        }
        (header["model.norm.weight"] as { data_offsets: number[] }).data_offsets = [0, 128];
        await writeRaw(path, header, new Uint8Array(offset));
      },
      file: "model.safetensors",
      problem: /overlap/,
    },
    {
      label: "header length mismatch",
      breakIt: async (d) => {
        const path = join(d, "model.safetensors");
        const tensors = await readAll(path);
        tensors[0].shape = [tensors[0].shape[0] + 1, tensors[0].shape[1]];
        await writeAnyDtype(path, tensors);
      },
      file: "model.safetensors",
      problem: /data_offsets span \d+ bytes but F32 shape \[301, 32\] needs/,
    },
  ];
  for (const c of cases) {
    await t.step(c.label, async () => {
      const dir = await tempDir();
      try {
        await writeTinyModel(dir, { ...SMALL, ...c.spec });
        await openModelDir(dir); // intact before breaking it
        await c.breakIt(dir);
        await assertRejects(() => openModelDir(dir), (e) => expectLoadError(e, c.file, c.problem));
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
  await t.step("not a directory", async () => {
    await assertRejects(
      () => openModelDir("/nonexistent/sluice/model"),
      (e) => expectLoadError(e, "/nonexistent/sluice/model", /no such directory/),
    );
  });
});

Deno.test("extra tensors are ignored, and a tied checkpoint may ship lm_head", async () => {
  const dir = await tempDir();
  try {
    await writeTinyModel(dir, { ...SMALL, tied: true });
    const path = join(dir, "model.safetensors");
    const tensors = await readAll(path);
    const embed = tensors.find((x) => x.name === "model.embed_tokens.weight")!;
    tensors.push(
      { ...embed, name: "lm_head.weight" },
      {
        name: "model.layers.0.self_attn.rotary_emb.inv_freq",
        dtype: "F32",
        shape: [4],
        data: new Uint8Array(16),
      },
      { name: "model.position_ids", dtype: "I64", shape: [3], data: new Uint8Array(24) },
    );
    await writeAnyDtype(path, tensors);
    const files = await openModelDir(dir);
    assert(files.tensors.has("lm_head.weight"));
    assert(!files.tensors.has("model.position_ids"));

    // …but a shipped lm_head with the wrong shape is still an error.
    tensors.find((x) => x.name === "lm_head.weight")!.shape = [SMALL.vocabSize! * 32, 1];
    await writeAnyDtype(path, tensors);
    await assertRejects(
      () => openModelDir(dir),
      (e) => expectLoadError(e, "model.safetensors", /"lm_head.weight" has shape/),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---- --model resolution ----

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
