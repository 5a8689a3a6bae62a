// `deno task bench startup`: how long `main.ts serve --model demo` takes from process start until
// /health says ready, on a cold shader cache (fresh MESA_SHADER_CACHE_DIR and XDG_CACHE_HOME, as
// on a new machine) and a warm one (the cold run's cache reused), on the Vulkan adapter and on the
// GL adapter (the Vulkan ICD hidden, so wgpu falls back to GL). Then the first request's time to
// first token and to its end, and four streams at once (the first batch of several decodes), since
// work cut from start-up must not just move into the first requests.
//
// Deno's own caches (npm packages, transpiled modules; DENO_DIR pinned) are warm in every run and
// the demo model is generated before the first run, so the figures isolate the shader cache.

import { z } from "zod";
import { demoModelDir } from "../engine/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { splitFlags } from "./serve/flags.ts";
import { getText, loopbackRequest } from "./serve/http.ts";
import { freeLoopbackPort, LOOPBACK_HOST, loopbackTarget } from "./serve/loopback.ts";

const ADAPTERS = ["vulkan", "gl"] as const;
type Adapter = typeof ADAPTERS[number];

const Flags = z.object({
  adapters: z.string().default("vulkan,gl").transform((s, ctx) => {
    const list = s.split(",").map((a) => a.trim()).filter(Boolean);
    const bad = list.find((a) => !(ADAPTERS as readonly string[]).includes(a));
    if (bad || list.length === 0) {
      ctx.addIssue({ code: "custom", message: `expected a list of ${ADAPTERS.join(", ")}` });
      return z.NEVER;
    }
    return list as Adapter[];
  }),
  runs: z.coerce.number().int().min(0).max(20).default(3),
  "cold-runs": z.coerce.number().int().min(0).max(5).default(1),
  model: z.string().min(1).default("demo"),
  flags: z.string().default(""),
  "timeout-s": z.coerce.number().positive().max(3600).default(900),
  /** Warm runs use this shader cache as it is (no priming run); kept afterwards. */
  "shader-cache": z.string().min(1).optional(),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench startup [flags]

Time from process start to /health "ready" for main.ts serve, on a cold shader cache (fresh
MESA_SHADER_CACHE_DIR / XDG_CACHE_HOME) and a warm one, per adapter; and the first request's
time to first token and total (16 tokens).

  --adapters vulkan,gl   adapters to measure (default both; gl hides the Vulkan driver with
                         VK_ICD_FILENAMES=/nonexistent, so wgpu falls back to its GL backend)
  --runs N               warm runs per adapter (default 3)
  --cold-runs N          cold runs per adapter, each on a fresh cache (default 1)
  --model M              model to serve (default demo)
  --flags "..."          extra server flags
  --timeout-s S          bound on one start (default 900)
  --shader-cache DIR     run the warm runs on this cache as it is (default: the cold run's cache,
                         or a fresh one filled by an unmeasured start); DIR is kept`;

/** What one start measured, in ms from just before the process was spawned. */
export interface StartRun {
  adapter: Adapter;
  cache: "cold" | "warm";
  listeningMs: number | null;
  loadedMs: number | null;
  readyMs: number;
  firstTokenMs: number;
  firstRequestMs: number;
  /** Four streams sent together after the first request: until the last one ended. */
  firstBatchMs: number;
  /** The adapter and storage type the server logged ("llvmpipe (...) (f16)"). */
  device: string;
}

export async function benchStartup(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  if (f.model === "demo") await demoModelDir();
  const runs: StartRun[] = [];
  const cacheDirs: string[] = [];
  const freshCache = async () => {
    cacheDirs.push(await Deno.makeTempDir({ prefix: "sluice-startup-cache-" }));
    return cacheDirs.at(-1)!;
  };
  try {
    for (const adapter of f.adapters) {
      let cacheDir = "";
      for (let i = 0; i < f["cold-runs"]; i++) {
        cacheDir = await freshCache();
        runs.push(await startOnce(f, adapter, "cold", cacheDir));
      }
      if (f["shader-cache"]) cacheDir = f["shader-cache"];
      if (!cacheDir) {
        // No cold run to fill the cache: an unmeasured start does.
        cacheDir = await freshCache();
        await startOnce(f, adapter, "cold", cacheDir);
      }
      for (let i = 0; i < f.runs; i++) runs.push(await startOnce(f, adapter, "warm", cacheDir));
    }
  } finally {
    for (const dir of cacheDirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  return report(f, runs);
}

async function startOnce(
  f: Options,
  adapter: Adapter,
  cache: "cold" | "warm",
  cacheDir: string,
): Promise<StartRun> {
  const port = freeLoopbackPort();
  const target = loopbackTarget(LOOPBACK_HOST, port);
  const env: Record<string, string> = {
    MESA_SHADER_CACHE_DIR: cacheDir,
    XDG_CACHE_HOME: cacheDir,
    // Deno keeps its own cache under XDG_CACHE_HOME too: pin it, so only the shader cache is cold.
    DENO_DIR: denoDir(),
    NO_COLOR: "1",
  };
  // The loader reads VK_ICD_FILENAMES (older) or VK_DRIVER_FILES (newer): hide the driver from both.
  if (adapter === "gl") {
    Object.assign(env, { VK_ICD_FILENAMES: "/nonexistent", VK_DRIVER_FILES: "/nonexistent" });
  }
  log(`${adapter}, ${cache} cache: starting`);
  const t0 = performance.now();
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
      "--model",
      f.model,
      ...splitFlags(f.flags),
    ],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const marks = { listening: null as number | null, loaded: null as number | null, device: "" };
  let output = "";
  const reading = (async () => {
    const dec = new TextDecoder();
    let pending = "";
    for await (const bytes of child.stderr) {
      const text = dec.decode(bytes, { stream: true });
      output = (output + text).slice(-8192);
      pending += text;
      const lines = pending.split(/\r|\n/);
      pending = lines.pop()!;
      for (const line of lines) {
        const now = performance.now() - t0;
        if (marks.listening === null && line.includes("listening on")) marks.listening = now;
        const device = line.match(/^sluice: model .* on (.*? \((?:f16|f32)\))/);
        if (device) {
          marks.loaded = now;
          marks.device = device[1];
        }
      }
    }
  })();
  let exited = false;
  const status = child.status.then((s) => (exited = true, s));
  try {
    const deadline = t0 + f["timeout-s"] * 1000;
    let readyMs: number | null = null;
    while (readyMs === null) {
      if (exited) throw new Error(`server exited before it was ready:\n${output}`);
      if (performance.now() > deadline) throw new Error(`not ready in ${f["timeout-s"]} s`);
      try {
        const h = await getText(target, "/health", 2000);
        if (h.status === 200 && JSON.parse(h.text)?.status === "ready") {
          readyMs = performance.now() - t0;
        }
      } catch { /* not listening yet */ }
      if (readyMs === null) await new Promise((r) => setTimeout(r, 20));
    }
    const first = await streamOnce(target, f.model, deadline);
    const batchStart = performance.now();
    await Promise.all([1, 2, 3, 4].map(() => streamOnce(target, f.model, deadline)));
    const firstBatchMs = performance.now() - batchStart;
    const run: StartRun = {
      adapter,
      cache,
      listeningMs: marks.listening,
      loadedMs: marks.loaded,
      readyMs,
      firstTokenMs: first.firstTokenMs,
      firstRequestMs: first.totalMs,
      firstBatchMs,
      device: marks.device,
    };
    log(
      `${adapter}, ${cache} cache: ready in ${s(readyMs)} s on ${marks.device}; first request ` +
        `${s(first.firstTokenMs)} s to first token, ${s(first.totalMs)} s in all; ` +
        `then 4 streams in ${s(firstBatchMs)} s`,
    );
    return run;
  } finally {
    if (!exited) child.kill("SIGTERM");
    const killer = setTimeout(() => !exited && child.kill("SIGKILL"), 15_000);
    await status;
    clearTimeout(killer);
    await reading.catch(() => {});
  }
}

/** Where this Deno keeps its cache (DENO_DIR, else under XDG_CACHE_HOME or ~/.cache). */
function denoDir(): string {
  const configured = Deno.env.get("DENO_DIR");
  if (configured) return configured;
  const base = Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME") ?? "/tmp"}/.cache`;
  return `${base}/deno`;
}

/** One streamed chat request of 16 tokens: ms to the first content chunk and to the end. */
export async function streamOnce(
  target: ReturnType<typeof loopbackTarget>,
  model: string,
  deadline: number,
): Promise<{ firstTokenMs: number; totalMs: number }> {
  const t0 = performance.now();
  const res = await loopbackRequest(target, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "Tell me a story about a lighthouse keeper." }],
      max_tokens: 16,
      ignore_eos: true,
      stream: true,
    }),
    signal: AbortSignal.timeout(Math.max(1, deadline - t0)),
  });
  if (res.status !== 200) throw new Error(`first request: HTTP ${res.status}`);
  let firstTokenMs: number | null = null;
  const dec = new TextDecoder();
  let text = "";
  for await (const bytes of res.body) {
    text += dec.decode(bytes, { stream: true });
    if (firstTokenMs === null && /"content":"[^"]/.test(text)) {
      firstTokenMs = performance.now() - t0;
    }
  }
  const totalMs = performance.now() - t0;
  if (!text.includes("[DONE]")) {
    throw new Error(`first request did not finish:\n${text.slice(-500)}`);
  }
  return { firstTokenMs: firstTokenMs ?? totalMs, totalMs };
}

function report(f: Options, runs: StartRun[]): string {
  const rows = [];
  for (const adapter of f.adapters) {
    for (const cache of ["cold", "warm"] as const) {
      const rs = runs.filter((r) => r.adapter === adapter && r.cache === cache);
      if (rs.length === 0) continue;
      const med = (g: (r: StartRun) => number | null) => {
        const xs = rs.map(g).filter((x): x is number => x !== null).sort((a, b) => a - b);
        return xs.length ? s(xs[Math.floor((xs.length - 1) / 2)]) : "–";
      };
      const range = rs.length > 1
        ? ` (${s(Math.min(...rs.map((r) => r.readyMs)))}–${
          s(Math.max(...rs.map((r) => r.readyMs)))
        })`
        : "";
      rows.push(
        `| ${adapter} | ${rs[0].device} | ${cache} | ${rs.length} | ${
          med((r) => r.listeningMs)
        } | ` +
          `${med((r) => r.loadedMs)} | **${med((r) => r.readyMs)}**${range} | ` +
          `${med((r) => r.firstTokenMs)} | ${med((r) => r.firstRequestMs)} | ` +
          `${med((r) => r.firstBatchMs)} |`,
      );
    }
  }
  const load = Deno.loadavg().map((v) => v.toFixed(2)).join(", ");
  return [
    `# Start-up: \`serve --model ${f.model}\` until /health is ready`,
    "",
    `Measured ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC; load average ` +
    `${load}; ${navigator.hardwareConcurrency} CPUs. Seconds from spawning the process (medians; ` +
    `ready's range over runs). "loaded": the engine's load line (weights, pipelines, warm-up). ` +
    `First request: a streamed chat request of 16 tokens sent right after ready; then 4 such ` +
    `streams at once (until the last ends).` +
    (f.flags ? ` Server flags: \`${f.flags}\`.` : ""),
    "",
    "| adapter | device (storage) | shader cache | runs | listening | loaded | ready | first token | first request | 4 streams |",
    "| ------- | ---------------- | ------------ | ---- | --------- | ------ | ----- | ----------- | ------------- | --------- |",
    ...rows,
  ].join("\n");
}

function s(ms: number): string {
  return (ms / 1000).toFixed(2);
}

function log(line: string) {
  console.error(`startup: ${line}`);
}
