// `deno task sim <what> [--scale X] [--out FILE]`: the papers' experiments on GPU-cost
// simulations (sim/papers/), and the profiles' step times. Deterministic: the same command prints
// the same report. docs/benchmarks/papers.md holds the reports and what differs from each paper.
//
//   profiles     each GPU profile's step times, beside the figures they are checked against
//   tokenflow    TokenFlow's setups a–d and its Table 2 ablation (RTX 4090, Llama3-8B)
//   tokenflow-poisson  why its Poisson gains fall short: setup c at 0.5–4 req/s and three reading
//                rates, TokenFlow against SGLang
//   layerkv      LayerKV's rate sweep, 4.0–7.0 req/s (L20, Llama-2-7B); --kv-share X runs it with
//                that share of the derived KV budget (the paper does not state its own)
//   fastswitch   FastSwitch's multi-turn comparison with priority churn (A10, LLaMA-8B); --kv-share
//                as layerkv's
//   orbitflow    OrbitFlow's Fig. 14a component ablation (RTX A5000, LLaMA3-8B)
//   ellm         eLLM's ShareGPT comparison (A100, Llama2-13B): --token-cache against vLLM-Recompute;
//                --slo-ms MS sets the TPOT SLO (the paper's 50 ms by default)
//   matrix       the workload matrix on GPU profiles (default tokenflow and layerkv; --profile ID
//                for one): fcfs-vllm, the default (--sched auto) and tokenflow's settings judged by
//                issue 31's goals; --variants a,b adds candidates (sim/matrix_configs.ts), --cells
//                a,b runs only those cells

import { parseArgs } from "node:util";
import { PROFILES } from "./gpu_profiles.ts";
import { gpuStepMs } from "./gpu_step_cost.ts";
import { planOf } from "./matrix_scaling.ts";
import { tokenflowPoissonReport, tokenflowReport } from "./papers/tokenflow.ts";
import { layerkvReport } from "./papers/layerkv.ts";
import { fastswitchReport } from "./papers/fastswitch.ts";
import { orbitflowReport } from "./papers/orbitflow.ts";
import { ellmReport } from "./papers/ellm.ts";
import { matrixReport, runMatrix } from "./papers/matrix.ts";

const USAGE =
  "usage: deno task sim <profiles|tokenflow|tokenflow-poisson|layerkv|fastswitch|orbitflow|ellm|matrix> " +
  "[--scale X] [--kv-share X] [--slo-ms MS (ellm)] [--profile ID] [--variants A,B] [--cells A,B] [--out FILE]";

function profilesReport(): string {
  const decode = (n: number, ctx: number) =>
    planOf(Array.from({ length: n }, (_, slot) => ({ slot, pos: ctx - 1 })), n);
  const prefill = (n: number) =>
    planOf(Array.from({ length: n }, (_, pos) => ({ slot: 0, pos })), 1);
  const lines = [
    "| profile | KV tokens | decode 1 row @1K ms | decode 32 rows @1K ms | ratio | prefill 2K ms |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const p of Object.values(PROFILES)) {
    const one = gpuStepMs(p, decode(1, 1024)), many = gpuStepMs(p, decode(32, 1024));
    lines.push(
      `| ${p.id}: ${p.gpu.name}, ${p.model.name} | ${p.kvTokens} | ${one.toFixed(1)} | ${
        many.toFixed(1)
      } | ${(many / one).toFixed(2)} | ${gpuStepMs(p, prefill(2048)).toFixed(0)} |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: {
      scale: { type: "string", default: "1" },
      "kv-share": { type: "string", default: "1" },
      "slo-ms": { type: "string" },
      out: { type: "string" },
      profile: { type: "string" },
      variants: { type: "string" },
      cells: { type: "string" },
    },
    allowPositionals: true,
  });
  const scale = Number(values.scale);
  const kvShare = Number(values["kv-share"]);
  if (positionals.length !== 1 || !(scale > 0 && scale <= 1) || !(kvShare > 0 && kvShare <= 1)) {
    console.error(USAGE);
    Deno.exit(2);
  }
  const log = (line: string) => console.error(line);
  let report: string;
  switch (positionals[0]) {
    case "profiles":
      report = profilesReport();
      break;
    case "tokenflow":
      report = await tokenflowReport(scale, log);
      break;
    case "tokenflow-poisson":
      report = await tokenflowPoissonReport(scale, log);
      break;
    case "layerkv":
      report = await layerkvReport(scale, log, kvShare);
      break;
    case "fastswitch":
      report = await fastswitchReport(scale, log, kvShare);
      break;
    case "orbitflow":
      report = await orbitflowReport(scale, log);
      break;
    case "ellm":
      report = await ellmReport(
        scale,
        log,
        values["slo-ms"] ? Number(values["slo-ms"]) : undefined,
      );
      break;
    case "matrix":
      report = await matrixReports(values, log);
      break;
    default:
      console.error(USAGE);
      Deno.exit(2);
  }
  if (values.out) Deno.writeTextFileSync(values.out, report + "\n");
  console.log(report);
}

async function matrixReports(
  v: { profile?: string; variants?: string; cells?: string },
  log: (line: string) => void,
): Promise<string> {
  const list = (s?: string) => s?.split(",").filter((x) => x);
  const ids = v.profile ? [v.profile] : ["tokenflow", "layerkv"];
  const reports: string[] = [];
  for (const id of ids) {
    const p = PROFILES[id];
    if (!p) throw new Error(`unknown profile "${id}" (${Object.keys(PROFILES).join(", ")})`);
    const rows = await runMatrix(p, { ids: list(v.cells), variants: list(v.variants), log });
    const args = [
      `--profile ${id}`,
      v.variants ? `--variants ${v.variants}` : "",
      v.cells ? `--cells ${v.cells}` : "",
    ].filter((a) => a).join(" ");
    reports.push(matrixReport(p, rows, `deno task sim matrix ${args}`));
  }
  return reports.join("\n\n");
}
