// hideControlTokens: special added tokens (and the post-processor's names for them) get secret
// text, other added tokens keep theirs, and hide() rewrites template text longest match first.

import { hideControlTokens } from "../../../engine/text/hidden_control_tokens.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

Deno.test("hidden control tokens: specials renamed everywhere they are named", () => {
  const json = {
    added_tokens: [
      { id: 0, content: "<s>", special: true, normalized: true, lstrip: false },
      { id: 1, content: "<s>x", special: true },
      { id: 2, content: "<think>", special: false },
    ],
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      special_tokens: { "<s>": { id: "<s>", ids: [0], tokens: ["<s>"] } },
    },
    model: { type: "BPE" },
  };
  const hidden = hideControlTokens(json, "n0nce");
  const [s, sx, think] = hidden.tokenizerJson.added_tokens as { content: string }[];
  assertEquals(s, { ...json.added_tokens[0], content: "\uE000n0nce:0\uE001", normalized: false });
  assertEquals(sx.content, "\uE000n0nce:1\uE001");
  assertEquals(think, json.added_tokens[2], "non-special added tokens are left as they are");
  assertEquals(hidden.tokenizerJson.post_processor, {
    type: "TemplateProcessing",
    single: [
      { SpecialToken: { id: "\uE000n0nce:0\uE001", type_id: 0 } },
      { Sequence: { id: "A", type_id: 0 } },
    ],
    special_tokens: {
      "\uE000n0nce:0\uE001": {
        id: "\uE000n0nce:0\uE001",
        ids: [0],
        tokens: ["\uE000n0nce:0\uE001"],
      },
    },
  });
  assert(hidden.tokenizerJson.model === json.model, "the vocabulary is shared, not copied");
  assertEquals(
    hidden.hide("{{ '<s>x' }}<s><think>{{ '<s' }}"),
    "{{ '\uE000n0nce:1\uE001' }}\uE000n0nce:0\uE001<think>{{ '<s' }}",
  );
  assertEquals(json.added_tokens[0].content, "<s>", "the original is not modified");
});

Deno.test("hidden control tokens: a fresh nonce each time", () => {
  const json = { added_tokens: [{ id: 7, content: "<|im_end|>", special: true }] };
  const a = hideControlTokens(json).hide("<|im_end|>");
  const b = hideControlTokens(json).hide("<|im_end|>");
  assert(a !== b && a.startsWith("\uE000") && a.endsWith(":7\uE001"), `${a} ${b}`);
});
