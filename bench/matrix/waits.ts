// How long readers waited in all, per cell and configuration of a finished `bench matrix` run: the
// waits for first tokens (TTFT) and the stalls after them, summed over requests. A policy that does
// the same work at the same speed can move waiting between the two (start a request sooner and let
// it stall, or later and stream it smoothly) but not make it vanish; the sum shows how much waiting
// the adapter's throughput leaves to share out, and so how far a goal on one of the two can go
// without the other.
//
//   deno run -A bench/matrix/waits.ts <matrix folder> [baseline]

import { requestMetrics } from "../serve/metrics.ts";
import type { RequestRecord } from "../serve/record.ts";

export interface Waits {
  ttftS: number;
  stallS: number;
}

/** Summed TTFT and stall, seconds, of the requests that got a token. */
export function waitsOf(records: readonly RequestRecord[]): Waits {
  let ttftS = 0, stallS = 0;
  for (const m of records.map(requestMetrics)) {
    if (m.ttftMs === null) continue;
    ttftS += m.ttftMs / 1000;
    stallS += m.stallMs / 1000;
  }
  return { ttftS, stallS };
}

async function main(folder: string, baseline: string): Promise<void> {
  const cells = JSON.parse(await Deno.readTextFile(`${folder}/cells.json`)) as { id: string }[];
  const f1 = (x: number) => x.toFixed(1);
  console.log(
    "| cell | configuration | TTFT, summed (s) | stall, summed (s) | both (s) | both ÷ baseline |",
  );
  console.log("| --- | --- | ---: | ---: | ---: | ---: |");
  for (const { id } of cells) {
    const files = [...Deno.readDirSync(`${folder}/${id}`)]
      .map((e) => e.name).filter((n) => /^results-.*\.json$/.test(n)).sort();
    const waits = new Map<string, Waits>();
    for (const name of files) {
      const run = JSON.parse(await Deno.readTextFile(`${folder}/${id}/${name}`));
      waits.set(run.config.name, waitsOf(run.records));
    }
    const base = waits.get(baseline);
    for (const [config, w] of waits) {
      const both = w.ttftS + w.stallS;
      const ratio = base ? `${(both / (base.ttftS + base.stallS)).toFixed(2)}×` : "";
      console.log(
        `| ${id} | ${config} | ${f1(w.ttftS)} | ${f1(w.stallS)} | ${f1(both)} | ${ratio} |`,
      );
    }
  }
}

if (import.meta.main) {
  if (!Deno.args[0]) {
    console.error("usage: deno run -A bench/matrix/waits.ts <matrix folder> [baseline]");
    Deno.exit(2);
  }
  await main(Deno.args[0], Deno.args[1] ?? "fcfs-vllm");
}
