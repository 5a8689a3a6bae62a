// Which of tokenizer.json's added tokens a model can use: special ones whose ids lie past its
// embedding's rows are left out. Gemma 3's text models (270M: 262,144 rows) share a tokenizer whose
// <image_soft_token> is id 262,144; the model can neither read nor write it. Any other id past the
// rows still fails the load where the tokenizer is checked. The tokenizer (text/tokenizer.ts) and
// the GGUF writer (gguf_tokenizer_metadata.ts) both keep this one rule.

export interface AddedToken {
  id: number;
  special?: boolean;
}

/** `added` without the special tokens at or past `rows`. */
export function addedTokensWithin<T extends AddedToken>(added: readonly T[], rows: number): T[] {
  return added.filter((t) => !(t.id >= rows && t.special));
}
