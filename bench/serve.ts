// `deno task bench serve --configs "a=--flags;b=--flags" [workload flags]`: replays one seeded
// workload against one server per configuration, over loopback HTTP with SSE clients that read like
// people, and writes a side-by-side report folder (report.md, workload.jsonl, raw results, SVGs).

import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseServeBenchFlags, type ServeBenchOptions } from "./serve/flags.ts";
import { describeDist } from "./serve/random.ts";
import { buildReport, slug } from "./serve/report.ts";
import { type ConfigResult, runConfig } from "./serve/run.ts";
import {
  generateWorkload,
  parseTrace,
  type WorkloadRequest,
  workloadToJsonl,
} from "./serve/workload.ts";

export interface BenchServeHooks {
  /** Program and leading arguments that start a server (default: this repo's `main.ts serve`). */
  serverCommand?: string[];
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  /** Where bench/main.ts saves the returned Markdown; image links are made relative to it. */
  savedMarkdownDir?: string;
}

export const USAGE =
  `usage: deno task bench serve [--configs "a=--flags;b=--flags"] [workload flags]
       deno task bench serve --clients 1,4,16 [--model M] [--server-flags "..."] [--prompt-len N]
                             [--output-len N] [--request-timeout-s S]

Replays one seeded workload against one server per configuration over loopback HTTP, with SSE
clients that read like people, and writes a report folder. With --clients: N simultaneous
unpaced streams, throughput and latency percentiles per N.

  --configs "name=--flags;..."   server configurations (default: one with the defaults)
  --model M              model to serve (default demo)
  --workload burst|poisson|trace   (default burst); --trace FILE for trace
  --rate R               background requests/s (default 0.25)
  --burst-size N, --burst-at-s S   the burst (default 8 at 1 s)
  --duration-s S         workload length (default 20)
  --lengths short|long|mixed|doc   prompt and output lengths (default short; doc: 1–2k-token
                         documents)
  --seed N               workload seed (default 1)
  --reading-rate-dist D  readers' tokens/s, e.g. normal:15:4 (default)
  --slo-ttft-ms T, --slo-tbt-ms T  SLOs (default 1300, 250)
  --max-requests N       cap on requests (default 24)
  --cancel-fraction F    share of readers that hang up part-way (default 0)
  --out DIR              report folder parent (default bench/reports)
  --request-timeout-s S, --deadline-s S, --start-timeout-s S   bounds
  --warmup N             unmeasured warm-up requests per server (default 1)
  --scrape-ms MS         /metrics scrape interval (default 250)
  --baseline NAME        configuration the report's goals are judged against
                         (default: the one named fcfs, if any)`;

/** Default replay deadline beyond the last arrival (see --deadline-s). */
const DEADLINE_SLACK_S = 60;

const REPO_ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "..");

export function buildWorkload(
  f: ServeBenchOptions,
): Promise<WorkloadRequest[]> | WorkloadRequest[] {
  const common = {
    seed: f.seed,
    readingRate: f["reading-rate-dist"],
    sloTtftMs: f["slo-ttft-ms"],
    sloTbtMs: f["slo-tbt-ms"],
    maxRequests: f["max-requests"],
  };
  if (f.workload === "trace") return Deno.readTextFile(f.trace!).then((t) => parseTrace(t, common));
  return generateWorkload({
    ...common,
    kind: f.workload,
    rate: f.rate,
    durationS: f["duration-s"],
    burstSize: f["burst-size"],
    burstAtS: f["burst-at-s"],
    burstWindowS: 1,
    lengths: f.lengths,
    cancelFraction: f["cancel-fraction"],
  });
}

function describeWorkload(f: ServeBenchOptions, w: WorkloadRequest[]): string {
  const sum = (g: (r: WorkloadRequest) => number) => w.reduce((s, r) => s + g(r), 0);
  const what = f.workload === "trace"
    ? `trace ${f.trace}`
    : f.workload === "burst"
    ? `burst of ${f["burst-size"]} within 1 s at t=${
      f["burst-at-s"]
    } s over Poisson ${f.rate} req/s for ${f["duration-s"]} s`
    : `Poisson ${f.rate} req/s for ${f["duration-s"]} s`;
  const prompts = w.filter((r) => r.promptLen !== undefined);
  return `Workload: ${what}; ${w.length} requests (cap ${
    f["max-requests"]
  }); lengths ${f.lengths}` +
    (prompts.length ? `, ${sum((r) => r.promptLen ?? 0)} prompt tokens` : "") +
    `, ${sum((r) => r.outputLen)} output tokens; reading rate ${
      describeDist(f["reading-rate-dist"])
    } tokens/s` +
    `${
      f["cancel-fraction"] > 0 ? `; ${f["cancel-fraction"] * 100}% of readers hang up part-way` : ""
    }; seed ${f.seed}.`;
}

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export async function benchServe(args: string[], hooks: BenchServeHooks = {}): Promise<string> {
  const f = parseServeBenchFlags(args);
  const log = hooks.log ?? ((l: string) => console.error(l));
  const workload = await buildWorkload(f);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const folder = resolve(f.out, `serve-${stamp}`);
  await Deno.mkdir(folder, { recursive: true });
  await Deno.writeTextFile(`${folder}/workload.jsonl`, workloadToJsonl(workload));
  log(
    `bench serve: ${workload.length} requests, ${f.configs.length} configuration(s); report in ${folder}`,
  );

  // The last arrival plus time to stream: long enough for the default workload, short enough that
  // a configuration that cannot keep up still ends the run in minutes.
  const lastArrival = workload.reduce((m, w) => Math.max(m, w.arrivalS), 0);
  const deadlineS = f["deadline-s"] ??
    Math.max(lastArrival, f.workload === "trace" ? 0 : f["duration-s"]) + DEADLINE_SLACK_S;
  const results: ConfigResult[] = [];
  for (const config of f.configs) {
    log(`[${config.name}] starting server: ${config.flags.join(" ") || "(defaults)"}`);
    const r = await runConfig(workload, config, {
      model: f.model,
      serverCommand: hooks.serverCommand ?? [Deno.execPath(), "run", "-A", "main.ts", "serve"],
      cwd: hooks.serverCommand ? undefined : REPO_ROOT,
      startTimeoutMs: f["start-timeout-s"] * 1000,
      requestTimeoutMs: f["request-timeout-s"] * 1000,
      deadlineMs: deadlineS * 1000,
      scrapeIntervalMs: f["scrape-ms"],
      warmupRequests: f.warmup,
      logPath: `${folder}/server-${slug(config.name)}.log`,
    });
    results.push(r);
    await Deno.writeTextFile(`${folder}/results-${slug(config.name)}.json`, JSON.stringify(r));
    const s = r.summary;
    log(
      r.error
        ? `[${config.name}] failed: ${r.error.split("\n")[0]}`
        : `[${config.name}] done in ${r.wallS.toFixed(1)} s: ` +
          `${s!.effectiveTokensPerS?.toFixed(1) ?? "—"} effective / ${
            s!.rawTokensPerS?.toFixed(1) ?? "—"
          } raw tokens/s, ` +
          `${s!.completed} ok, ${s!.refused} refused, ${s!.failed + s!.timedOut} failed`,
    );
  }

  const model = results.find((r) => r.model)?.model;
  const configsArg = f.configs.map((
    c,
  ) => (c.flags.length ? `${c.name}=${c.flags.join(" ")}` : c.name)).join(";");
  const input = {
    title: `Serving benchmark, ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC`,
    context: [
      describeWorkload(f, workload),
      `SLOs (defaults; a trace may set its own): TTFT ${f["slo-ttft-ms"]} ms, time between tokens ${
        f["slo-tbt-ms"]
      } ms.`,
      model
        ? `Model \`${model.id}\` (--model ${f.model}): vocab ${model.vocabSize}${
          model.vocabGuessed ? " (not reported; ids < 256 used)" : ""
        }` +
          `, context ${model.maxContext ?? "not reported (prompts not clamped)"}.`
        : `Model --model ${f.model} (no server started).`,
      `Bounds: per-request timeout ${
        f["request-timeout-s"]
      } s, replay deadline ${deadlineS} s per configuration; ` +
      `${f.warmup} warm-up request(s) per server, not counted.`,
      `Folder: \`${folder}\` (workload.jsonl, results-*.json raw timelines and /metrics scrapes, server-*.log).`,
    ],
    results,
    baseline: f.baseline,
    replayCommand:
      `deno task bench serve --configs ${quote(configsArg)} --model ${quote(f.model)} ` +
      `--workload trace --trace ${
        quote(`${folder}/workload.jsonl`)
      } --max-requests ${workload.length} --request-timeout-s ${f["request-timeout-s"]}` +
      (f["deadline-s"] !== undefined ? ` --deadline-s ${f["deadline-s"]}` : "") +
      (f.baseline ? ` --baseline ${quote(f.baseline)}` : ""),
  };
  const report = buildReport(input);
  await Deno.writeTextFile(`${folder}/report.md`, report.markdown);
  for (const [name, svg] of report.svgs) await Deno.writeTextFile(`${folder}/${name}`, svg);

  // bench/main.ts saves the returned text elsewhere; point its image links into the folder.
  const prefix = relative(resolve(hooks.savedMarkdownDir ?? "bench/reports"), folder);
  return report.markdown.replace(/\]\(([^)\s]+\.svg)\)/g, (_, file) => `](${prefix}/${file})`);
}
