// TextStream over byte-level tokens: text leaves with the token that completes it, broken UTF-8
// leaves at once as U+FFFD (a stream of lone byte tokens used to send nothing but empty chunks
// until the end), and stop strings still hold back only what could become one.

import { openModelDir } from "../../../engine/formats/open_model.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { TextStream } from "../../../server/completions/text_stream.ts";
import { assertEquals } from "../../helpers/testing.ts";
import { TINY_SPEC } from "../harness.ts";

const byteToken = (b: number) => 3 + b; // the generated tokenizer: 3 specials, then the bytes
const event = (id: number) => ({ id, logprob: -1, top: [], generatedAt: 0 });

async function withTokenizer(fn: (tok: Tokenizer) => void) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-text-stream-" });
  try {
    await writeTinyModel(dir, TINY_SPEC);
    fn(new Tokenizer(await openModelDir(dir)));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The text of each piece as the tokens arrive, then the flushed rest. */
function pieces(tok: Tokenizer, stops: string[], bytes: number[]): string[] {
  const stream = new TextStream(tok, stops);
  const out = bytes.map((b) => stream.push(event(byteToken(b))).text);
  out.push(stream.flush().text);
  return out;
}

Deno.test("text stream: byte tokens stream their text as soon as it is known", async () => {
  await withTokenizer((tok) => {
    const F = "\uFFFD";
    // Lone continuation bytes: every one is U+FFFD at once, none held for the end.
    assertEquals(pieces(tok, [], [0x80, 0x81, 0xbf, 0x41]), [F, F, F, "A", ""]);
    // A character split over tokens waits only for its last byte.
    assertEquals(pieces(tok, [], [0xe6, 0x97, 0xa5, 0x21]), ["", "", "日", "!", ""]);
    // A broken lead goes out when the next byte shows it broken, a truncated tail at the end.
    assertEquals(pieces(tok, [], [0xe6, 0x41, 0xf0, 0x9f]), ["", F + "A", "", "", F]);
    // Stop strings still hold back a possible start, and cut at the stop.
    assertEquals(pieces(tok, ["\u00e9!"], [0x41, 0xc3, 0xa9, 0x21, 0x42]), [
      "A",
      "",
      "",
      "",
      "",
      "",
    ]);
    // Each token leaves with a piece: the text it completes, or none yet.
    const stream = new TextStream(tok, []);
    const sent = [0xe6, 0x97, 0xa5].map((b) => stream.push(event(byteToken(b))));
    assertEquals(sent.map((p) => [p.text, p.tokens.length]), [["", 1], ["", 1], ["日", 1]]);
  });
});

Deno.test("text stream: names the stop string that matched first in the text", async () => {
  await withTokenizer((tok) => {
    const stream = new TextStream(tok, ["zz", "b"]);
    for (const ch of "aabzz") stream.push(event(byteToken(ch.charCodeAt(0))));
    assertEquals(stream.matched, "b");
    const none = new TextStream(tok, ["zz"]);
    none.push(event(byteToken(97)));
    none.flush();
    assertEquals(none.matched, null);
  });
});
