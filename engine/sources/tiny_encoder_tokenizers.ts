// Small but real tokenizer.json files for the generated encoders: a WordPiece one as BERT's
// (BertNormalizer lowercasing, BertPreTokenizer, [CLS] A [SEP] B [SEP] with token types 0 and 1)
// and a Unigram one as XLM-R's SentencePiece (Metaspace "▁", <s> A </s></s> B </s>). Their
// vocabularies cover ASCII, digits, punctuation and a few letters of other scripts, plus some whole
// words and suffixes, so tests can check "##" continuations and unknown words by hand.

/** Characters every fixture vocabulary holds as pieces of their own. */
const LETTERS = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";
const PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
const OTHER_SCRIPTS = "ßñçøéèàïüöжизнькаяαβγδλ中文日本語한국";

/** WordPiece's special tokens, in id order from 0. */
export const WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const WORDPIECE_WORDS = ["the", "hello", "world", "play", "quick", "brown", "fox", "un"];
const WORDPIECE_SUFFIXES = ["##ing", "##ed", "##able", "##ly"];

/** The WordPiece vocabulary, token → id. */
export function wordPieceVocab(): Record<string, number> {
  const tokens = [...WORDPIECE_SPECIALS];
  const chars = [...LETTERS, ...DIGITS, ...PUNCTUATION, ...OTHER_SCRIPTS];
  tokens.push(...chars, ...[...LETTERS, ...DIGITS, ...OTHER_SCRIPTS].map((c) => "##" + c));
  tokens.push(...WORDPIECE_WORDS, ...WORDPIECE_SUFFIXES);
  if (new Set(tokens).size !== tokens.length) throw new Error("wordPieceVocab: a token twice");
  return Object.fromEntries(tokens.map((t, i) => [t, i]));
}

const special = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});

export function wordPieceTokenizerJson(): Record<string, unknown> {
  const vocab = wordPieceVocab();
  const id = (t: string) => vocab[t];
  const piece = (kind: "SpecialToken" | "Sequence", name: string, type: number) => ({
    [kind]: { id: name, type_id: type },
  });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: WORDPIECE_SPECIALS.map((t) => special(id(t), t)),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [
        piece("SpecialToken", "[CLS]", 0),
        piece("Sequence", "A", 0),
        piece("SpecialToken", "[SEP]", 0),
      ],
      pair: [
        piece("SpecialToken", "[CLS]", 0),
        piece("Sequence", "A", 0),
        piece("SpecialToken", "[SEP]", 0),
        piece("Sequence", "B", 1),
        piece("SpecialToken", "[SEP]", 1),
      ],
      special_tokens: Object.fromEntries(
        ["[CLS]", "[SEP]"].map((t) => [t, { id: t, ids: [id(t)], tokens: [t] }]),
      ),
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab,
    },
  };
}

/** Unigram's special tokens at XLM-R's ids (<mask> goes last, as in XLM-R). */
export const UNIGRAM_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"];
const UNIGRAM_WORDS = ["hello", "world", "the", "play", "ing", "quick", "brown", "fox"];

/** The Unigram vocabulary as [piece, log-probability] in id order. */
export function unigramVocab(): [string, number][] {
  const pieces: [string, number][] = UNIGRAM_SPECIALS.map((t) => [t, 0]);
  pieces.push(["▁", -3]);
  for (const c of [...LETTERS, ...DIGITS, ...PUNCTUATION, ...OTHER_SCRIPTS]) pieces.push([c, -6]);
  for (const c of LETTERS) pieces.push(["▁" + c, -5]);
  for (const w of UNIGRAM_WORDS) pieces.push(["▁" + w, -4], [w, -4.5]);
  for (const c of LETTERS.toUpperCase()) pieces.push([c, -7], ["▁" + c, -6.5]);
  pieces.push(["<mask>", 0]);
  if (new Set(pieces.map(([p]) => p)).size !== pieces.length) {
    throw new Error("unigramVocab: a piece twice");
  }
  return pieces;
}

export function unigramTokenizerJson(): Record<string, unknown> {
  const vocab = unigramVocab();
  const id = (t: string) => vocab.findIndex(([p]) => p === t);
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [...UNIGRAM_SPECIALS, "<mask>"].map((t) => special(id(t), t)),
    // XLM-R's precompiled charsmap turns control whitespace into spaces; runs of spaces become one.
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Replace", pattern: { Regex: "[\t\n\r]" }, content: " " },
        { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
      ],
    },
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    post_processor: {
      type: "RobertaProcessing",
      sep: ["</s>", id("</s>")],
      cls: ["<s>", id("<s>")],
      trim_offsets: true,
      add_prefix_space: true,
    },
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: id("<unk>"), vocab, byte_fallback: false },
  };
}
