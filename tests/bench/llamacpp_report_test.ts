// `bench llamacpp`'s arithmetic and report on hand-made measurements (no llama.cpp, no GPU): each
// round's Sluice figure divided by the same round's llama.cpp figure for that thread count, medians
// and ranges over rounds, rounds missing a side left out, the goal line against the fewest
// threads, and the greedy-token agreement count.

import {
  formatReport,
  type Measured,
  type ReportInput,
  roundRatios,
  samePrefix,
  spread,
} from "../../bench/llamacpp.ts";
import { assert, assertEquals, assertMatch, assertThrows } from "../helpers/testing.ts";

const m = (
  round: number,
  engine: Measured["engine"],
  threads: number,
  tokensPerS: number,
  what: Measured["what"] = "decode",
  kind: Measured["kind"] = "f16",
): Measured => ({ round, kind, engine, threads, what, tokensPerS });

Deno.test("spread: median of odd and even counts, lowest and highest", () => {
  assertEquals(spread([3, 1, 2]), { median: 2, min: 1, max: 3 });
  assertEquals(spread([4, 1, 3, 2]), { median: 2.5, min: 1, max: 4 });
  assertThrows(() => spread([]), /no values/);
});

Deno.test("samePrefix counts the tokens two greedy runs share before they differ", () => {
  assertEquals(samePrefix([1, 2, 3, 4], [1, 2, 9, 4]), 2);
  assertEquals(samePrefix([1, 2], [1, 2, 3]), 2);
  assertEquals(samePrefix([5], [6]), 0);
});

Deno.test("roundRatios pairs each round's figures and skips rounds missing a side", () => {
  const results = [
    m(0, "sluice", 0, 10),
    m(0, "llama.cpp", 1, 20),
    m(0, "llama.cpp", 2, 40),
    m(1, "llama.cpp", 1, 25), // listed before its Sluice figure: pairing is by round, not order
    m(1, "sluice", 0, 30),
    m(1, "llama.cpp", 2, 60),
    m(2, "sluice", 0, 99), // no llama.cpp figure in round 2
    m(0, "sluice", 0, 1000, "prefill"),
    m(0, "llama.cpp", 1, 500, "prefill"),
    m(0, "sluice", 0, 7, "decode", "q4_0"),
  ];
  assertEquals(roundRatios(results, "f16", 1, "decode"), [0.5, 1.2]);
  assertEquals(roundRatios(results, "f16", 2, "decode"), [0.25, 0.5]);
  assertEquals(roundRatios(results, "f16", 1, "prefill"), [2]);
  assertEquals(roundRatios(results, "q4_0", 1, "decode"), []);
});

Deno.test("formatReport: tables of medians and ranges, the goal line, the agreement", () => {
  const input: ReportInput = {
    adapter: "llvmpipe (LLVM 15.0.6, 256 bits)",
    lavapipeThreads: null,
    cpus: 2,
    llama: {
      gpu: false,
      buildType: "prebuilt",
      release: "b1234",
      systemInfo: "CPU : AVX2 = 1",
      cpuMathCores: 2,
      node: "v20.0.0",
    },
    flashAttention: "false",
    kinds: ["f16", "q4_0"],
    threads: [1, 2],
    steps: 64,
    rounds: 3,
    prompt: 0,
    results: [
      ...[10, 12, 11].map((x, r) => m(r, "sluice", 0, x)),
      ...[20, 20, 10].map((x, r) => m(r, "llama.cpp", 1, x)),
      ...[40, 40, 40].map((x, r) => m(r, "llama.cpp", 2, x)),
      ...[30, 30, 30].map((x, r) => m(r, "sluice", 0, x, "decode", "q4_0")),
      ...[20, 25, 30].map((x, r) => m(r, "llama.cpp", 1, x, "decode", "q4_0")),
      ...[50, 50, 50].map((x, r) => m(r, "llama.cpp", 2, x, "decode", "q4_0")),
    ],
    agreement: [
      {
        kind: "f16",
        byThreads: [{ threads: 1, same: 8, firstRank: 1 }, { threads: 2, same: 8, firstRank: 1 }],
        of: 8,
        top: 8,
      },
      {
        kind: "q4_0",
        byThreads: [{ threads: 1, same: 0, firstRank: 3 }, {
          threads: 2,
          same: 0,
          firstRank: null,
        }],
        of: 8,
        top: 8,
      },
    ],
  };
  const report = formatReport(input);
  // f16 against 1 thread: ratios 0.5, 0.6, 1.1 → median 0.60, range 0.50–1.10.
  assertMatch(
    report,
    /\| f16 \| 11\.00 \(10\.00–12\.00\) \| 1 \| 20\.00 \(10\.00–20\.00\) \| 0\.60 \(0\.50–1\.10\)× \|/,
  );
  assertMatch(
    report,
    /\| f16 \| 11\.00 \(10\.00–12\.00\) \| 2 \| 40\.00 \(40\.00–40\.00\) \| 0\.28 \(0\.25–0\.30\)× \|/,
  );
  // q4_0 against 1 thread: 1.5, 1.2, 1.0 → median 1.20.
  assertMatch(
    report,
    /\| q4_0 \| 30\.00 .* \| 1 \| 25\.00 \(20\.00–30\.00\) \| 1\.20 \(1\.00–1\.50\)× \|/,
  );
  assertMatch(report, /met for 1 of 2 kinds \(f16 0\.60×, q4_0 1\.20×\)/);
  assertMatch(
    report,
    /f16 8\/8, #1 \(1t\); 8\/8, #1 \(2t\) · q4_0 0\/8, #3 \(1t\); 0\/8, #>8 \(2t\)\./,
  );
  assertMatch(report, /llvmpipe \(LLVM 15\.0\.6, 256 bits\)/);
  assertMatch(report, /CPU backend only \(node-llama-cpp reports gpu = false\)/);
  assertMatch(report, /flash attention false/);
  assert(!report.includes("Prefill"), "no prefill table when none was measured");
});
