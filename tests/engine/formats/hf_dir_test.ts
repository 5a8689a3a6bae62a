// Model directory validation: every way a Hugging Face directory can be unusable fails naming the
// file and the problem, and extra tensors (or a tied checkpoint's lm_head) are accepted.

import { join } from "node:path";
import { assert, assertRejects } from "../../helpers/testing.ts";
import { expectLoadError, SMALL, tempDir, writeRaw } from "../../helpers/model_files.ts";
import { readSafetensorsHeader, readTensorInto } from "../../../engine/formats/safetensors.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { type TinyModelSpec, writeTinyModel } from "../../../engine/sources/tiny_model.ts";

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

Deno.test("Phi-3's fused tensors are split at open, and a fused tensor of the wrong rows fails", async () => {
  const dir = await tempDir();
  try {
    await writeTinyModel(dir, { ...SMALL, architecture: "phi3", headDim: 16 });
    const files = await openModelDir(dir);
    const q = files.tensors.get("model.layers.1.self_attn.q_proj.weight")!;
    const k = files.tensors.get("model.layers.1.self_attn.k_proj.weight")!;
    const up = files.tensors.get("model.layers.1.mlp.up_proj.weight")!;
    const gate = files.tensors.get("model.layers.1.mlp.gate_proj.weight")!;
    // Row views of the same bytes: k follows q's 64 rows, up follows gate's 48.
    assert(q.shape.join() === "64,32" && k.shape.join() === "32,32", `${q.shape} ${k.shape}`);
    assert(k.dataOffset === q.dataOffset + q.byteLength);
    assert(up.dataOffset === gate.dataOffset + gate.byteLength && up.shape[0] === 48);
    assert(!files.tensors.has("model.layers.1.self_attn.qkv_proj.weight"));
    // A config whose intermediate size does not match gate_up_proj's rows.
    const configPath = join(dir, "config.json");
    const config = JSON.parse(await Deno.readTextFile(configPath));
    await Deno.writeTextFile(configPath, JSON.stringify({ ...config, intermediate_size: 40 }));
    await assertRejects(
      () => openModelDir(dir),
      Error,
      `tensor "model.layers.0.mlp.gate_up_proj.weight" has shape [96, 32], expected 80 rows`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
