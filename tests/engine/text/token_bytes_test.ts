// TokenBytes: the bytes behind each token for the two tokenizer families whose tokens can hold part
// of a character (byte-level BPE, SentencePiece byte fallback), and none for the others; a token
// holding a character's first bytes keeps a stream waiting until the token with the rest.

import { gpt2ByteAlphabet, TokenBytes } from "../../../engine/text/token_bytes.ts";
import { assertEquals } from "../../helpers/testing.ts";

const alphabet = gpt2ByteAlphabet();
const spell = (bytes: number[]) => bytes.map((b) => alphabet[b]).join("");

Deno.test("token bytes: byte-level tokens, multi-byte pieces and added tokens", () => {
  // 0: an added token; 1: "日" cut after two bytes; 2: its last byte and "!"; 3: " the"
  const vocab = ["<|im_end|>", spell([0xe6, 0x97]), spell([0xa5, 0x21]), spell([...utf8(" the")])];
  const bytes = new TokenBytes({ type: "ByteLevel" }, (id) => vocab[id], [0]);
  assertEquals([...bytes.bytesOf(1)], [0xe6, 0x97]);
  assertEquals([...bytes.bytesOf(3)], [...utf8(" the")]);
  assertEquals([...bytes.bytesOf(0)], [...utf8("<|im_end|>")], "added tokens are text");
  assertEquals(bytes.incompleteTail([3, 1]), 2);
  assertEquals(bytes.incompleteTail([3, 1, 2]), 0);
  assertEquals(bytes.incompleteTail([1, 0]), 0, "text after a cut character ends it");
  assertEquals(bytes.incompleteTail([1, 0], (id) => id === 0), 2, "unless it is skipped");
  // Inside a Sequence decoder, as some tokenizer.json files have it.
  const nested = new TokenBytes(
    { type: "Sequence", decoders: [{ type: "ByteLevel" }] },
    (id) => vocab[id],
    [0],
  );
  assertEquals(nested.incompleteTail([1]), 2);
});

Deno.test("token bytes: byte fallback, and tokenizers of whole characters", () => {
  const vocab = ["<0xE6>", "<0x97>", "▁hello", "<0xA5>"];
  const decoder = {
    type: "Sequence",
    decoders: [{ type: "Replace" }, { type: "ByteFallback" }, { type: "Fuse" }],
  };
  const fallback = new TokenBytes(decoder, (id) => vocab[id], []);
  assertEquals([...fallback.bytesOf(0)], [0xe6]);
  assertEquals(fallback.incompleteTail([2, 0, 1]), 2);
  assertEquals(fallback.incompleteTail([2, 0, 1, 3]), 0);
  const whole = new TokenBytes({ type: "WordPiece" }, (id) => vocab[id], []);
  assertEquals(whole.incompleteTail([0, 1]), 0, "<0xE6> is just text here");
});

function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
