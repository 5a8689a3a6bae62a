// `deno task bench capacity [flags]`: issue 19's capacity sweep. For each configuration, the
// highest steady Poisson arrival rate at which at least 90% of requests meet both their TTFT and
// TBT SLOs, searched between two bounds (bench/matrix/capacity_search.ts), each rate one seeded
// run of fixed length on a fresh server; the report gives each configuration's rate ÷ the
// baseline's.

import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { parseBenchFlags } from "./common/cli.ts";
import { buildReport, slug } from "./serve/report.ts";
import { MAX_REQUESTS_CAP, workloadToJsonl } from "./serve/workload.ts";
import {
  applyOverrides,
  CELLS,
  cellWorkload,
  describeCell,
  describeRequests,
  selectCells,
} from "./matrix/cells.ts";
import { type Capacity, roundRate, searchCapacity } from "./matrix/capacity_search.ts";
import { capacityReport, type ConfigCapacity, type PointDetail } from "./matrix/capacity_report.ts";
import {
  bounds,
  checkBaseline,
  CommonFlags,
  configsArg,
  quote,
  shellArgs,
} from "./matrix/flags.ts";
import { ContextProbe, deadlineMs, runEnv, runWorkload, withBudget } from "./matrix/runner.ts";

const DEFAULT_CELL = "chat-steady-human-tight";

export const USAGE = `usage: deno task bench capacity [flags]

For each configuration, the highest steady Poisson arrival rate at which at least --target of the
requests meet both their TTFT and TBT SLOs (SLO goodput), by bisection in log space between
--rate-lo and --rate-hi; each rate is one seeded run of --duration-s on a fresh server. Requests
are drawn as in a matrix cell (--cell: its readers, prompt lengths, budget, SLOs and seed).

  --configs "name=--flags;..."   configurations (default: fcfs-vllm and default, as in matrix)
  --baseline NAME        the configuration the others are divided by (default fcfs-vllm)
  --cell ID              the matrix cell whose requests are drawn (default ${DEFAULT_CELL})
  --rate-lo R, --rate-hi R       bounds of the search, requests/s (default 0.1, 3.2)
  --steps N              bisection steps after the two bounds (default 5)
  --duration-s S         arrivals per run (default 120)
  --max-requests N       cap per run (default 400)
  --target F             SLO goodput a rate must keep (default 0.9)
  --request-timeout-s S, --drain-s S   bounds of each run (default 120, 60)
  --model M, --tight-kv-mb MB, --ample-kv-mb MB, --seed-offset N, --context N, --out DIR,
  --start-timeout-s S, --warmup N, --scrape-ms MS   as in matrix`;

const CapacityFlags = CommonFlags.extend({
  // Past capacity the backlog only grows: a short drain ends those runs sooner, as misses.
  ...bounds(120, 60),
  cell: z.string().default(DEFAULT_CELL),
  "rate-lo": z.coerce.number().positive().max(1000).default(0.1),
  "rate-hi": z.coerce.number().positive().max(1000).default(3.2),
  steps: z.coerce.number().int().min(0).max(12).default(5),
  // 12 requests at the lowest rate: 90% SLO goodput then allows one miss.
  "duration-s": z.coerce.number().positive().max(3600).default(120),
  "max-requests": z.coerce.number().int().min(1).max(MAX_REQUESTS_CAP).default(400),
  target: z.coerce.number().gt(0).max(1).default(0.9),
}).superRefine((f, ctx) => {
  const problem = checkBaseline(f);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
  if (!CELLS.some((c) => c.id === f.cell)) {
    ctx.addIssue({ code: "custom", path: ["cell"], message: `unknown cell "${f.cell}"` });
  }
  if (!(f["rate-hi"] > f["rate-lo"])) {
    ctx.addIssue({ code: "custom", path: ["rate-hi"], message: "must be above --rate-lo" });
  }
});

export interface BenchCapacityHooks {
  serverCommand?: string[];
  log?: (line: string) => void;
  savedMarkdownDir?: string;
}

const REPO_ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "..");

export async function benchCapacity(
  args: string[],
  hooks: BenchCapacityHooks = {},
): Promise<string> {
  const f = parseBenchFlags(CapacityFlags, args);
  const log = hooks.log ?? ((l: string) => console.error(l));
  const template = applyOverrides(selectCells([f.cell])[0], { seedOffset: f["seed-offset"] });
  const mb = template.budget === "tight" ? f["tight-kv-mb"] : f["ample-kv-mb"];
  const configs = f.configs.map((c) => withBudget(c, mb));
  const env = runEnv(f, hooks.serverCommand, REPO_ROOT, log);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const folder = resolve(f.out, `capacity-${stamp}`);
  await Deno.mkdir(folder, { recursive: true });
  const maxContext = f.context ?? await new ContextProbe(env).contextFor(configs);
  /** The cell at a steady rate: the same seed, so the same requests in the same order. */
  const cellAt = (rate: number) => ({
    ...template,
    arrival: { kind: "steady" as const, rate },
    durationS: f["duration-s"],
    maxRequests: f["max-requests"],
  });
  log(`bench capacity: ${configs.length} configuration(s); ${describeRequests(template, mb)}`);

  const measured: ConfigCapacity[] = [];
  for (const config of configs) {
    const details: PointDetail[] = [];
    const measure = async (rate: number): Promise<number | null> => {
      const cell = cellAt(rate);
      const workload = cellWorkload(cell, maxContext);
      const name = `${slug(config.name)}/rate-${rate}`;
      const dir = `${folder}/${name}`;
      await Deno.mkdir(dir, { recursive: true });
      await Deno.writeTextFile(`${dir}/workload.jsonl`, workloadToJsonl(workload));
      const deadline = deadlineMs(workload, cell.durationS, f["drain-s"]);
      const tag = `[${config.name} @ ${rate} req/s, ${workload.length} requests]`;
      if (workload.length === 0) {
        const error = `no arrival within ${cell.durationS} s: raise --duration-s`;
        details.push({
          rate,
          requests: 0,
          good: 0,
          goodput: null,
          timedOut: 0,
          folder: name,
          error,
        });
        log(`${tag} ${error}`);
        return null;
      }
      const [r] = await runWorkload(workload, [config], env, dir, deadline, tag);
      const serve = buildReport({
        title: `Capacity sweep: ${config.name} at ${rate} req/s`,
        context: [`Workload: ${describeCell(cell, mb)}; ${workload.length} requests.`],
        results: [r],
        replayCommand: `deno task bench serve --configs ${quote(configsArg([config]))} --model ${
          quote(f.model)
        } --workload trace --trace ${
          quote(`${dir}/workload.jsonl`)
        } --max-requests ${workload.length}`,
      });
      await Deno.writeTextFile(`${dir}/report.md`, serve.markdown);
      for (const [file, svg] of serve.svgs) await Deno.writeTextFile(`${dir}/${file}`, svg);
      const s = r.summary;
      details.push({
        rate,
        requests: workload.length,
        good: s?.sloGoodRequests ?? 0,
        goodput: s?.sloGoodput ?? null,
        timedOut: s?.timedOut ?? 0,
        folder: name,
        ...(r.error ? { error: r.error } : {}),
      });
      return s?.sloGoodput ?? null;
    };
    const capacity: Capacity = await searchCapacity(measure, {
      lo: f["rate-lo"],
      hi: f["rate-hi"],
      steps: f.steps,
      target: f.target,
    });
    log(`[${config.name}] capacity ${capacity.rate ?? "—"} req/s (${capacity.status})`);
    measured.push({ name: config.name, flags: config.flags, capacity, details });
  }

  const model = f.model;
  const markdown = capacityReport({
    title: `Capacity sweep, ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC`,
    context: [
      `Requests drawn as in cell \`${template.id}\`, at steady Poisson rates between ${
        roundRate(f["rate-lo"])
      } and ${roundRate(f["rate-hi"])} req/s (${f.steps} bisection steps), ${
        f["duration-s"]
      } s of arrivals per run (cap ${f["max-requests"]} requests): ${
        describeRequests(template, mb)
      }.`,
      `Model --model ${model}; prompt + output bounded by a context of ${
        maxContext ?? "— (not known)"
      } tokens.`,
      `Bounds: per-request timeout ${f["request-timeout-s"]} s; each run ends ${
        f["drain-s"]
      } s after its last arrival; ${f.warmup} warm-up request(s) per server, not counted.`,
      `Folder: \`${folder}\`.`,
    ],
    baseline: f.baseline,
    target: f.target,
    configs: measured,
    reproduce: `deno task bench capacity ${shellArgs(args)}`.trim(),
  });
  await Deno.writeTextFile(`${folder}/report.md`, markdown);
  const prefix = relative(resolve(hooks.savedMarkdownDir ?? "bench/reports"), folder);
  return markdown.replace(/\]\(([^)\s]+\/report\.md)\)/g, (_, file) => `](${prefix}/${file})`);
}
