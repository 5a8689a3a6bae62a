// The tiny models' tokenizer: a real byte-level BPE, its merges trained here on a small English,
// code and digits corpus, with three special tokens and a ChatML chat template, written as
// tokenizer.json and tokenizer_config.json.

import { addedToken, bpeModel, tokenizerFile } from "../formats/tokenizer_json.ts";
import { gpt2ByteAlphabet } from "../text/token_bytes.ts";

/** Size of the generated tokenizer: 3 special tokens, 256 byte tokens, 253 merges. */
export const TOKENIZER_VOCAB_SIZE = 512;
export const SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
const NUM_BYTE_TOKENS = 256;
/** The fewest tokens a tiny model's vocabulary may have: the special and byte tokens. */
export const MIN_TOKENIZER_VOCAB_SIZE = SPECIAL_TOKENS.length + NUM_BYTE_TOKENS;

export const CHATML_TEMPLATE = "{% for message in messages %}" +
  "{% if loop.first and message['role'] != 'system' %}" +
  "{{ '<|im_start|>system\\nYou are a small demo assistant.<|im_end|>\\n' }}{% endif %}" +
  "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
  "{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Training text for the merges: ordinary English, some code, digits and punctuation, so that
// common words become single tokens and the rest falls back to bytes.
const CORPUS = `
The river was quiet in the morning, and the light on the water moved slowly from one bank to the
other. A small boat came down the stream with two people in it: one of them was reading a book,
the other was watching the birds. They did not speak for a long time. When the sun was higher,
the boat reached the old bridge, and the man who had been reading put the book away and said that
they should stop for lunch. There is a place near the bridge where the grass is soft and the trees
give shade. They ate bread and cheese, and drank water from a bottle, and then they talked about
the city, about the work they had left there, and about the days that were still to come.
What is the time? It is ten past three. How many tokens are in this sentence? Let us count them.
The server streams tokens to every client at the pace the client can read, and it keeps the
stream smooth while the device is busy with other requests. Each request has a buffer, and the
scheduler reads how full the buffers are when it decides who runs next.
function add(a, b) { return a + b; }
for (let i = 0; i < 10; i++) { console.log(i * 2); }
if (value === null) { throw new Error("value is missing"); }
The numbers 1, 2, 3, 10, 20, 100, 2024 and 3.14 appear in the text as well.
She said: "I think we should go now." He answered, "Yes, let's go." They went home together.
`;

const PRETOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** Greedy BPE training: repeatedly merge the most frequent adjacent pair (ties by text order). */
function trainMerges(numNewTokens: number, alphabet: string[]): [string, string][] {
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const piece of CORPUS.match(PRETOKENIZE) ?? []) {
    const word = Array.from(encoder.encode(piece), (b) => alphabet[b]).join("\u0000");
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  const words = [...counts].map(([w, count]) => ({ symbols: w.split("\u0000"), count }));
  const known = new Set(alphabet);
  const merges: [string, string][] = [];
  let added = 0;
  while (added < numNewTokens) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = symbols[i] + "\u0000" + symbols[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null;
    let bestCount = 0;
    for (const [key, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) break; // every word is a single token
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    if (!known.has(a + b)) {
      known.add(a + b);
      added++;
    }
    for (const w of words) {
      const merged: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          merged.push(a + b);
          i++;
        } else merged.push(w.symbols[i]);
      }
      w.symbols = merged;
    }
  }
  return merges;
}

export function buildTokenizerJson(size: number): Record<string, unknown> {
  const alphabet = gpt2ByteAlphabet();
  const vocab: Record<string, number> = {};
  let nextId = 0;
  for (const token of [...SPECIAL_TOKENS, ...alphabet]) vocab[token] = nextId++;
  const merges = trainMerges(size - nextId, alphabet);
  for (const [a, b] of merges) if (!Object.hasOwn(vocab, a + b)) vocab[a + b] = nextId++;

  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  return tokenizerFile(
    SPECIAL_TOKENS.map((content, id) => addedToken(id, content, true)),
    {
      normalizer: null,
      pre_tokenizer: byteLevel,
      post_processor: { ...byteLevel, trim_offsets: false },
      decoder: byteLevel,
      model: bpeModel({
        vocab,
        merges: merges.map(([a, b]) => [a, b]),
        unkToken: null,
        fuseUnk: false,
        byteFallback: false,
        ignoreMerges: false,
      }),
    },
  );
}

export function tokenizerConfigJson(maxPos: number): Record<string, unknown> {
  const addedTokensDecoder: Record<string, unknown> = {};
  SPECIAL_TOKENS.forEach((content, id) => {
    addedTokensDecoder[String(id)] = {
      content,
      lstrip: false,
      normalized: false,
      rstrip: false,
      single_word: false,
      special: true,
    };
  });
  return {
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: ["<|im_start|>", "<|im_end|>"],
    bos_token: "<|im_start|>",
    eos_token: "<|im_end|>",
    pad_token: "<|im_end|>",
    unk_token: "<|endoftext|>",
    chat_template: CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    model_max_length: maxPos,
    tokenizer_class: "GPT2Tokenizer",
  };
}
