// `deno task bench embeddings`: encoder throughput behind the embedding face, inputs/s and
// tokens/s at batch 1 and batch 32 (one embed() call of that many inputs, one forward pass), on a
// generated all-MiniLM-L6-shaped model (hidden 384, 6 layers, 12 heads, intermediate 1536, vocab
// 30522; random weights, so the figures are the shapes' cost, not a quality). Inputs are random
// token ids of one length (the special tokens' frame is the caller's: ids go in as given). The
// first call of each batch size compiles its pipelines and is not timed. `--short` runs one layer,
// batch 1 and 4, one timed call each: the test's smoke run, not a measurement.

import { z } from "zod";
import { ensureRuntimeDir, writeTinyEncoder } from "../engine/bench_api.ts";
import { openEncoderModel } from "../runtime/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";

export const USAGE = `usage: deno task bench embeddings [flags]

Inputs/s and tokens/s of a generated all-MiniLM-shaped encoder (hidden 384, 6 layers, 12 heads,
intermediate 1536, vocab 30522) at batch 1 and 32.

  --tokens N     tokens per input (default 64)
  --reps N       timed calls per batch size (default 5)
  --batches L    batch sizes (default 1,32)
  --short        one layer, batches 1 and 4, one timed call (a smoke run)`;

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(512).default(64),
  reps: z.coerce.number().int().min(1).max(100).default(5),
  batches: z.string().default("1,32").transform((s, ctx) => {
    const list = s.split(",").map(Number);
    if (list.some((n) => !Number.isInteger(n) || n < 1 || n > 256)) {
      ctx.addIssue({ code: "custom", message: "expected a list of batch sizes 1..256" });
      return z.NEVER;
    }
    return list;
  }),
});

export interface EmbeddingsRow {
  batch: number;
  tokensPerInput: number;
  /** Median seconds of one embed() call. */
  seconds: number;
  inputsPerS: number;
  tokensPerS: number;
}

export async function benchEmbeddings(args: string[]): Promise<string> {
  const short = args.includes("--short");
  const f = parseBenchFlags(Flags, args.filter((a) => a !== "--short"));
  ensureRuntimeDir();
  const layers = short ? 1 : 6;
  const batches = short ? [1, 4] : f.batches;
  const reps = short ? 1 : f.reps;
  const dir = await Deno.makeTempDir({ prefix: "sluice-bench-embeddings-" });
  try {
    await writeTinyEncoder(dir, {
      family: "bert",
      hiddenSize: 384,
      numLayers: layers,
      numHeads: 12,
      intermediateSize: 1536,
      vocabSize: 30522,
      maxPositions: 512,
      pooling: "mean",
      dtype: "F32",
      seed: 1,
    });
    const opened = await openEncoderModel(dir);
    const embedder = opened.embedder!;
    const rows: EmbeddingsRow[] = [];
    try {
      for (const batch of batches) {
        const inputs = Array.from(
          { length: batch },
          (_, b) => Array.from({ length: f.tokens }, (_, i) => (b * 7919 + i * 104729) % 30522),
        );
        await embedder.embed(inputs); // compiles this batch's pipelines
        const times: number[] = [];
        for (let r = 0; r < reps; r++) {
          const t0 = performance.now();
          await embedder.embed(inputs);
          times.push((performance.now() - t0) / 1000);
        }
        const seconds = times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
        rows.push({
          batch,
          tokensPerInput: f.tokens,
          seconds,
          inputsPerS: batch / seconds,
          tokensPerS: (batch * f.tokens) / seconds,
        });
      }
    } finally {
      await embedder.close();
    }
    return report(rows, layers, short);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function report(rows: EmbeddingsRow[], layers: number, short: boolean): string {
  const lines = [
    `# Embeddings: a generated all-MiniLM-shaped encoder${short ? " (--short)" : ""}`,
    "",
    `hidden 384, ${layers} layer(s), 12 heads, intermediate 1536, vocab 30522; random weights; ` +
    "median of the timed calls.",
    "",
    "| batch | tokens/input | s/call | inputs/s | tokens/s |",
    "| ----: | -----------: | -----: | -------: | -------: |",
    ...rows.map((r) =>
      `| ${r.batch} | ${r.tokensPerInput} | ${r.seconds.toFixed(3)} | ${
        r.inputsPerS.toFixed(1)
      } | ${r.tokensPerS.toFixed(0)} |`
    ),
  ];
  return lines.join("\n") + "\n";
}
