// The bench models' vocabulary padding (bench/gguf_vocab_pad.ts), which lets llama.cpp load the
// files Sluice's converter writes: a tiny GGUF whose embedding has more rows than its tokenizer
// has tokens comes out with "[PAD<id>]" tokens of type unused up to the row count, every other
// metadata value and every tensor's bytes unchanged, and still loads as a Sluice tokenizer; a file
// with nothing to pad is copied byte for byte; mismatched inputs are refused.

import { join } from "node:path";
import { readGguf } from "../../engine/formats/gguf.ts";
import { ggufTokenizerFiles } from "../../engine/formats/gguf_tokenizer.ts";
import { padGgufVocab, padTokens } from "../../bench/gguf_vocab_pad.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";

const SPEC = {
  hiddenSize: 64,
  intermediateSize: 96,
  numLayers: 1,
  numHeads: 4,
  numKvHeads: 2,
  tied: true,
  dtype: "F32" as const,
  seed: 11,
};

Deno.test("padTokens adds [PAD<id>] tokens of type unused up to the row count", () => {
  const got = padTokens(["a", "b", "c"], [1, 3, 1], 6);
  assertEquals(got.tokens, ["a", "b", "c", "[PAD3]", "[PAD4]", "[PAD5]"]);
  assertEquals(got.types, [1, 3, 1, 5, 5, 5]);
  assertEquals(padTokens(["a"], [1], 1), { tokens: ["a"], types: [1] });
  assertThrows(() => padTokens(["a", "b"], [1], 4), /2 tokens but 1 token types/);
  assertThrows(() => padTokens(["a", "b"], [1, 1], 1), /more than 1 rows/);
});

async function bytesAt(path: string, offset: number, length: number): Promise<Uint8Array> {
  using f = await Deno.open(path);
  await f.seek(offset, Deno.SeekMode.Start);
  const out = new Uint8Array(length);
  for (let at = 0; at < length;) at += (await f.read(out.subarray(at)))!;
  return out;
}

Deno.test("padGgufVocab pads a GGUF's vocabulary to token_embd's rows, all else unchanged", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-vocab-pad-" });
  try {
    // 600 embedding rows, a tokenizer of 512 tokens: what the bench model is at 49,152 rows.
    const g = await writeTinyGguf(dir, { ...SPEC, vocabSize: 600 }, { type: "F16" });
    const padded = join(dir, "padded.gguf");
    assertEquals(await padGgufVocab(g.path, padded), 88);

    const before = await readGguf(g.path);
    const after = await readGguf(padded);
    const tokens = after.metadata["tokenizer.ggml.tokens"] as string[];
    const types = (after.metadata["tokenizer.ggml.token_type"] as number[]).map(Number);
    const oldTokens = before.metadata["tokenizer.ggml.tokens"] as string[];
    assertEquals(oldTokens.length, 512);
    assertEquals(tokens.length, 600);
    assertEquals(tokens.slice(0, 512), oldTokens);
    assertEquals(tokens[512], "[PAD512]");
    assertEquals(tokens[599], "[PAD599]");
    assertEquals(
      types.slice(0, 512),
      (before.metadata["tokenizer.ggml.token_type"] as number[]).map(Number),
    );
    assert(types.slice(512).every((t) => t === 5), "padding is of type unused");
    for (const [key, value] of Object.entries(before.metadata)) {
      if (key === "tokenizer.ggml.tokens" || key === "tokenizer.ggml.token_type") continue;
      assertEquals(after.metadata[key], value, key);
    }
    assertEquals(Object.keys(after.metadata).sort(), Object.keys(before.metadata).sort());

    assertEquals([...after.tensors.keys()], [...before.tensors.keys()]);
    for (const [name, t] of before.tensors) {
      const u = after.tensors.get(name)!;
      assertEquals([u.dims, u.ggmlType, u.byteLength], [t.dims, t.ggmlType, t.byteLength], name);
      assertEquals(
        await bytesAt(padded, u.dataOffset, u.byteLength),
        await bytesAt(g.path, t.dataOffset, t.byteLength),
        name,
      );
    }
    // Sluice still reads its tokenizer; the padding is no special token.
    const files = ggufTokenizerFiles(after);
    assert(files.tokenizerJson !== null);

    // Nothing left to pad: a byte-for-byte copy.
    const again = join(dir, "again.gguf");
    assertEquals(await padGgufVocab(padded, again), 0);
    assertEquals(await Deno.readFile(again), await Deno.readFile(padded));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
