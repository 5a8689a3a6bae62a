// incompleteUtf8Tail: which byte strings end in a character that later bytes can still complete,
// by hand for each kind of lead and broken sequence, and against TextDecoder's streaming mode on
// random bytes (the decoder the tokenizers use holds back exactly those bytes).

import { incompleteUtf8Tail } from "../../../engine/text/utf8_tail.ts";
import { assertEquals } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";

Deno.test("utf8 tail: each kind of ending", () => {
  const cases: [number[], number, string][] = [
    [[], 0, "nothing"],
    [[0x41], 0, "ASCII"],
    [[0xc3], 1, "a 2-byte lead"],
    [[0xc3, 0xa9], 0, "é, complete"],
    [[0xe6], 1, "a 3-byte lead"],
    [[0xe6, 0x97], 2, "two of 日's three bytes"],
    [[0xe6, 0x97, 0xa5], 0, "日, complete"],
    [[0xf0, 0x9f, 0x98], 3, "three of 😀's four bytes"],
    [[0xf0, 0x9f, 0x98, 0x80], 0, "😀, complete"],
    [[0x80], 0, "a stray continuation byte"],
    [[0xf0, 0x9f, 0x98, 0x80, 0x80], 0, "a continuation byte too many"],
    [[0xc0], 0, "C0 never starts a character"],
    [[0xc1], 0, "C1 never starts a character"],
    [[0xf5], 0, "F5 never starts a character"],
    [[0xff], 0, "FF never starts a character"],
    [[0xe0, 0x80], 0, "E0 80: an overlong form"],
    [[0xe0, 0xa0], 2, "E0 A0: a valid start"],
    [[0xed, 0xa0], 0, "ED A0: a surrogate"],
    [[0xed, 0x9f], 2, "ED 9F: a valid start"],
    [[0xf0, 0x80], 0, "F0 80: an overlong form"],
    [[0xf4, 0x90], 0, "F4 90: past U+10FFFF"],
    [[0xf4, 0x8f, 0xbf], 3, "F4 8F BF: a valid start"],
    [[0xe6, 0x41], 0, "a lead cut short by ASCII"],
    [[0xe6, 0x97, 0x41], 0, "two bytes cut short by ASCII"],
    [[0xc3, 0xe6], 1, "a broken lead, then a new one"],
    [[0x41, 0xe6, 0x97, 0xa5, 0xf0, 0x9f], 2, "text, then two of four bytes"],
  ];
  for (const [bytes, tail, what] of cases) assertEquals(incompleteUtf8Tail(bytes), tail, what);
});

Deno.test("utf8 tail: agrees with TextDecoder's streaming mode on random bytes", () => {
  const seed = testSeed();
  const next = rng(seed);
  // Bytes drawn mostly from the interesting ranges: ASCII, continuations, leads, never-leads.
  const pools = [[0x00, 0x7f], [0x80, 0xbf], [0xc0, 0xdf], [0xe0, 0xef], [0xf0, 0xff]];
  for (let n = 0; n < 2000; n++) {
    const bytes = Uint8Array.from({ length: 1 + Math.floor(next() * 8) }, () => {
      const [lo, hi] = pools[Math.floor(next() * pools.length)];
      return lo + Math.floor(next() * (hi - lo + 1));
    });
    const tail = incompleteUtf8Tail(bytes);
    const streamed = new TextDecoder().decode(bytes, { stream: true });
    const whole = new TextDecoder().decode(bytes);
    const what = `seed ${seed}: ${[...bytes].map((b) => b.toString(16))}`;
    // The decoder waits for exactly the bytes we call incomplete, and for no others.
    assertEquals(streamed, new TextDecoder().decode(bytes.subarray(0, bytes.length - tail)), what);
    assertEquals(whole, tail > 0 ? streamed + "\uFFFD" : streamed, what);
  }
});
