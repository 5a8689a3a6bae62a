// `bench gpu --short` runs here: every section of the GPU report on the software adapter (one
// matvec, one model file, few tokens), so the command a lent GPU machine runs is known to work.

import { benchGpu, knownBandwidth } from "../../bench/gpu.ts";
import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";

Deno.test("bench gpu: the short run writes every section", async () => {
  const report = await benchGpu(["--short", "--kinds", "f16", "--tokens", "2"]);
  for (
    const heading of [
      "# GPU bench: ",
      "## Adapter",
      "## Matvec GB/s",
      "## Decode tokens/s",
      "## Speculative decoding (k = 4)",
    ]
  ) assert(report.includes(heading), heading);
  assertMatch(report, /- features: .*shader-f16/);
  assertMatch(
    report,
    /\| f16 \| [\d.]+ \| [\d.]+ \/ [\d.]+ \| [\d.]+ \/ [\d.]+ \| [\d.]+ \/ [\d.]+ \| 1\.00× \|/,
  );
  assertMatch(report, /integer-dot kernels/);
  // Speculation at p = 0.8 against none, its tokens checked equal to plain decoding's.
  assertMatch(report, /\| 1 \| 0\.8 \| \d+ \| \d+ \| \d+ \| [\d.]+ \| [\d.]+× \|/);
});

Deno.test("bench gpu: the bandwidth of the GPUs a lent machine may have", () => {
  assertEquals(knownBandwidth("NVIDIA H200")?.gbs, 4800);
  assertEquals(knownBandwidth("NVIDIA H100 PCIe")?.gbs, 2000);
  assertEquals(knownBandwidth("NVIDIA H100 80GB HBM3")?.gbs, 3350);
  assertEquals(knownBandwidth("llvmpipe (LLVM 15.0.6, 256 bits)"), null);
});
