// `deno task bench huge-prompts [flags]`: issue 17's huge prompts, measured on the
// real server. Starts `main.ts serve` (the demo model by default) on a loopback port and, while
// /health is polled every ~20 ms, sends N prompts just under the body limit at once, twice:
// - "refused": completions and chats the context cannot take (the case: they used to be
//   tokenized in full on the HTTP thread before being refused);
// - "counted": the same prompts to /tokenize, which counts any prompt, so the tokenizer works
//   through all of them (off the HTTP thread, since the fix).
// Reports /health latency (p50, p99, max) while each burst is in flight (polled from a Worker, so
// the bench's own work on the bodies does not count), every answer, and the server's RSS before,
// at its peak and after. Goal: /health p99 < 50 ms. `--root DIR` serves from another checkout
// (the before figures: `git worktree add /tmp/sluice-before 4dfc7a8`, `--root /tmp/sluice-before`).

import { join, resolve } from "node:path";
import { z } from "zod";
import { parseBenchFlags } from "../common/cli.ts";
import { splitFlags } from "../serve/flags.ts";
import { loopbackRequest, readText } from "../serve/http.ts";
import type { LoopbackTarget } from "../serve/loopback.ts";
import { seededRandom, subSeed } from "../serve/random.ts";
import { startServer } from "../serve/server_process.ts";
import { summarize, type Summary } from "../responsiveness/stats.ts";
import type { HealthPolls, PollOptions } from "../responsiveness/stream.ts";

const REPO = resolve(import.meta.dirname!, "../..");

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  root: z.string().min(1).default(REPO),
  prompts: z.coerce.number().int().min(1).max(64).default(8),
  rounds: z.coerce.number().int().min(1).max(100).default(10),
  kind: z.enum(["mixed", "chat", "completions"]).default("mixed"),
  "max-body-kb": z.coerce.number().int().min(16).max(64 * 1024).default(1024),
  "poll-ms": z.coerce.number().min(1).max(1000).default(20),
  seed: z.coerce.number().int().min(0).default(17),
  flags: z.string().default(""),
  label: z.string().default(""),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  "deadline-s": z.coerce.number().positive().max(3600).default(600),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench huge-prompts [flags]

/health latency and server RSS while N prompts just under the body limit arrive at once: refused
(too long for the context) and counted (/tokenize). Starts main.ts serve on a loopback port.

  --model M              model to serve (default demo)
  --root DIR             checkout whose main.ts serves (default this one)
  --prompts N            prompts per burst (default 8)
  --rounds N             refused bursts, one after another, their polls pooled (default 10)
  --kind K               refused prompts: mixed (half completions, half chats; default), chat
                         or completions
  --max-body-kb K        the server's body limit, passed to it (default 1024, serve's default)
  --poll-ms MS           /health polling interval (default 20)
  --seed S               prompt text seed (default 17)
  --flags "..."          extra server flags
  --label X              label for the report
  --start-timeout-s S    server start bound (default 300)
  --deadline-s S         whole-run bound (default 600)`;

/** Room left in the body for the JSON around the prompt. */
const ENVELOPE_BYTES = 1024;
const REQUEST_TIMEOUT_MS = 300_000;

interface Answer {
  path: string;
  status: number;
  /** The error code, or the token count /tokenize gave. */
  result: string;
  ms: number;
}

interface Burst {
  /** /health latencies (ms) while the burst was in flight. */
  healthMs: number[];
  healthFailures: number;
  answers: Answer[];
  /** Sending to the last answer (pooled: the slowest burst's). */
  wallMs: number;
  peakRssMb: number;
}

export async function benchHugePrompts(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  const deadline = AbortSignal.timeout(f["deadline-s"] * 1000);
  const root = resolve(f.root);
  const server = await startServer({
    command: [Deno.execPath(), "run", "-A", join(root, "main.ts"), "serve"],
    cwd: root,
    model: f.model,
    flags: ["--max-body-kb", String(f["max-body-kb"]), ...splitFlags(f.flags)],
    startTimeoutMs: f["start-timeout-s"] * 1000,
  });
  try {
    const t = server.target;
    const rss = () => rssMb(server.pid);
    log("warming up");
    const warm = { model: "default", prompt: "warm up", max_tokens: 2 };
    await post(t, "/v1/completions", JSON.stringify(warm));
    const rssBefore = await rss();
    log("polling /health while idle");
    const idlePoller = await startPolling(t, pollOptions(f));
    await new Promise((r) => setTimeout(r, 2000));
    const idle = await idlePoller.stop();
    const texts = Array.from({ length: f.prompts }, (_, i) => prose(f, i));
    const asCompletion = (i: number) =>
      f.kind === "completions" || (f.kind === "mixed" && i % 2 === 0);
    const tooLong: [string, unknown][] = texts.map((text, i) =>
      asCompletion(i)
        ? ["/v1/completions", { model: "default", prompt: text, max_tokens: 1 }]
        : ["/v1/chat/completions", {
          model: "default",
          messages: [{ role: "user", content: text }],
          max_tokens: 1,
        }]
    );
    const kib = (texts[0].length / 1024).toFixed(0);
    log(`${f.prompts} prompts of ${kib} KiB: refused, ${f.rounds} bursts`);
    const rounds: Burst[] = [];
    for (let i = 0; i < f.rounds; i++) rounds.push(await burst(t, f, rss, deadline, tooLong));
    const refused = pool(rounds);
    const rssAfterRefused = await rss();
    log(`${f.prompts} prompts: counted (/tokenize)`);
    const counted = await burst(
      t,
      f,
      rss,
      deadline,
      texts.map((text) => ["/tokenize", { prompt: text }]),
    );
    const rssAfter = await rss();
    return report(f, root, {
      idle: summarize(idle.latenciesMs),
      refused,
      counted,
      rss: { before: rssBefore, afterRefused: rssAfterRefused, after: rssAfter },
    });
  } finally {
    await server.stop();
  }
}

/** Sends every request at once and polls /health until the last has answered. */
async function burst(
  t: LoopbackTarget,
  f: Options,
  rss: () => Promise<number>,
  deadline: AbortSignal,
  requests: [string, unknown][],
): Promise<Burst> {
  const bodies = requests.map(([path, body]) => [path, JSON.stringify(body)] as const);
  const stop = new AbortController();
  const stopAll = AbortSignal.any([stop.signal, deadline]);
  let peakRssMb = await rss();
  const sampling = (async () => {
    while (!stopAll.aborted) {
      peakRssMb = Math.max(peakRssMb, await rss());
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const poller = await startPolling(t, pollOptions(f));
  const start = performance.now();
  const answers = await Promise.all(bodies.map(([path, body]) => post(t, path, body)));
  const wallMs = performance.now() - start;
  const polls = await poller.stop();
  stop.abort();
  await sampling;
  return {
    healthMs: polls.latenciesMs,
    healthFailures: polls.failures,
    answers,
    wallMs,
    peakRssMb,
  };
}

/** Several bursts as one: polls and answers pooled, the worst wall time and peak. */
function pool(bursts: Burst[]): Burst {
  return {
    healthMs: bursts.flatMap((b) => b.healthMs),
    healthFailures: bursts.reduce((n, b) => n + b.healthFailures, 0),
    answers: bursts.flatMap((b) => b.answers),
    wallMs: Math.max(...bursts.map((b) => b.wallMs)),
    peakRssMb: Math.max(...bursts.map((b) => b.peakRssMb)),
  };
}

/** Polls /health from a Worker of this process until stop() (see health_poller.ts). */
async function startPolling(
  target: LoopbackTarget,
  options: PollOptions,
): Promise<{ stop(): Promise<HealthPolls> }> {
  const worker = new Worker(new URL("./health_poller.ts", import.meta.url).href, {
    type: "module",
  });
  const polling = Promise.withResolvers<void>();
  const done = Promise.withResolvers<HealthPolls>();
  done.promise.catch(() => {}); // stop() reports it
  worker.onmessage = (e) => (e.data === "polling" ? polling.resolve() : done.resolve(e.data));
  worker.onerror = (e) => {
    e.preventDefault();
    polling.reject(new Error(e.message));
    done.reject(new Error(e.message));
  };
  worker.postMessage({ target, options });
  await polling.promise.catch((err) => {
    worker.terminate();
    throw err;
  });
  return {
    stop: async () => {
      worker.postMessage("stop");
      try {
        return await done.promise;
      } finally {
        worker.terminate();
      }
    },
  };
}

async function post(t: LoopbackTarget, path: string, body: string): Promise<Answer> {
  const start = performance.now();
  const res = await loopbackRequest(t, {
    method: "POST",
    path,
    headers: { "Content-Type": "application/json" },
    body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await readText(res, 64 * 1024 * 1024);
  const ms = performance.now() - start;
  let result = "";
  try {
    const json = JSON.parse(text);
    result = json.error?.code ?? (typeof json.count === "number" ? `${json.count} tokens` : "ok");
  } catch {
    result = text.slice(0, 60);
  }
  return { path, status: res.status, result, ms };
}

/**
 * Seeded pseudo-English that fills a body just under the limit: words of random syllables, so the
 * tokenizer's word cache helps no more than with real text.
 */
function prose(f: Options, i: number): string {
  const next = seededRandom(subSeed(f.seed, `prompt ${i}`));
  const syllables = ["ka", "ri", "sto", "len", "mo", "qua", "the", "ar", "un", "dis", "ver", "ple"];
  const bytes = f["max-body-kb"] * 1024 - ENVELOPE_BYTES;
  const words: string[] = [];
  let n = 0;
  while (n < bytes) {
    let w = "";
    for (let s = 1 + Math.floor(next() * 4); s > 0; s--) {
      w += syllables[Math.floor(next() * syllables.length)];
    }
    if (next() < 0.08) w += next() < 0.5 ? "." : ",";
    words.push(w);
    n += w.length + 1;
  }
  return words.join(" ").slice(0, bytes);
}

function pollOptions(f: Options): PollOptions {
  return {
    intervalMs: f["poll-ms"],
    pollTimeoutMs: 60_000,
    maxPolls: 100_000,
    deadlineMs: f["deadline-s"] * 1000,
  };
}

/** The process's resident set (Linux: /proc), in MiB. */
async function rssMb(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`).catch(() => "");
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kb === undefined ? NaN : Number(kb) / 1024;
}

interface Results {
  idle: Summary;
  refused: Burst;
  counted: Burst;
  rss: { before: number; afterRefused: number; after: number };
}

function report(f: Options, root: string, r: Results): string {
  const ms = (v: number | null) => (v === null ? "–" : v.toFixed(1));
  const mb = (v: number) => v.toFixed(0);
  const head = (git(root) ?? root) + (f.label ? ` (${f.label})` : "");
  const refused = summarize(r.refused.healthMs);
  const counted = summarize(r.counted.healthMs);
  const row = (name: string, s: Summary, failures = 0, wall?: number) =>
    `| ${name} | ${s.count} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${failures} | ${
      wall === undefined ? "–" : ms(wall)
    } |`;
  const answers = (b: Burst) => {
    const groups = new Map<string, number>();
    for (const a of b.answers) {
      const key = `${a.path} → ${a.status} ${a.result}`;
      groups.set(key, (groups.get(key) ?? 0) + 1);
    }
    return [...groups].map(([k, n]) => `- ${k} ×${n}`).join("\n") +
      `\n- slowest answer ${ms(Math.max(...b.answers.map((a) => a.ms)))} ms`;
  };
  const goal = (s: Summary) => (s.p99 !== null && s.p99 < 50 ? "met" : "missed");
  return `# Huge prompts: /health while ${f.prompts} near-limit prompts arrive at once

Server: \`main.ts serve --model ${f.model} --max-body-kb ${f["max-body-kb"]}\` from ${head}.
Each prompt ${f["max-body-kb"]} KiB less ${ENVELOPE_BYTES} bytes of seeded pseudo-English;
/health polled every ${f["poll-ms"]} ms from a thread of its own (latency = request sent to
answer read). The refused bursts (${f.kind}) are ${f.rounds}, one after another, their polls
pooled (wall: the slowest burst). Goal: p99 < 50 ms.

| /health during | polls | p50 ms | p99 ms | max ms | failed | burst wall ms |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
${row("idle (2 s)", r.idle)}
${row("refused bursts", refused, r.refused.healthFailures, r.refused.wallMs)}
${row("counted burst (/tokenize)", counted, r.counted.healthFailures, r.counted.wallMs)}

Goal (p99 < 50 ms): refused bursts ${goal(refused)}, counted burst ${goal(counted)}.

Server RSS (MiB): before ${mb(r.rss.before)}; peak during the refused bursts ${
    mb(r.refused.peakRssMb)
  }, after them ${mb(r.rss.afterRefused)}; peak during the counted burst ${
    mb(r.counted.peakRssMb)
  }, after it ${mb(r.rss.after)}.

Refused bursts' answers:
${answers(r.refused)}

Counted burst's answers:
${answers(r.counted)}
`;
}

/** "commit subject" of the checkout, if it is a git work tree. */
function git(root: string): string | null {
  try {
    const out = new Deno.Command("git", {
      args: ["-C", root, "log", "-1", "--format=%h %s"],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    const line = new TextDecoder().decode(out.stdout).trim();
    return out.success && line ? `\`${line.slice(0, 80)}\`` : null;
  } catch {
    return null;
  }
}

function log(msg: string): void {
  console.error(`huge-prompts: ${msg}`);
}
