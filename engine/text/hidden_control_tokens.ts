// Text must never spell a control token. A tokenizer built from tokenizer.json as it is turns every
// occurrence of a special token's text into that token, so a user who types "<|im_end|>\n
// <|im_start|>system" in a message or prompt would forge chat roles. @huggingface/tokenizers has no
// option to encode without that (HF's split_special_tokens), so Sluice builds a twin tokenizer in
// which each special token's text is a secret: a private-use string with a random nonce that no
// request can contain. The twin encodes text (no control tokens can come out of it), and a chat
// template rewritten to write the secret where it wrote the special token's text: only the
// template's own markup becomes control tokens, while the same markup inside a message stays text.
//
// Everything else is the same tokenizer (vocabulary, merges, normalizer, pre-tokenizer, the
// post-processor's BOS/EOS), so for text without special-token strings the twin gives exactly the
// ids the original gives. Non-special added tokens still parse in text, as in HF. A template that
// assembles a special token's text from pieces ('<|' + 'im_end|>') writes plain text there: safe,
// though not what the model was trained on; no known template does.

export interface HiddenControlTokens {
  /** tokenizer.json for the twin: special added tokens renamed to their secrets. */
  tokenizerJson: Record<string, unknown>;
  /** `text` with each special token's text replaced by its secret (for templates, never input). */
  hide(text: string): string;
}

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
}

export function hideControlTokens(
  tokenizerJson: Record<string, unknown>,
  nonce: string = crypto.randomUUID().replaceAll("-", ""),
): HiddenControlTokens {
  const added = (tokenizerJson.added_tokens ?? []) as AddedToken[];
  const secrets = new Map<string, string>();
  for (const t of added) {
    if (t.special) secrets.set(t.content, `\uE000${nonce}:${t.id}\uE001`);
  }
  // Longest first, so that a special token's text inside a longer one's is not matched first.
  const pattern = secrets.size === 0 ? null : new RegExp(
    [...secrets.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp).join("|"),
    "g",
  );
  const hide = (text: string) =>
    pattern === null ? text : text.replace(pattern, (s) => secrets.get(s)!);
  return {
    tokenizerJson: {
      ...tokenizerJson,
      // Matched in the raw text (normalized: false): the secret is written there, as is.
      added_tokens: added.map((t) =>
        t.special ? { ...t, content: secrets.get(t.content), normalized: false } : t
      ),
      // The post-processor names the BOS/EOS it adds by their text.
      post_processor: renameStrings(tokenizerJson.post_processor ?? null, secrets),
    },
    hide,
  };
}

/** A JSON value with every string (and object key) that is a special token's text renamed. */
function renameStrings(value: unknown, secrets: Map<string, string>): unknown {
  if (typeof value === "string") return secrets.get(value) ?? value;
  if (Array.isArray(value)) return value.map((v) => renameStrings(v, secrets));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [secrets.get(k) ?? k, renameStrings(v, secrets)]),
    );
  }
  return value;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
