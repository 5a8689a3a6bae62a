// The lower bound on a text's token count from its UTF-8 length: that it holds for the two
// tokenizer families it is given for (byte-level BPE, SentencePiece with byte fallback), on
// ordinary, random and worst-case text, and that it is withheld wherever text could shrink
// before it is cut into tokens or a run of it could become one token.

import { openModelDir } from "../../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { maxTokenBytes, utf8Length } from "../../../engine/text/token_bound.ts";
import { gpt2ByteAlphabet } from "../../../engine/text/token_bytes.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { rng, testSeed } from "../../helpers/random.ts";
import { sentencePiece } from "../../helpers/sentencepiece.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { TINY_SPEC } from "../../server/harness.ts";

const TEXTS = [
  "Hello world",
  "  leading, double  and trailing spaces  ",
  "tabs\tand\nnew\n\nlines\r\n",
  "naïve café — 東京タワー, Ελληνικά, עברית",
  "emoji 😀👍🏽 family 👨‍👩‍👧 math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
  "<|im_start|>user\nhi<|im_end|> and <s></s> typed as text",
  "lone surrogates \ud800 and \udfff",
  "a",
];

/** Random text from several scripts, with lone surrogates now and then. */
function randomTexts(seed: number, count: number): string[] {
  const next = rng(seed);
  const pools = [[0x20, 0x7e], [0xa0, 0x2ff], [0x3040, 0x30ff], [0x1f300, 0x1f64f], [
    0xd800,
    0xdfff,
  ]];
  return Array.from({ length: count }, () => {
    let text = "";
    const len = 1 + Math.floor(next() * 60);
    for (let i = 0; i < len; i++) {
      const [lo, hi] = pools[Math.floor(next() * pools.length)];
      text += String.fromCodePoint(lo + Math.floor(next() * (hi - lo + 1)));
    }
    return text;
  });
}

function assertBoundHolds(tok: Tokenizer, most: number, texts: string[], why = ""): void {
  for (const text of texts) {
    const count = tok.encode(text, { addSpecialTokens: false }).length;
    const bound = Math.ceil(utf8Length(text) / most);
    assert(count >= bound, `${why}${JSON.stringify(text)}: ${count} tokens < bound ${bound}`);
  }
}

Deno.test("token bound: byte-level BPE (the tiny model's tokenizer)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-bound-" });
  try {
    await writeTinyModel(dir, TINY_SPEC);
    const files = await openModelDir(dir);
    const tok = new Tokenizer(files);
    const most = maxTokenBytes(files.tokenizerJson, files.tokenizerConfig);
    // The longest of its tokens is a special one, "<|endoftext|>".
    assertEquals(most, 13);
    const seed = testSeed();
    assertBoundHolds(tok, most!, [...TEXTS, ...randomTexts(seed, 200)], `seed ${seed}: `);
    // Worst cases: text made of the vocabulary's longest pieces, each one token if it can be.
    const vocab = (files.tokenizerJson as { model: { vocab: Record<string, number> } }).model.vocab;
    const longest = Object.keys(vocab).map((t) => tok.decode([vocab[t]]))
      .sort((a, b) => utf8Length(b) - utf8Length(a)).slice(0, 20);
    assertBoundHolds(tok, most!, [longest.join(""), ...longest.map((t) => t.repeat(50))]);
    // Every token of every text covers at most that many bytes.
    for (const text of TEXTS) {
      for (const id of tok.encode(text)) assert(utf8Length(tok.decode([id])) <= most!);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("token bound: SentencePiece with byte fallback", () => {
  const files = sentencePiece();
  const tok = new Tokenizer(files);
  const most = maxTokenBytes(files.tokenizerJson, files.tokenizerConfig);
  // "▁▁▁▁▁▁▁▁" is 24 bytes as the model sees it, for 8 spaces of input: the bound is safe, loose.
  assertEquals(most, 24);
  const seed = testSeed();
  assertBoundHolds(tok, most!, [...TEXTS, ...randomTexts(seed, 200)], `seed ${seed}: `);
  assertBoundHolds(tok, most!, [" ".repeat(1000), "hello world ".repeat(50)]);
});

Deno.test("token bound: given for Llama 3's and GGUF SentencePiece's layouts", () => {
  const { tokenizerJson, tokenizerConfig } = sentencePiece();
  const json = tokenizerJson as Record<string, unknown>;
  const metaspace = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false };
  assertEquals(maxTokenBytes({ ...json, normalizer: null, pre_tokenizer: metaspace }, {}), 24);
  const vocab = Object.fromEntries(gpt2ByteAlphabet().map((ch, i) => [ch, i]));
  vocab["ĠĠĠĠ"] = 256; // four spaces: 4 bytes of input, 8 of UTF-8
  const llama3 = {
    normalizer: null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: "\\p{N}{1,3}" }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, use_regex: false },
      ],
    },
    added_tokens: [{ id: 257, content: "<|begin_of_text|>", special: true }],
    model: { type: "BPE", vocab, merges: [], ignore_merges: true },
  };
  assertEquals(maxTokenBytes(llama3, tokenizerConfig), utf8Length("<|begin_of_text|>"));
  assertEquals(maxTokenBytes({ ...llama3, added_tokens: [] }, tokenizerConfig), 4);
});

Deno.test("token bound: none where text can shrink, be dropped or lumped into one token", () => {
  const base = sentencePiece();
  const json = base.tokenizerJson as Record<string, unknown>;
  const model = json.model as Record<string, unknown>;
  const config = base.tokenizerConfig;
  const variants: [string, unknown, Record<string, unknown>?][] = [
    ["NFC (the Kelvin sign becomes K)", { ...json, normalizer: { type: "NFC" } }],
    ["NFKC", { ...json, normalizer: { type: "NFKC" } }],
    ["lowercase", { ...json, normalizer: { type: "Lowercase" } }],
    ["strip", { ...json, normalizer: { type: "Strip", strip_left: true, strip_right: true } }],
    ["precompiled charmap", { ...json, normalizer: { type: "Precompiled" } }],
    [
      "a sequence with one shrinking step",
      {
        ...json,
        normalizer: { type: "Sequence", normalizers: [{ type: "Prepend" }, { type: "NFD" }] },
      },
    ],
    [
      "a regex replacement",
      { ...json, normalizer: { type: "Replace", pattern: { Regex: " +" }, content: " " } },
    ],
    [
      "a shorter string replacement",
      { ...json, normalizer: { type: "Replace", pattern: { String: "  " }, content: " " } },
    ],
    ["whitespace splitting", { ...json, pre_tokenizer: { type: "WhitespaceSplit" } }],
    ["BERT's pre-tokenizer", { ...json, pre_tokenizer: { type: "BertPreTokenizer" } }],
    [
      "a split that removes",
      { ...json, pre_tokenizer: { type: "Split", pattern: { String: " " }, behavior: "Removed" } },
    ],
    [
      "an inverted split (keeps only matches)",
      { ...json, pre_tokenizer: { type: "Split", pattern: { Regex: "\\w+" }, invert: true } },
    ],
    [
      "an added token that strips spaces",
      {
        ...json,
        added_tokens: [{ id: 0, content: "<mask>", lstrip: true, special: false }],
      },
    ],
    ["no byte fallback", { ...json, model: { ...model, byte_fallback: false } }],
    [
      "a missing byte token",
      {
        ...json,
        model: {
          ...model,
          vocab: Object.fromEntries(
            Object.entries(model.vocab as object).filter(([t]) => t !== "<0x7F>"),
          ),
        },
      },
    ],
    [
      "byte-level, without GPT-2's byte characters in the vocabulary",
      { ...json, pre_tokenizer: { type: "ByteLevel" }, model: { ...model, byte_fallback: false } },
    ],
    ["a Unigram model", { ...json, model: { type: "Unigram", vocab: [["a", 0]] } }],
    ["remove_space", json, { ...config, remove_space: true }],
    ["lowercase and strip accents", json, { ...config, do_lowercase_and_remove_accent: true }],
  ];
  assert(maxTokenBytes(json, config) !== null);
  for (const [what, variant, cfg] of variants) {
    assertEquals(maxTokenBytes(variant, cfg ?? config), null, what);
  }
});

Deno.test("token bound: utf8Length is TextEncoder's length", () => {
  const seed = testSeed();
  const encoder = new TextEncoder();
  for (const text of [...TEXTS, ...randomTexts(seed, 500), "\ud800", "x\udc00", "\ud83d\ude00"]) {
    assertEquals(utf8Length(text), encoder.encode(text).length, `seed ${seed}: ${text}`);
  }
});
