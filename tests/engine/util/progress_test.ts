// progressBar without a terminal: only the end state by default (weights loading), a line per
// quarter with `quarters` (downloads), and an unknown total shown as "?" until the end.

import { progressBar } from "../../../engine/util/progress.ts";
import { assertEquals } from "../../helpers/testing.ts";

function captureStderr(fn: () => void): string[] {
  const stderr = Deno.stderr as { writeSync: (b: Uint8Array) => number; isTerminal: () => boolean };
  const { writeSync, isTerminal } = stderr;
  const out: string[] = [];
  const dec = new TextDecoder();
  stderr.isTerminal = () => false;
  stderr.writeSync = (b) => (out.push(dec.decode(b)), b.length);
  try {
    fn();
  } finally {
    stderr.writeSync = writeSync;
    stderr.isTerminal = isTerminal;
  }
  return out.join("").split("\n").filter(Boolean);
}

const MIB = 2 ** 20;

Deno.test("progressBar: in a log, the end only; with quarters, one line per quarter", () => {
  const steps = [0, 1, 2, 3, 5, 6, 7, 8].map((n) => n * MIB);
  const endOnly = captureStderr(() => {
    const bar = progressBar("loading weights");
    for (const done of steps) bar(done, 8 * MIB);
    bar(8 * MIB, 8 * MIB); // after the end: nothing more
  });
  assertEquals(endOnly, ["loading weights [##############################] 100% 8.0/8.0 MiB"]);

  const quarters = captureStderr(() => {
    const bar = progressBar("model.safetensors", { quarters: true });
    for (const done of steps) bar(done, 8 * MIB);
  });
  assertEquals(quarters.map((l) => l.match(/\d+\.\d\/8\.0 MiB$/)?.[0]), [
    "0.0/8.0 MiB",
    "2.0/8.0 MiB",
    "5.0/8.0 MiB",
    "6.0/8.0 MiB",
    "8.0/8.0 MiB",
  ]);
});

Deno.test("progressBar: an unknown total shows '?' and ends when the total is given", () => {
  const lines = captureStderr(() => {
    const bar = progressBar("tokenizer.json", { quarters: true });
    bar(MIB, null);
    bar(2 * MIB, null);
    bar(3 * MIB, 3 * MIB);
  });
  assertEquals(lines.length, 2, lines.join("\n"));
  assertEquals(lines[0].endsWith("1.0/? MiB"), true, lines[0]);
  assertEquals(lines[1].endsWith("100% 3.0/3.0 MiB"), true, lines[1]);
});
