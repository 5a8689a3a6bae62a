// The parts of Hugging Face's tokenizer.json that Sluice writes itself, for a GGUF file's
// vocabulary rebuilt (gguf_tokenizer.ts) and for the tiny models' trained one
// (sources/tiny_tokenizer.ts): the file's frame, an added token, and a BPE model, each with every
// field @huggingface/tokenizers reads.

export interface AddedToken {
  id: number;
  content: string;
  single_word: false;
  lstrip: false;
  rstrip: false;
  normalized: false;
  special: boolean;
}

/** A token matched as a whole string before the model sees the text (`special`: a control one). */
export function addedToken(id: number, content: string, special: boolean): AddedToken {
  return {
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special,
  };
}

/** tokenizer.json: its version, no truncation or padding, the added tokens, then `sections`. */
export function tokenizerFile(
  addedTokens: AddedToken[],
  sections: Record<string, unknown>,
): Record<string, unknown> {
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    ...sections,
  };
}

export interface BpeOptions {
  vocab: Record<string, number>;
  merges: string[][];
  unkToken: string | null;
  /** SentencePiece: unknown pieces fuse into one unk, and unknown bytes fall back to <0xNN>. */
  fuseUnk: boolean;
  byteFallback: boolean;
  /** A word that is one vocabulary entry is taken whole, before any merge (Llama 3's BPE). */
  ignoreMerges: boolean;
}

/** tokenizer.json's `model` section for a BPE vocabulary. */
export function bpeModel(o: BpeOptions): Record<string, unknown> {
  return {
    type: "BPE",
    dropout: null,
    unk_token: o.unkToken,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: o.fuseUnk,
    byte_fallback: o.byteFallback,
    ignore_merges: o.ignoreMerges,
    vocab: o.vocab,
    merges: o.merges,
  };
}
