// The capacity report: per configuration the highest Poisson arrival rate it served with at least
// the target SLO goodput, each measured rate, and each configuration's rate ÷ the baseline's
// against issue 19's goal. Pure: the searches in, Markdown out.

import { type Capacity, CAPACITY_GOAL, capacityRatio } from "./capacity_search.ts";

export interface PointDetail {
  rate: number;
  requests: number;
  /** Requests that met both SLOs. */
  good: number;
  goodput: number | null;
  timedOut: number;
  /** The run's folder, relative to the report. */
  folder: string;
  error?: string;
}

export interface ConfigCapacity {
  name: string;
  flags: string[];
  capacity: Capacity;
  details: PointDetail[];
}

export interface CapacityInput {
  title: string;
  context: string[];
  baseline: string;
  target: number;
  configs: ConfigCapacity[];
  reproduce: string;
}

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

function describe(c: Capacity): string {
  if (c.status === "below") return `below ${Math.min(...c.points.map((p) => p.rate))} req/s`;
  return `${c.status === "at-least" ? "≥ " : ""}${c.rate} req/s`;
}

export function capacityReport(input: CapacityInput): string {
  const base = input.configs.find((c) => c.name === input.baseline);
  const summary = input.configs.map((c) => {
    const cap = describe(c.capacity);
    if (c === base || !base) {
      return `| \`${c.name}\`${c === base ? " (baseline)" : ""} | ${cap} | | |`;
    }
    const r = capacityRatio(c.capacity, base.capacity);
    const ratio = r.ratio === null ? "—" : `${r.lowerBound ? "≥ " : ""}${r.ratio.toFixed(2)}×`;
    const met = r.met === null
      ? `— (${r.why})`
      : r.met
      ? "**met**"
      : `not met${r.why ? ` (${r.why})` : ""}`;
    return `| \`${c.name}\` | ${cap} | ${ratio} | ${met} |`;
  });
  const perConfig = input.configs.flatMap((c) => [
    `### \`${c.name}\``,
    "",
    `Flags: \`${c.flags.join(" ") || "(server defaults)"}\`. Rates in the order measured:`,
    "",
    "| rate (req/s) | requests | met both SLOs | SLO goodput | timed out | ≥ target | files |",
    "|---:|---:|---:|---:|---:|:-:|---|",
    ...c.details.map((d) =>
      `| ${d.rate} | ${d.requests} | ${d.good} | ${
        d.goodput === null ? "—" : pct(d.goodput)
      } | ${d.timedOut} | ${
        d.error
          ? `not measured: ${d.error.split("\n")[0]}`
          : d.goodput !== null && d.goodput >= input.target
          ? "yes"
          : "no"
      } | ${d.requests ? `[\`${d.folder}/\`](${d.folder}/report.md)` : "—"} |`
    ),
    "",
  ]);
  return [
    `# ${input.title}`,
    "",
    ...input.context.map((c) => `- ${c}`),
    "",
    "## Capacity",
    "",
    `The highest Poisson arrival rate at which at least ${
      pct(input.target)
    } of requests met both ` +
    `their TTFT and TBT SLOs (SLO goodput), and each configuration's rate ÷ \`${input.baseline}\`'s ` +
    `(goal ≥ ${CAPACITY_GOAL}×).`,
    "",
    `| configuration | capacity | ÷ \`${input.baseline}\` | goal ≥ ${CAPACITY_GOAL}× |`,
    "|---|---:|---:|:-:|",
    ...summary,
    "",
    "## Rates measured",
    "",
    ...perConfig,
    "## Rules",
    "",
    "- Each rate is one seeded run of the same duration: Poisson arrivals at that rate (the same seed " +
    "at every rate, so the requests' lengths and readers are the same in the same order), one server " +
    "per configuration and rate. Requests not finished by the run's deadline count as misses.",
    "- **SLO goodput**: the share of requests that ended as asked, got their first token within their " +
    "TTFT SLO and whose time per output token is within their TBT SLO (as in the matrix report).",
    "- **Search**: the lower and upper bounds first, then bisection in log space (the geometric mean " +
    "of the highest passing and lowest failing rates) for the given steps; the capacity is the highest " +
    "rate measured to pass. It assumes goodput falls as the rate rises; one run per rate, so a noisy " +
    "run can send the search the wrong way (repeat the sweep with --seed-offset to see how far).",
    "",
    "## Reproduce",
    "",
    "```",
    input.reproduce,
    "```",
    "",
  ].join("\n");
}
