// The byte-level BPE pre-tokenizers a GGUF file names in tokenizer.ggml.pre, as tokenizer.json
// sections: how the text is cut into words before the merges run. llama.cpp keeps one list of
// splitting regexes per name (llama-vocab.cpp); the same cuts are written here the way the model's
// own tokenizer.json declares them (Split / Digits / ByteLevel), so @huggingface/tokenizers does
// the cutting. The table goes both ways: a GGUF's name gives the sections (gguf_tokenizer.ts), and
// a tokenizer.json's sections give the name a converter writes (gguf_tokenizer_metadata.ts).
//
// Beside the cuts, each name carries what llama.cpp switches with it: whether a word that is one
// vocabulary entry skips the merges (Llama 3's BPE), and whether BOS is added when the file does
// not say (tokenizer.ggml.add_bos_token absent). Qwen's tokenizer.json also normalizes to NFC,
// which llama.cpp skips; Sluice follows the tokenizer.json, so text and ids match Qwen's own.
//
// A name that is not in the table fails the load, listing the names that are: a wrong pre-tokenizer
// gives plausible but wrong ids, which is worse than no model. A file without the key is "default",
// as llama.cpp reads it.

/** GPT-2's word regex (the one ByteLevel's use_regex applies), spelled out. */
const GPT2_WORDS =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/** Llama 3's word regex; Qwen 2's differs only in taking digits one at a time. */
const llama3Words = (digits: string) =>
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" + digits +
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/**
 * GPT-4o's o200k word regex (tiktoken's, as llama.cpp's gpt-4o pre-tokenizer and Phi-4-mini's
 * tokenizer.json spell it): cased letter runs with their contractions, digits in threes,
 * punctuation runs taking a trailing newline or slash.
 */
const GPT4O_WORDS = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*" +
  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+" +
  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const byteLevel = (useRegex: boolean) => ({
  type: "ByteLevel",
  add_prefix_space: false,
  trim_offsets: true,
  use_regex: useRegex,
});

const split = (regex: string) => ({
  type: "Split",
  pattern: { Regex: regex },
  behavior: "Isolated",
  invert: false,
});

export interface PreTokenizerKind {
  /** tokenizer.json's pre_tokenizer. */
  preTokenizer: Record<string, unknown>;
  /** tokenizer.json's normalizer (null: none). */
  normalizer: Record<string, unknown> | null;
  /** A word that is one vocabulary entry is taken whole, before any merge. */
  ignoreMerges: boolean;
  /** BOS is added when tokenizer.ggml.add_bos_token is absent. */
  addBosByDefault: boolean;
}

const KINDS: Record<string, PreTokenizerKind> = {
  // GPT-2's own: one regex over the text.
  "gpt-2": {
    preTokenizer: byteLevel(true),
    normalizer: null,
    ignoreMerges: false,
    addBosByDefault: false,
  },
  // Every digit alone, then GPT-2's regex (SmolLM, StarCoder).
  smollm: {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [{ type: "Digits", individual_digits: true }, byteLevel(true)],
    },
    normalizer: null,
    ignoreMerges: false,
    addBosByDefault: false,
  },
  "llama-bpe": {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [split(llama3Words("\\p{N}{1,3}")), byteLevel(false)],
    },
    normalizer: null,
    ignoreMerges: true,
    addBosByDefault: true,
  },
  qwen2: {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [split(llama3Words("\\p{N}")), byteLevel(false)],
    },
    normalizer: { type: "NFC" },
    ignoreMerges: false,
    addBosByDefault: false,
  },
  // GPT-4o's o200k (Phi-4-mini).
  "gpt-4o": {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [split(GPT4O_WORDS), byteLevel(false)],
    },
    normalizer: null,
    ignoreMerges: false,
    addBosByDefault: false,
  },
  // llama.cpp's fallback for files that name none: runs of punctuation cut out first, then GPT-2's
  // regex, then digit runs, then digits in threes from the left.
  default: {
    preTokenizer: {
      type: "Sequence",
      pretokenizers: [
        split("[\\p{P}\\$\\+<=>\\^~\\|]+"),
        split(GPT2_WORDS),
        split("\\p{N}+"),
        split("[0-9][0-9][0-9]"),
        byteLevel(false),
      ],
    },
    normalizer: null,
    ignoreMerges: false,
    addBosByDefault: false,
  },
};

/**
 * tokenizer.ggml.pre values → the kind they name (llama.cpp's aliases for the same cuts). The
 * kinds' own names are llama.cpp's spellings, the ones a converter writes.
 */
const NAMES: Record<string, string> = {
  default: "default",
  "gpt-2": "gpt-2",
  gpt2: "gpt-2", // as Sluice's converter wrote it before it took llama.cpp's spelling
  smollm: "smollm",
  starcoder: "smollm",
  refact: "smollm",
  "llama-bpe": "llama-bpe",
  llama3: "llama-bpe",
  "llama-v3": "llama-bpe",
  "smaug-bpe": "llama-bpe",
  dbrx: "llama-bpe",
  qwen2: "qwen2",
  "deepseek-r1-qwen": "qwen2",
  "gpt-4o": "gpt-4o",
};

export const SUPPORTED_PRE_TOKENIZERS = Object.keys(NAMES);

/** The pre-tokenizer tokenizer.ggml.pre names (absent: "default"); null when Sluice lacks it. */
export function preTokenizerKind(pre: string | undefined): PreTokenizerKind | null {
  const kind = NAMES[pre ?? "default"];
  return kind === undefined ? null : KINDS[kind];
}

/**
 * The tokenizer.ggml.pre name for a tokenizer.json's byte-level pre-tokenizer, told by its cuts
 * (regexes, digit splitting, ByteLevel's own regex), not by flags that leave the words alike
 * (offsets); null when no name in the table cuts the same way.
 */
export function preTokenizerName(tokenizerJson: Record<string, unknown>): string | null {
  const want = cuts(tokenizerJson.pre_tokenizer);
  for (const [name, kind] of Object.entries(KINDS)) {
    if (cuts(kind.preTokenizer) === want) return name;
  }
  return null;
}

/** A pre-tokenizer section reduced to what decides its words. */
function cuts(section: unknown): string {
  const s = (section ?? {}) as Record<string, unknown>;
  switch (s.type) {
    case "Sequence":
      return (s.pretokenizers as unknown[]).map(cuts).join(" then ");
    case "Split": {
      // Keeping the matches and removing the rest (tiktoken conversions spell it so) cuts as
      // isolating them when the regex matches every character, as each regex here does.
      const keep = s.behavior === "Removed" && s.invert === true;
      const how = keep ? "Isolated,false" : `${s.behavior},${s.invert}`;
      return `split(${JSON.stringify(s.pattern)},${how})`;
    }
    case "Digits":
      return `digits(${s.individual_digits})`;
    case "ByteLevel":
      return `bytes(${s.use_regex !== false},${s.add_prefix_space === true})`;
    default:
      return JSON.stringify(s);
  }
}
