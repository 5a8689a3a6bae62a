// Tokenizers rebuilt from GGUF metadata give the ids and text of the same model's tokenizer.json:
// a byte-level BPE ("gpt2", the tiny model's own tokenizer) and a SentencePiece BPE ("llama",
// generated here with byte fallback) whose tokenizer.json is built from its trained merges.

import { join } from "node:path";
import { parseLlamaConfig } from "../../../engine/model/config.ts";
import { readGguf } from "../../../engine/formats/gguf.ts";
import { ggufTokenizerFiles } from "../../../engine/formats/gguf_tokenizer.ts";
import type { ModelFiles } from "../../../engine/formats/model_files.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { type GgufMeta, meta, writeGguf } from "../../../engine/formats/gguf_writer.ts";
import { ggufTokenizerMetadata } from "../../../engine/formats/gguf_tokenizer_metadata.ts";
import { convertToGguf } from "../../../engine/formats/gguf_convert.ts";

const TEXTS = [
  "The river was quiet in the morning.",
  "  two leading spaces, and trailing  ",
  "line one\nline two\n\n\ttabbed",
  "numbers 1234567 and 3.14159",
  "unicode: naïve café, Grüße, Ελληνικά, 日本語, emoji 🦀🚀",
  "<s> and </s> and <|im_end|> typed as text",
  "function add(a, b) { return a + b; }",
  "",
  " ",
  "a",
];

async function tokenizerOf(
  dir: string,
  name: string,
  metadata: Record<string, GgufMeta>,
): Promise<Tokenizer> {
  const path = join(dir, name);
  await writeGguf(path, { metadata, tensors: [] });
  const { tokenizerJson, tokenizerConfig } = ggufTokenizerFiles(await readGguf(path));
  return new Tokenizer(filesOf(dir, tokenizerJson, tokenizerConfig));
}

function filesOf(dir: string, tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>) {
  const config = parseLlamaConfig({
    model_type: "llama",
    hidden_size: 8,
    intermediate_size: 8,
    num_hidden_layers: 1,
    num_attention_heads: 1,
    vocab_size: 100000,
  }, "config.json");
  return {
    dir,
    config,
    tensors: new Map(),
    tokenizerJson,
    tokenizerConfig,
    generationConfig: null,
  } satisfies ModelFiles;
}

function assertSameTokenizer(gguf: Tokenizer, hf: Tokenizer, texts: string[]): void {
  for (const text of texts) {
    const want = hf.encode(text);
    assertEquals(gguf.encode(text), want, `ids of ${JSON.stringify(text)}`);
    assertEquals(gguf.decode(want), hf.decode(want), `text of ${JSON.stringify(text)}`);
  }
  assertEquals(gguf.bosTokenId, hf.bosTokenId);
  assertEquals(gguf.vocabSize, hf.vocabSize);
}

Deno.test("gpt2 vocabulary: the tiny model's tokenizer from GGUF metadata", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-tok-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 16,
      intermediateSize: 24,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      tied: true,
      dtype: "F32",
      seed: 1,
    });
    const files = await openModelDir(dir);
    const hf = new Tokenizer(files);
    const gguf = await tokenizerOf(dir, "t.gguf", {
      "general.architecture": meta.str("llama"),
      ...ggufTokenizerMetadata(files.tokenizerJson, files.tokenizerConfig),
    });
    assertSameTokenizer(gguf, hf, TEXTS);
    for (const text of TEXTS) assertEquals(gguf.decode(gguf.encode(text)), text);
    const chat = [{ role: "user", content: "hi <|im_end|>" }];
    assertEquals(gguf.encodeChat(chat), hf.encodeChat(chat));
    assertEquals(gguf.renderChat(chat), hf.renderChat(chat));
    assert(gguf.eosTokenIds.includes(2), "eos from tokenizer.ggml.eos_token_id");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the converter writes a token per embedding row: [PAD<id>] of type unused past the tokenizer's", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-pad-" });
  try {
    // 600 embedding rows over a 512-token tokenizer, as the bench model's 49,152 rows over 512:
    // llama.cpp refuses a file whose token count is not token_embd's row count.
    const spec = {
      hiddenSize: 16,
      intermediateSize: 24,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      tied: true,
      dtype: "F32" as const,
      seed: 3,
    };
    await writeTinyModel(join(dir, "hf"), { ...spec, vocabSize: 600 });
    await convertToGguf(join(dir, "hf"), join(dir, "m.gguf"), { typeOf: () => "F32" });
    const g = await readGguf(join(dir, "m.gguf"));
    const tokens = g.metadata["tokenizer.ggml.tokens"] as string[];
    const types = (g.metadata["tokenizer.ggml.token_type"] as number[]).map(Number);
    assertEquals(g.tensors.get("token_embd.weight")!.dims[1], 600);
    assertEquals(tokens.length, 600);
    assertEquals(types.length, 600);
    const files = await openModelDir(join(dir, "hf"));
    const own = ggufTokenizerMetadata(files.tokenizerJson, files.tokenizerConfig);
    assertEquals(tokens.slice(0, 512), own["tokenizer.ggml.tokens"].value);
    assertEquals(tokens.slice(512), Array.from({ length: 88 }, (_, i) => `[PAD${512 + i}]`));
    assert(types.slice(512).every((t) => t === 5), "padding is of type unused");
    // The padded file's tokenizer still gives the tokenizer.json's ids and text, and the padding's
    // text is never read as its token.
    const hf = new Tokenizer(files);
    const { tokenizerJson, tokenizerConfig } = ggufTokenizerFiles(g);
    const padded = new Tokenizer(filesOf(dir, tokenizerJson, tokenizerConfig));
    for (const text of [...TEXTS, "[PAD550] typed as text"]) {
      assertEquals(padded.encode(text), hf.encode(text), `ids of ${JSON.stringify(text)}`);
      assertEquals(padded.decode(hf.encode(text)), hf.decode(hf.encode(text)));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("llama vocabulary: SentencePiece BPE with byte fallback and BOS", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-spm-" });
  try {
    const spm = trainSentencePiece(CORPUS, 300);
    const hf = new Tokenizer(filesOf(dir, spm.tokenizerJson, spm.tokenizerConfig));
    const gguf = await tokenizerOf(dir, "spm.gguf", {
      "general.architecture": meta.str("llama"),
      "tokenizer.ggml.model": meta.str("llama"),
      "tokenizer.ggml.tokens": meta.strs(spm.tokens),
      "tokenizer.ggml.scores": meta.f32s(spm.scores),
      "tokenizer.ggml.token_type": meta.i32s(spm.types),
      "tokenizer.ggml.bos_token_id": meta.u32(1),
      "tokenizer.ggml.eos_token_id": meta.u32(2),
      "tokenizer.ggml.unknown_token_id": meta.u32(0),
      "tokenizer.ggml.add_bos_token": meta.bool(true),
      "tokenizer.ggml.add_eos_token": meta.bool(false),
    });
    assertSameTokenizer(gguf, hf, [...TEXTS, ...CORPUS.split("\n")]);
    const ids = gguf.encode("The river");
    assertEquals(ids[0], 1, "BOS first");
    assert(ids.length > 2 && ids.length < 6, `merged pieces, got ${ids}`);
    // Characters outside the vocabulary fall back to their UTF-8 bytes.
    const crab = gguf.encode("🦀", { addSpecialTokens: false });
    assertEquals(crab.map((id) => spm.tokens[id]).slice(-4), [
      "<0xF0>",
      "<0x9F>",
      "<0xA6>",
      "<0x80>",
    ]);
    assertEquals(gguf.decode(gguf.encode("x 🦀 y"), { skipSpecial: true }), "x 🦀 y");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const CORPUS = `The river was quiet in the morning, and the light on the water moved slowly.
A small boat came down the stream with two people in it: one of them was reading a book.
They ate bread and cheese, and drank water from a bottle, and then they talked about the city.
The server streams tokens to every client at the pace the client can read.`;

/**
 * A SentencePiece-style BPE: "▁" for spaces, the corpus' characters as pieces, then merged pieces
 * in training order, each scoring below the one before (as SentencePiece scores them), and
 * <unk>, <s>, </s> and 256 byte tokens first. Its tokenizer.json lists the trained merges.
 */
function trainSentencePiece(corpus: string, merges: number) {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
  }
  const words = new Map<string, number>();
  for (const line of corpus.split("\n")) {
    for (const w of line.split(" ")) words.set("▁" + w, (words.get("▁" + w) ?? 0) + 1);
  }
  const split = [...words].map(([w, count]) => ({ symbols: Array.from(w), count }));
  const chars = [...new Set(split.flatMap((w) => w.symbols))].sort();
  const trained: [string, string][] = [];
  const pieces: string[] = [];
  for (let m = 0; m < merges; m++) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of split) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = symbols[i] + "\u0000" + symbols[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null, bestCount = 0;
    for (const [key, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) break;
    const [a, b] = best.split("\u0000");
    trained.push([a, b]);
    pieces.push(a + b);
    for (const w of split) {
      const next: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (w.symbols[i] === a && w.symbols[i + 1] === b) {
          next.push(a + b);
          i++;
        } else next.push(w.symbols[i]);
      }
      w.symbols = next;
    }
  }
  const scores = tokens.map(() => 0);
  [...pieces, ...chars].forEach((p, i) => {
    tokens.push(p);
    types.push(1);
    scores.push(-i);
  });
  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => (vocab[t] = i));
  const special = (id: number) => ({
    id,
    content: tokens[id],
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const tokenizerJson = {
    version: "1.0",
    added_tokens: [special(0), special(1), special(2)],
    // Llama 2's own form: "▁" before every text, as SentencePiece and llama.cpp put it.
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Prepend", prepend: "▁" },
        { type: "Replace", pattern: { String: " " }, content: "▁" },
      ],
    },
    pre_tokenizer: null,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [],
      special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
    },
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "▁" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ],
    },
    model: {
      type: "BPE",
      unk_token: "<unk>",
      fuse_unk: true,
      byte_fallback: true,
      vocab,
      merges: trained,
    },
  };
  const tokenizerConfig = {
    tokenizer_class: "LlamaTokenizer",
    bos_token: "<s>",
    eos_token: "</s>",
    unk_token: "<unk>",
    add_bos_token: true,
  };
  return { tokens, scores, types, tokenizerJson, tokenizerConfig };
}

Deno.test("named chat templates: tokenizer.chat_template.tool_use is picked when tools are given", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-templates-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 16,
      intermediateSize: 24,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      tied: true,
      dtype: "F32",
      seed: 1,
    });
    const files = await openModelDir(dir);
    const plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
    const withTools =
      "{{ tools | length }} tools: {% for m in messages %}{{ m.content }}{% endfor %}";
    const config = {
      ...files.tokenizerConfig,
      chat_template: [{ name: "default", template: plain }, {
        name: "tool_use",
        template: withTools,
      }],
    };
    const md = ggufTokenizerMetadata(files.tokenizerJson, config);
    assertEquals(md["tokenizer.chat_templates"].value, ["tool_use"]);
    const gguf = await tokenizerOf(dir, "named.gguf", {
      "general.architecture": meta.str("llama"),
      ...md,
    });
    const hf = new Tokenizer({ ...files, tokenizerConfig: config });
    const chat = [{ role: "user", content: "hi" }];
    const tools = [{ type: "function", function: { name: "f", parameters: {} } }];
    assertEquals(gguf.chatTemplate(false), plain);
    assertEquals(gguf.chatTemplate(true), withTools);
    assertEquals(gguf.renderChat(chat, { tools }), "1 tools: hi");
    assertEquals(gguf.renderChat(chat, { tools }), hf.renderChat(chat, { tools }));
    assertEquals(gguf.renderChat(chat), hf.renderChat(chat));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
