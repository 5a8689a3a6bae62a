// The encoders' tokenizers through @huggingface/tokenizers on the generated fixtures
// (engine/sources/tiny_encoder_tokenizers.ts): WordPiece as BERT's and Unigram as XLM-R's. Exact
// ids for hand-computed cases ("##" continuations, a word no piece spells → [UNK], the special
// frame of one text and of a pair with its token types), truncation that keeps the frame, and
// round trips on multilingual text, digits, whitespace and punctuation: decoding gives the
// normalised text, and encoding that again gives the same ids (the texts avoid characters the
// fixtures lack: an unknown decodes to nothing, as a special token skipped).

import { EncoderTokenizer, InputTooLong } from "../../../engine/encoder/encoder_tokenizer.ts";
import {
  unigramTokenizerJson,
  unigramVocab,
  wordPieceTokenizerJson,
  wordPieceVocab,
} from "../../../engine/sources/tiny_encoder_tokenizers.ts";
import { assertEquals, assertThrows } from "../../helpers/testing.ts";

const wordPiece = new EncoderTokenizer(wordPieceTokenizerJson());
const unigram = new EncoderTokenizer(unigramTokenizerJson());
const wp = wordPieceVocab();
const ug = Object.fromEntries(unigramVocab().map(([p], i) => [p, i]));

Deno.test("WordPiece: [CLS] … [SEP], lowercasing, ## continuations, unknown words → [UNK]", () => {
  const e = wordPiece.encode("Hello, playing XYZ 42");
  const want = ["[CLS]", "hello", ",", "play", "##ing", "x", "##y", "##z", "4", "##2", "[SEP]"];
  assertEquals(e.ids, want.map((t) => wp[t]));
  assertEquals(e.typeIds, want.map(() => 0));
  // A word with a character no piece continues is unknown as a whole (WordPiece, not per char).
  assertEquals(wordPiece.encode("ab™c").ids, [wp["[CLS]"], wp["[UNK]"], wp["[SEP]"]]);
  // Longest match first: "unable" is "un" + "##able", not "u" "##n" ...
  assertEquals(wordPiece.tokens(wordPiece.encode("unable").ids), [
    "[CLS]",
    "un",
    "##able",
    "[SEP]",
  ]);
});

Deno.test("WordPiece pairs: [CLS] A [SEP] B [SEP] with types 0 then 1", () => {
  const e = wordPiece.encodePair("hello world", "the fox");
  assertEquals(wordPiece.tokens(e.ids), [
    "[CLS]",
    "hello",
    "world",
    "[SEP]",
    "the",
    "fox",
    "[SEP]",
  ]);
  assertEquals(e.typeIds, [0, 0, 0, 0, 1, 1, 1]);
});

Deno.test("Unigram: <s> … </s>, ▁ word starts, unknown characters → <unk>, pairs", () => {
  const e = unigram.encode("hello world!");
  assertEquals(e.ids, ["<s>", "▁hello", "▁world", "!", "</s>"].map((t) => ug[t]));
  assertEquals(unigram.encode("ÿ").ids, [ug["<s>"], ug["▁"], ug["<unk>"], ug["</s>"]]);
  const p = unigram.encodePair("hello", "the fox");
  assertEquals(unigram.tokens(p.ids), ["<s>", "▁hello", "</s>", "</s>", "▁the", "▁fox", "</s>"]);
});

Deno.test("truncation keeps the closing special token; refusal without it; pairs cut the document", () => {
  const e = wordPiece.encode("hello world the quick brown fox");
  assertEquals(e.ids.length, 8);
  assertThrows(() => wordPiece.encode("hello world the quick brown fox", 5), InputTooLong);
  const cut = wordPiece.encode("hello world the quick brown fox", 5, true);
  assertEquals(wordPiece.tokens(cut.ids), ["[CLS]", "hello", "world", "the", "[SEP]"]);
  const pair = wordPiece.encodePair("hello world", "the quick brown fox", 7, true);
  assertEquals(wordPiece.tokens(pair.ids), [
    "[CLS]",
    "hello",
    "world",
    "[SEP]",
    "the",
    "quick",
    "[SEP]",
  ]);
  assertEquals(pair.typeIds, [0, 0, 0, 0, 1, 1, 1]);
  // Cutting the whole document and more would cut the query: refused.
  assertThrows(() => wordPiece.encodePair("hello world the quick", "fox", 4, true), InputTooLong);
});

const TEXTS = [
  "Hello, world! 3.14 + 2 = 5.14?",
  "naïve café - ßtraße, mañana",
  "中文 日本語  жизнь αβγ",
  "  leading and   inner    spaces\tand\ttabs  ",
  "(brackets) [x] {y} <z> \"quotes\" 'single' #hash @at $5 100%",
];

Deno.test("round trips: decode gives the normalised text, re-encoding gives the same ids", () => {
  for (const [name, tok] of [["wordpiece", wordPiece], ["unigram", unigram]] as const) {
    for (const text of TEXTS) {
      const ids = tok.encode(text).ids;
      const again = tok.encode(tok.decode(ids)).ids;
      assertEquals(
        again,
        ids,
        `${name}: ${JSON.stringify(text)} → ${JSON.stringify(tok.decode(ids))}`,
      );
    }
  }
  // Exactly, where the vocabulary covers every character and no normaliser changes the text.
  assertEquals(
    unigram.decode(unigram.encode("hello world, the quick brown fox 42!").ids),
    "hello world, the quick brown fox 42!",
  );
  assertEquals(wordPiece.decode(wordPiece.encode("Hello,  World 42").ids), "hello, world 42");
});
