// Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model.
// Reports tokens/s at batch 1, 4 and 16, prefill tokens/s, and dispatches and submissions per step;
// with --quant, the same model as quantized GGUF files against f16 (decode_quant.ts).

import { z } from "zod";
import { Engine } from "../engine/engine.ts";
import { openGpu } from "../engine/gpu/device.ts";
import { Runtime } from "../runtime/service.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { GREEDY, measureDecode, prompt } from "./decode_measure.ts";
import { QUANT_KINDS, type QuantKind } from "./gguf_models.ts";
import { smolShapedModelDir } from "./common/smol_model.ts";

export { SMOLLM2_SHAPE, smolShapedModelDir } from "./common/smol_model.ts";

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(100_000).default(24),
  quant: z.string().transform((s, ctx) => {
    const list = [...new Set(s.split(",").map((a) => a.trim()).filter(Boolean))];
    const bad = list.find((a) => !(QUANT_KINDS as readonly string[]).includes(a));
    if (bad || list.length === 0) {
      ctx.addIssue({ code: "custom", message: `expected a list of ${QUANT_KINDS.join(", ")}` });
      return z.NEVER;
    }
    return list as QuantKind[];
  }).optional(),
  rounds: z.coerce.number().int().min(1).max(20).default(3),
});

export const USAGE = `usage: deno task bench decode [--tokens N] [--quant KINDS [--rounds N]]

Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model: tokens/s
at batch 1, 4 and 16, prefill tokens/s, dispatches and submissions per step.

With --quant, the same model as GGUF files of each kind instead (written once, cached beside it):
decode tokens/s at batch 1 and 16 and weight bytes read per token, each as a ratio to f16 (always
included), the kinds interleaved round by round, medians reported.

  --tokens N    decode steps measured per batch size (default 24)
  --quant KINDS comma-separated: ${QUANT_KINDS.join(", ")}
  --rounds N    with --quant: measurements of each kind and batch size (default 3)`;

export async function benchDecode(args: string[]): Promise<string> {
  const flags = parseBenchFlags(Flags, args);
  const steps = flags.tokens;
  if (flags.quant) {
    const { benchDecodeQuant } = await import("./decode_quant.ts");
    return benchDecodeQuant(flags.quant, steps, flags.rounds);
  }
  const gpu = await openGpu();
  let submits = 0;
  const queue = gpu.device.queue;
  const submit = queue.submit.bind(queue);
  queue.submit = (buffers: GPUCommandBuffer[]) => {
    submits++;
    return submit(buffers);
  };
  const engine = await Engine.load({
    modelDir: await smolShapedModelDir(),
    gpu,
    maxSlots: 16,
    maxRows: 256,
    gpuKvMb: 512,
  });
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 100_000,
    eosIds: [],
  });
  const rows: string[] = [];
  const V = engine.info.vocabSize;

  // Prefill: one 256-token prompt, one sampled token.
  {
    const t0 = performance.now();
    const h = runtime.submit({
      ids: prompt(0, 256, V),
      maxTokens: 1,
      sampling: GREEDY,
      stopIds: [],
    });
    for await (const _ of h.tokens);
    const s = (performance.now() - t0) / 1000;
    rows.push(
      `| prefill, 256-token prompt | ${(256 / s).toFixed(1)} tokens/s | time to first token ${
        (s * 1000).toFixed(0)
      } ms |`,
    );
  }

  let base = 0;
  for (const batch of [1, 4, 16]) {
    const run = await measureDecode(runtime, V, batch, steps, () => submits);
    if (batch === 1) base = run.tokensPerS;
    const perStep = run.submits / Math.max(1, run.steps);
    rows.push(
      `| decode, batch ${batch} | ${run.tokensPerS.toFixed(1)} tokens/s | ${
        (run.tokensPerS / base).toFixed(2)
      }× batch 1; ` +
        `${perStep.toFixed(2)} submissions/step over ${run.steps} steps |`,
    );
  }
  const info = engine.info;
  const dispatches = info.dispatchesPerStep;
  await runtime.close();
  return [
    `### Decode benchmark (${info.adapter}, ${info.dtype}, SmolLM2-135M shape, random weights)`,
    "",
    `Dispatches per step: ${dispatches}`,
    "",
    "| measurement | throughput | notes |",
    "|---|---|---|",
    ...rows,
  ].join("\n");
}
