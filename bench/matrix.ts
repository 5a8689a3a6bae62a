// `deno task bench matrix [flags]`: issue 19's workload matrix. Each cell of bench/matrix/cells.ts
// (reader speeds, arrivals, prompt lengths, KV budgets) is generated from its seed, bounded by the
// context its budget leaves, and replayed against every configuration (by default fcfs as vLLM V1
// runs it, the baseline, and the server's defaults), one server each; the report gives per cell
// each configuration's figures, its ratios to the baseline and the goals met.

import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseBenchFlags } from "./common/cli.ts";
import { buildReport, slug } from "./serve/report.ts";
import { workloadToJsonl } from "./serve/workload.ts";
import {
  applyOverrides,
  type Cell,
  CELLS,
  cellWorkload,
  describeCell,
  selectCells,
} from "./matrix/cells.ts";
import {
  bounds,
  checkBaseline,
  CommonFlags,
  configsArg,
  quote,
  shellArgs,
} from "./matrix/flags.ts";
import { type CellRun, matrixReport } from "./matrix/report.ts";
import { ContextProbe, deadlineMs, runEnv, runWorkload, withBudget } from "./matrix/runner.ts";
import { z } from "zod";

export const USAGE = `usage: deno task bench matrix [flags]

Replays every cell of the workload matrix (bench/matrix/cells.ts) against each configuration, one
server per configuration and cell, and writes a report folder: per cell the figures, the ratios to
the baseline and issue 19's goals, with each cell's workload.jsonl and serving report.

  --configs "name=--flags;..."   configurations (default: fcfs-vllm, fcfs as vLLM V1 runs it, and
                                 default, the server's defaults); the cell adds --gpu-kv-mb
  --baseline NAME        the configuration the others are divided by (default fcfs-vllm)
  --cells ID,...         cells to run (default all: ${CELLS.length})
  --model M              model to serve (default demo)
  --tight-kv-mb MB, --ample-kv-mb MB   the two budgets (default 2, 64: sized for demo)
  --rate-scale F         multiplies every arrival rate (default 1)
  --seed-offset N        added to every cell's seed (default 0)
  --max-requests N, --duration-s S     caps on every cell (smoke runs)
  --context N            the model's context (default: asked of each configuration's server)
  --out DIR              report folder parent (default bench/reports)
  --request-timeout-s S, --drain-s S, --start-timeout-s S   bounds (default 300, 240, 300)
  --warmup N             unmeasured warm-up requests per server (default 1)
  --scrape-ms MS         /metrics scrape interval (default 250)`;

const MatrixFlags = CommonFlags.extend({
  // A burst of documents takes minutes to prefill on a slow device: room for all of them.
  ...bounds(300, 240),
  cells: z.string().optional().transform((s) =>
    s === undefined ? undefined : s.split(",").map((x) => x.trim()).filter((x) => x !== "")
  ),
  "rate-scale": z.coerce.number().positive().max(1000).default(1),
  "max-requests": z.coerce.number().int().min(1).optional(),
  "duration-s": z.coerce.number().positive().optional(),
}).superRefine((f, ctx) => {
  const problem = checkBaseline(f);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
  if (f.cells?.length === 0) {
    ctx.addIssue({ code: "custom", path: ["cells"], message: "none given" });
  }
  try {
    selectCells(f.cells);
  } catch (e) {
    ctx.addIssue({ code: "custom", path: ["cells"], message: (e as Error).message });
  }
});

export interface BenchMatrixHooks {
  serverCommand?: string[];
  log?: (line: string) => void;
  savedMarkdownDir?: string;
}

const REPO_ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "..");

export async function benchMatrix(args: string[], hooks: BenchMatrixHooks = {}): Promise<string> {
  const f = parseBenchFlags(MatrixFlags, args);
  const log = hooks.log ?? ((l: string) => console.error(l));
  const overrides = {
    rateScale: f["rate-scale"],
    seedOffset: f["seed-offset"],
    maxRequests: f["max-requests"],
    durationS: f["duration-s"],
  };
  const cells = selectCells(f.cells).map((c) => applyOverrides(c, overrides));
  const budgetMb = (c: Cell) => (c.budget === "tight" ? f["tight-kv-mb"] : f["ample-kv-mb"]);
  const env = runEnv(f, hooks.serverCommand, REPO_ROOT, log);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const folder = resolve(f.out, `matrix-${stamp}`);
  await Deno.mkdir(folder, { recursive: true });
  await Deno.writeTextFile(`${folder}/cells.json`, JSON.stringify(cells, null, 2) + "\n");
  log(`bench matrix: ${cells.length} cell(s) × ${f.configs.length} configuration(s); ${folder}`);

  const probe = new ContextProbe(env);
  const runs: CellRun[] = [];
  for (const [i, cell] of cells.entries()) {
    const tag = `[${i + 1}/${cells.length} ${cell.id}]`;
    const mb = budgetMb(cell);
    const configs = f.configs.map((c) => withBudget(c, mb));
    const maxContext = f.context ?? await probe.contextFor(configs);
    const workload = cellWorkload(cell, maxContext);
    const dir = `${folder}/${slug(cell.id)}`;
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(`${dir}/workload.jsonl`, workloadToJsonl(workload));
    log(`${tag} ${workload.length} requests: ${describeCell(cell, mb)}`);
    const deadline = deadlineMs(workload, cell.durationS, f["drain-s"]);
    const results = await runWorkload(workload, configs, env, dir, deadline, tag);
    const sum = (g: (r: (typeof workload)[number]) => number) =>
      workload.reduce((s, r) => s + g(r), 0);
    const serve = buildReport({
      title: `Matrix cell ${cell.id}`,
      context: [`Workload: ${describeCell(cell, mb)}; ${workload.length} requests.`],
      results,
      baseline: f.baseline,
      replayCommand: `deno task bench serve --configs ${quote(configsArg(configs))} --model ${
        quote(f.model)
      } --workload trace --trace ${
        quote(`${dir}/workload.jsonl`)
      } --max-requests ${workload.length} --baseline ${quote(f.baseline)}`,
    });
    await Deno.writeTextFile(`${dir}/report.md`, serve.markdown);
    for (const [name, svg] of serve.svgs) await Deno.writeTextFile(`${dir}/${name}`, svg);
    runs.push({
      cell,
      budgetMb: mb,
      maxContext,
      requests: workload.length,
      promptTokens: sum((r) => r.promptLen ?? 0),
      outputTokens: sum((r) => r.outputLen),
      folder: slug(cell.id),
      results,
    });
  }

  const model = runs.flatMap((r) => r.results).find((r) => r.model)?.model;
  const changed = [
    f["rate-scale"] !== 1 ? `arrival rates × ${f["rate-scale"]}` : "",
    f["seed-offset"] ? `seeds + ${f["seed-offset"]}` : "",
    f["max-requests"] ? `at most ${f["max-requests"]} requests per cell` : "",
    f["duration-s"] ? `arrivals within ${f["duration-s"]} s` : "",
  ].filter((x) => x !== "");
  const markdown = matrixReport({
    title: `Workload matrix, ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC`,
    context: [
      `${cells.length} cells (bench/matrix/cells.ts${
        changed.length ? `, changed by the flags: ${changed.join(", ")}` : ""
      }; as run in cells.json); budgets: tight --gpu-kv-mb ${f["tight-kv-mb"]}, ample ${
        f["ample-kv-mb"]
      }.`,
      model
        ? `Model \`${model.id}\` (--model ${f.model}), vocab ${model.vocabSize}.`
        : `Model --model ${f.model} (no server answered).`,
      `Bounds: per-request timeout ${f["request-timeout-s"]} s; each replay ends ${
        f["drain-s"]
      } s after its last arrival; ${f.warmup} warm-up request(s) per server, not counted.`,
      `Folder: \`${folder}\`.`,
    ],
    baseline: f.baseline,
    runs,
    reproduce: `deno task bench matrix ${shellArgs(args)}`.trim(),
  });
  await Deno.writeTextFile(`${folder}/report.md`, markdown);
  // bench/main.ts saves the returned text elsewhere; point the cells' links into the folder.
  const prefix = relative(resolve(hooks.savedMarkdownDir ?? "bench/reports"), folder);
  return markdown.replace(/\]\(([^)\s]+\/report\.md)\)/g, (_, file) => `](${prefix}/${file})`);
}
