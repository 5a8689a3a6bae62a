// The embeddings bench's smoke run (--short: one layer, batches 1 and 4, one timed call) runs end
// to end and reports a positive, finite rate for each batch size.

import { benchEmbeddings } from "../../bench/embeddings.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

Deno.test("bench embeddings --short: a row per batch with finite positive rates", async () => {
  const report = await benchEmbeddings(["--short", "--tokens", "8"]);
  const rows = report.split("\n").filter((l) => /^\| \d/.test(l));
  assertEquals(rows.length, 2, report);
  for (const [i, row] of rows.entries()) {
    const [batch, tokens, seconds, inputsPerS, tokensPerS] = row.split("|").slice(1, 6).map(Number);
    assertEquals([batch, tokens], [[1, 4][i], 8]);
    for (const v of [seconds, inputsPerS, tokensPerS]) assert(Number.isFinite(v) && v > 0, row);
    assert(Math.abs(tokensPerS / inputsPerS - 8) < 0.5, row);
  }
});
