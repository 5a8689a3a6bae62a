// `deno task bench serve --clients 1,4,16`: N simultaneous streaming clients against one running
// server; aggregate tokens/s, TTFT and inter-token percentiles as the clients see them, and each
// N's throughput as a ratio to one client's, measured in the same run.

import { z } from "zod";
import { parseBenchFlags } from "../common/cli.ts";
import { runClient } from "./client.ts";
import { summarize } from "./metrics.ts";
import { modelInfo } from "./run.ts";
import { startServer } from "./server_process.ts";
import { splitFlags } from "./flags.ts";
import { materialize, type WorkloadRequest } from "./workload.ts";
import { smolShapedModelDir } from "../common/smol_model.ts";

const Flags = z.object({
  clients: z.string().regex(/^\d+(,\d+)*$/).default("1,4,16").transform((s) =>
    s.split(",").map(Number)
  ),
  model: z.string().default("smollm2-shape"),
  "server-flags": z.string().default(""),
  "prompt-len": z.coerce.number().int().min(1).default(32),
  "output-len": z.coerce.number().int().min(2).default(32),
  "request-timeout-s": z.coerce.number().positive().default(300),
});

export async function benchConcurrency(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  // "smollm2-shape": the generated SmolLM2-135M-shaped random model the decode bench uses.
  const modelArg = f.model === "smollm2-shape" ? await smolShapedModelDir() : f.model;
  const server = await startServer({
    command: [Deno.execPath(), "run", "-A", "main.ts", "serve"],
    model: modelArg,
    flags: ["--max-batch", String(Math.max(...f.clients)), ...splitFlags(f["server-flags"])],
    startTimeoutMs: 600_000,
  });
  const rows: string[] = [];
  try {
    const model = await modelInfo(server.target, f.model);
    let base = 0;
    for (const n of f.clients) {
      // Unpaced readers: the server streams as fast as it generates.
      const reqs: WorkloadRequest[] = Array.from({ length: n }, (_, i) => ({
        id: i,
        arrivalS: 0,
        promptLen: f["prompt-len"],
        promptSeed: 1000 + i,
        outputLen: f["output-len"],
        readingRate: 10000,
        sloTtftMs: 1e9,
        sloTbtMs: 1e9,
      }));
      const runStartMs = performance.now();
      const records = await Promise.all(
        reqs.map((w) =>
          runClient(server.target, w, materialize(w, model), {
            model: model.id,
            timeoutMs: f["request-timeout-s"] * 1000,
            runStartMs,
          })
        ),
      );
      const s = summarize(records);
      const tps = s.rawTokensPerS ?? 0;
      if (base === 0) base = tps;
      const ms = (x: number | null) => (x === null ? "–" : x.toFixed(0));
      rows.push(
        `| ${n} | ${tps.toFixed(1)} | ${(tps / base).toFixed(2)}× | ${ms(s.ttftMs.p50)} | ${
          ms(s.ttftMs.p99)
        } | ` +
          `${ms(s.tbtMs.p50)} | ${ms(s.tbtMs.p99)} | ${s.completed}/${s.requests} |`,
      );
    }
  } finally {
    await server.stop();
  }
  return [
    `### Concurrent streaming clients (model ${f.model}, prompt ${f["prompt-len"]} tokens, ${
      f["output-len"]
    } output tokens each)`,
    "",
    "| clients | aggregate tokens/s | vs 1 client | TTFT p50 ms | TTFT p99 ms | inter-token p50 ms | inter-token p99 ms | completed |",
    "|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}
