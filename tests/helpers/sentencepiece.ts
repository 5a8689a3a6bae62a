// A small Llama-2-style tokenizer (SentencePiece BPE: "▁" for spaces, a prepended "▁", <0xNN>
// byte fallback, no chat template) as the files a Tokenizer is built from, for tests of what
// holds beyond the tiny model's byte-level BPE.

import type { TokenizerFiles } from "../../engine/text/tokenizer.ts";

/** A Llama-2-style tokenizer: "▁" for spaces, a prepended "▁", <0xNN> byte fallback. */
export function sentencePiece(): TokenizerFiles {
  const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  let next = 3;
  for (let b = 0; b < 256; b++) {
    vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = next++;
  }
  for (const ch of "▁abcdefghijklmnopqrstuvwxyzHW,.!") vocab[ch] = next++;
  const merges = [["▁", "▁"], ["▁▁", "▁▁"], ["▁▁▁▁", "▁▁▁▁"], ["l", "l"], ["▁", "w"], ["o", "r"]];
  for (const [a, b] of merges) vocab[a + b] = next++;
  const special = (id: number, content: string) => ({
    id,
    content,
    normalized: false,
    special: true,
  });
  return {
    dir: "/virtual",
    config: { vocabSize: next, eosTokenIds: [2], bosTokenId: 1 },
    tokenizerJson: {
      added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
      normalizer: {
        type: "Sequence",
        normalizers: [
          { type: "Prepend", prepend: "▁" },
          { type: "Replace", pattern: { String: " " }, content: "▁" },
        ],
      },
      pre_tokenizer: null,
      post_processor: null,
      decoder: { type: "Sequence", decoders: [{ type: "ByteFallback" }, { type: "Fuse" }] },
      model: {
        type: "BPE",
        vocab,
        merges,
        byte_fallback: true,
        unk_token: "<unk>",
        fuse_unk: true,
      },
    },
    tokenizerConfig: { tokenizer_class: "LlamaTokenizer", bos_token: "<s>", eos_token: "</s>" },
    generationConfig: null,
  };
}
