// `deno task bench model-switch`: what switching models costs a client, on the real server.
// `main.ts serve --models-dir DIR --max-loaded 1 --keep-alive -1` over two copies of one model (so
// each switch evicts the other and loads from disk), and a streamed chat request's time to first
// token (16 tokens) in four cases: the first request after start (a cold load: the files read and
// the pipelines built for the first time in this process; the shader cache is whatever the
// machine's is), a request to the loaded model (no load), and a switch (the other model evicted,
// this one loaded again: the files in the OS page cache, the shaders in Mesa's cache). Medians over
// the rounds.

import { join } from "node:path";
import { z } from "zod";
import { demoModelDir } from "../engine/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { splitFlags } from "./serve/flags.ts";
import { getText } from "./serve/http.ts";
import { freeLoopbackPort, LOOPBACK_HOST, loopbackTarget } from "./serve/loopback.ts";
import { streamOnce } from "./startup.ts";

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  rounds: z.coerce.number().int().min(1).max(50).default(5),
  flags: z.string().default(""),
  "timeout-s": z.coerce.number().positive().max(3600).default(900),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench model-switch [flags]

Time to first token on a server of two models with --max-loaded 1: the first request (a cold
load), a request to the loaded model, and a switch (the other evicted, this one loaded again).

  --model DIR     the model to serve twice (default: the demo model)
  --rounds N      switches measured, each way (default 5)
  --flags "..."   extra server flags
  --timeout-s S   bound on the whole run (default 900)`;

export interface SwitchRun {
  coldMs: number;
  residentMs: number[];
  switchMs: number[];
}

export async function benchModelSwitch(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  const source = f.model === "demo" ? await demoModelDir() : f.model;
  const dir = await Deno.makeTempDir({ prefix: "sluice-switch-" });
  try {
    for (const name of ["alpha", "beta"]) await copyModel(source, join(dir, name));
    return report(f, source, await measure(f, dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A model directory's files, linked (the loader reads them; nothing writes). */
async function copyModel(from: string, to: string) {
  await Deno.mkdir(to);
  for await (const e of Deno.readDir(from)) {
    if (e.isFile) await Deno.symlink(join(from, e.name), join(to, e.name));
  }
}

async function measure(f: Options, dir: string): Promise<SwitchRun> {
  const port = freeLoopbackPort();
  const target = loopbackTarget(LOOPBACK_HOST, port);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "main.ts",
      "serve",
      "--host",
      LOOPBACK_HOST,
      "--port",
      String(port),
      "--models-dir",
      dir,
      "--discover-models",
      "off",
      "--max-loaded",
      "1",
      "--keep-alive=-1",
      ...splitFlags(f.flags),
    ],
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  const reading = (async () => {
    const dec = new TextDecoder();
    for await (const bytes of child.stderr) log = (log + dec.decode(bytes)).slice(-8192);
  })();
  let exited = false;
  const status = child.status.then((s) => (exited = true, s));
  const deadline = performance.now() + f["timeout-s"] * 1000;
  try {
    for (;;) {
      if (exited) throw new Error(`server exited:\n${log}`);
      if (performance.now() > deadline) throw new Error("not ready in time");
      try {
        const h = await getText(target, "/health", 2000);
        if (h.status === 200) break;
      } catch { /* not listening yet */ }
      await new Promise((r) => setTimeout(r, 20));
    }
    const ttft = async (model: string) => (await streamOnce(target, model, deadline)).firstTokenMs;
    const coldMs = await ttft("alpha");
    const residentMs = [await ttft("alpha")];
    const switchMs: number[] = [];
    for (let i = 0; i < f.rounds; i++) {
      for (const model of ["beta", "alpha"]) {
        switchMs.push(await ttft(model));
        residentMs.push(await ttft(model));
      }
    }
    return { coldMs, residentMs, switchMs };
  } finally {
    if (!exited) child.kill("SIGTERM");
    await status;
    await reading.catch(() => {});
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function report(f: Options, source: string, run: SwitchRun): string {
  const resident = median(run.residentMs);
  const sw = median(run.switchMs);
  const ms = (x: number) => `${Math.round(x)} ms`;
  return [
    `# Model switch: time to first token`,
    "",
    `Two copies of ${f.model === "demo" ? "the demo model" : source} behind one server ` +
    `(--max-loaded 1, --keep-alive -1), ${f.rounds} switches each way; a streamed chat ` +
    `request of 16 tokens. Medians; one run, nothing else measured at the same time.`,
    "",
    "| request | TTFT | ÷ loaded |",
    "| --- | --- | --- |",
    `| first, cold load | ${ms(run.coldMs)} | ${(run.coldMs / resident).toFixed(1)}× |`,
    `| switch (evict the other, load this one) | ${ms(sw)} | ${(sw / resident).toFixed(1)}× |`,
    `| to the loaded model | ${ms(resident)} | 1.0× |`,
    "",
    `Every TTFT: switch ${run.switchMs.map(ms).join(", ")}; loaded ${
      run.residentMs.map(ms).join(", ")
    }.`,
    "",
  ].join("\n");
}
