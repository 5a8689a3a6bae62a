// `deno task bench responsiveness [--model demo] [--flags "..."] [--label X]`: how responsive the
// real server stays while it works. (1) /health latency, and a running stream's largest gap,
// during a long chunked prefill; (2) how closely a paced stream (reading_rate) keeps its cadence
// beside unpaced streams. Starts the server on a loopback port, bounds every wait, and returns a
// Markdown report.

import { z } from "zod";
import { parseBenchFlags } from "./common/cli.ts";
import { splitFlags } from "./serve/flags.ts";
import type { LoopbackTarget } from "./serve/loopback.ts";
import { seededRandom } from "./serve/random.ts";
import { type ModelInfo, modelInfo } from "./serve/run.ts";
import { startServer } from "./serve/server_process.ts";
import {
  arrivalsDuring,
  cadenceDeviations,
  largestGapDuring,
  meanRate,
  rateDuring,
  summarize,
  type Summary,
} from "./responsiveness/stats.ts";
import { openStream, pollHealth, sleepUntil, type Stream } from "./responsiveness/stream.ts";

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  flags: z.string().default(""),
  label: z.string().default(""),
  "prompt-len": z.coerce.number().int().min(1).default(2000),
  "poll-ms": z.coerce.number().min(0).max(1000).default(20),
  "reading-rate": z.coerce.number().positive().max(1000).default(20),
  "paced-tokens": z.coerce.number().int().min(3).max(4096).default(64),
  unpaced: z.coerce.number().int().min(0).max(64).default(6),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  "deadline-s": z.coerce.number().positive().max(3600).default(600),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench responsiveness [flags]

How responsive a real server stays while it works: /health latency and a running stream's largest
gap during a long chunked prefill, and how closely a paced stream keeps its cadence beside unpaced
ones. Starts the server (main.ts serve) on a loopback port.

  --model M              model to serve (default demo)
  --flags "..."          extra server flags
  --label X              label for the report
  --prompt-len N         the long prefill's prompt tokens (default 2000)
  --poll-ms MS           /health polling interval (default 20)
  --reading-rate R       the paced stream's tokens/s (default 20)
  --paced-tokens N       the paced stream's length (default 64)
  --unpaced N            unpaced streams beside it (default 6)
  --start-timeout-s S    server start bound (default 300)
  --deadline-s S         whole-run bound (default 600)`;

const SHORT_PROMPT = 16;
/** Unpaced streams ask for this many tokens (capped by the context) and are hung up on later. */
const LONG_OUTPUT = 1024;
const STREAM_TIMEOUT_MS = 240_000;
const MAX_POLLS = 20_000;

export async function benchResponsiveness(args: string[]): Promise<string> {
  const f = parseFlags(args);
  const deadline = AbortSignal.timeout(f["deadline-s"] * 1000);
  const measuredAt = new Date();
  const server = await startServer({
    command: [Deno.execPath(), "run", "-A", "main.ts", "serve"],
    model: f.model,
    flags: splitFlags(f.flags),
    startTimeoutMs: f["start-timeout-s"] * 1000,
  });
  try {
    const model = await modelInfo(server.target, f.model);
    const t = server.target;
    log("warming up");
    await runToEnd(openStream(t, req(model, 200, 1, 4), STREAM_TIMEOUT_MS, deadline), "warm-up");
    log("polling /health while idle");
    const idle = await pollHealth(t, AbortSignal.timeout(30_000), polls(f, 20));
    log(`long prefill of ${f["prompt-len"]} tokens`);
    const alone = await longPrefill(t, model, f, 3, deadline);
    log(`long prefill of ${f["prompt-len"]} tokens beside a running stream`);
    const beside = await prefillBesideStream(t, model, f, deadline);
    log(`pacer cadence at ${f["reading-rate"]} tokens/s beside ${f.unpaced} unpaced streams`);
    const cadence = await measureCadence(t, model, f, deadline);
    const commit = await gitDescribe();
    return report(f, {
      measuredAt,
      commit,
      idle: summarize(idle.latenciesMs),
      alone,
      beside,
      cadence,
    });
  } catch (e) {
    throw new Error(
      `${e instanceof Error ? e.message : e}\n--- server output (tail) ---\n${server.logTail()}`,
    );
  } finally {
    await server.stop();
  }
}

function parseFlags(args: string[]): Options {
  return parseBenchFlags(Flags, args);
}

function log(line: string) {
  console.error(`responsiveness: ${line}`);
}

/** A request with `promptLen` seeded random ids inside the vocabulary, unpaced unless rated. */
function req(model: ModelInfo, promptLen: number, seed: number, maxTokens: number, rate?: number) {
  const next = seededRandom(seed);
  const prompt = Array.from({ length: promptLen }, () => Math.floor(next() * model.vocabSize));
  return { model: model.id, prompt, maxTokens, readingRate: rate };
}

/** Output length for a stream meant to outlast the measurement (it is hung up on after). */
function longOutput(model: ModelInfo): number {
  return Math.min(LONG_OUTPUT, (model.maxContext ?? 4096) - SHORT_PROMPT - 1);
}

function polls(f: Options, maxPolls = MAX_POLLS) {
  return {
    intervalMs: f["poll-ms"],
    pollTimeoutMs: 30_000,
    maxPolls,
    deadlineMs: STREAM_TIMEOUT_MS,
  };
}

async function runToEnd(s: Stream, what: string): Promise<void> {
  const end = await s.done;
  if (end.outcome !== "ok") throw new Error(`${what} failed: ${end.error ?? end.outcome}`);
}

/** Waits (bounded) until `ready()` holds or the stream has ended. */
async function until(s: Stream, ready: () => boolean, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!ready() && !s.ended() && performance.now() < end) {
    await sleepUntil(performance.now() + 10);
  }
}

/** A long prompt's prefill, and /health polled back-to-back until its first token. */
interface LongPrefill {
  promptLen: number;
  sentAtMs: number;
  firstAtMs: number;
  health: Summary;
  healthFailures: number;
  pollsStoppedBy: string;
}

async function longPrefill(
  t: LoopbackTarget,
  model: ModelInfo,
  f: Options,
  seed: number,
  deadline: AbortSignal,
): Promise<LongPrefill> {
  const promptLen = Math.min(f["prompt-len"], (model.maxContext ?? Infinity) - 5);
  const long = openStream(t, req(model, promptLen, seed, 4), STREAM_TIMEOUT_MS, deadline);
  const stop = new AbortController();
  long.done.then(() => stop.abort());
  long.firstToken.then(() => stop.abort(), () => stop.abort());
  const health = await pollHealth(t, stop.signal, polls(f));
  const firstAtMs = await long.firstToken;
  await runToEnd(long, "long prompt");
  return {
    promptLen,
    sentAtMs: long.sentAtMs,
    firstAtMs,
    health: summarize(health.latenciesMs),
    healthFailures: health.failures,
    pollsStoppedBy: health.stoppedBy,
  };
}

/** What a stream that was decoding all along saw during the prefill. */
interface RunningStream {
  largestGapMs: number | null;
  chunksDuring: number;
  gapBefore: Summary;
  endedEarly: boolean;
}

async function prefillBesideStream(
  t: LoopbackTarget,
  model: ModelInfo,
  f: Options,
  deadline: AbortSignal,
): Promise<{ prefill: LongPrefill; stream: RunningStream }> {
  const bg = openStream(
    t,
    req(model, SHORT_PROMPT, 2, longOutput(model)),
    STREAM_TIMEOUT_MS,
    deadline,
  );
  try {
    await bg.firstToken;
    // Some decode steps first, so the stream is in its steady state.
    await until(bg, () => bg.chunks.length >= 12, 30_000);
    const before = bg.chunks.map((c) => c.atMs);
    const prefill = await longPrefill(t, model, f, 4, deadline);
    // The chunk that closes the stream's gap may arrive just after the long prompt's first token.
    await until(bg, () => bg.chunks[bg.chunks.length - 1].atMs > prefill.firstAtMs, 30_000);
    const a = bg.chunks.map((c) => c.atMs);
    const stream = {
      largestGapMs: largestGapDuring(a, prefill.sentAtMs, prefill.firstAtMs),
      chunksDuring: arrivalsDuring(a, prefill.sentAtMs, prefill.firstAtMs),
      gapBefore: summarize(before.slice(1).map((x, i) => x - before[i])),
      endedEarly: a[a.length - 1] <= prefill.firstAtMs,
    };
    return { prefill, stream };
  } finally {
    bg.cancel();
    await bg.done;
  }
}

interface CadenceResult {
  intervalMs: number;
  chunks: number;
  tokens: number;
  multiTokenChunks: number;
  ttftMs: number | null;
  deviation: Summary;
  meanRate: number | null;
  /** Each unpaced stream's tokens/s between the paced stream's first and last chunk. */
  unpacedRates: number[];
  unpacedRunning: number;
  outcome: string;
}

async function measureCadence(
  t: LoopbackTarget,
  model: ModelInfo,
  f: Options,
  deadline: AbortSignal,
): Promise<CadenceResult> {
  const unpaced = Array.from(
    { length: f.unpaced },
    (_, i) =>
      openStream(
        t,
        req(model, SHORT_PROMPT, 10 + i, longOutput(model)),
        STREAM_TIMEOUT_MS,
        deadline,
      ),
  );
  try {
    await Promise.all(unpaced.map((s) => s.firstToken));
    const rate = f["reading-rate"];
    const paced = openStream(
      t,
      req(model, SHORT_PROMPT, 9, f["paced-tokens"], rate),
      STREAM_TIMEOUT_MS,
      deadline,
    );
    const end = await paced.done;
    const running = unpaced.filter((s) => !s.ended()).length;
    const intervalMs = 1000 / rate;
    const c = paced.chunks;
    return {
      intervalMs,
      chunks: c.length,
      tokens: c.reduce((s, x) => s + x.tokens, 0),
      multiTokenChunks: c.filter((x) => x.tokens > 1).length,
      ttftMs: c.length ? c[0].atMs - paced.sentAtMs : null,
      deviation: summarize(cadenceDeviations(c, intervalMs)),
      meanRate: meanRate(c),
      unpacedRates: c.length < 2
        ? []
        : unpaced.map((u) => rateDuring(u.chunks, c[0].atMs, c[c.length - 1].atMs) ?? 0),
      unpacedRunning: running,
      outcome: end.outcome + (end.error ? `: ${end.error}` : ""),
    };
  } finally {
    unpaced.forEach((s) => s.cancel());
    await Promise.all(unpaced.map((s) => s.done));
  }
}

async function gitDescribe(): Promise<string> {
  try {
    const out = await new Deno.Command("git", {
      args: ["describe", "--always", "--dirty"],
      stdout: "piped",
      stderr: "null",
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : "unknown";
  } catch {
    return "unknown";
  }
}

interface Results {
  measuredAt: Date;
  commit: string;
  idle: Summary;
  alone: LongPrefill;
  beside: { prefill: LongPrefill; stream: RunningStream };
  cadence: CadenceResult;
}

const ms = (x: number | null) => (x === null ? "–" : x < 10 ? x.toFixed(1) : x.toFixed(0));
const triple = (s: Summary) => `${ms(s.p50)} / ${ms(s.p99)} / ${ms(s.max)} ms`;
const seconds = (p: LongPrefill) => (p.firstAtMs - p.sentAtMs) / 1000;

function report(f: Options, r: Results): string {
  return [
    `### Responsiveness${f.label ? ` — ${f.label}` : ""} (model ${f.model})`,
    "",
    `Measured ${r.measuredAt.toISOString()} on ${navigator.hardwareConcurrency} CPU cores, ` +
    `commit ${r.commit}, server flags \`${f.flags || "(defaults)"}\`.`,
    "",
    ...prefillSection(f, r),
    "",
    ...cadenceSection(f, r.cadence),
    ...notes(f, r),
  ].join("\n");
}

function prefillSection(f: Options, r: Results): string[] {
  const a = r.alone;
  const b = r.beside.prefill;
  const s = r.beside.stream;
  const row = (what: string, x: (p: LongPrefill) => string) => `| ${what} | ${x(a)} | ${x(b)} |`;
  const poll = f["poll-ms"];
  return [
    `**/health during a long prefill**: one ${a.promptLen}-token prompt (token ids, max_tokens 4, ` +
    `streaming), first alone, then while one unpaced stream (${SHORT_PROMPT}-token prompt) is ` +
    `decoding. /health is polled one request at a time, each starting at least ${poll} ms after ` +
    `the previous, from sending the prompt until its first token. Idle /health latency ` +
    `p50 / p99 / max: ${triple(r.idle)} (${r.idle.count} polls).`,
    "",
    "| measurement | prefill alone | beside a running stream |",
    "| --- | --- | --- |",
    row("prefill (time to first token)", (p) => `${seconds(p).toFixed(2)} s`),
    row("prefill rate", (p) => `${(p.promptLen / seconds(p)).toFixed(0)} tokens/s`),
    row("/health polls (failed)", (p) => `${p.health.count} (${p.healthFailures})`),
    row("/health latency p50 / p99 / max", (p) => triple(p.health)),
    `| running stream: largest gap between chunks during the prefill | – | ${
      ms(s.largestGapMs)
    } ms (${s.chunksDuring} chunks during the prefill) |`,
    `| running stream: gap p50 / p99 / max before the prefill | – | ${triple(s.gapBefore)} |`,
  ];
}

function cadenceSection(f: Options, c: CadenceResult): string[] {
  const interval = ms(c.intervalMs);
  return [
    `**Pacer cadence**: one stream at reading_rate ${f["reading-rate"]} (a ${interval} ms ` +
    `cadence, max_tokens ${f["paced-tokens"]}) beside ${f.unpaced} unpaced streams, all with ` +
    `${SHORT_PROMPT}-token prompts and ignore_eos. Deviation is |gap − k × ${interval} ms| for ` +
    `each token-carrying chunk after the first, k its tokens.`,
    "",
    "| measurement | result |",
    "| --- | --- |",
    `| paced chunks (tokens; chunks with more than one token) | ${c.chunks} (${c.tokens}; ${c.multiTokenChunks}) |`,
    `| paced time to first token | ${ms(c.ttftMs)} ms |`,
    `| deviation from cadence p50 / p99 / max (${c.deviation.count} gaps) | ${
      triple(c.deviation)
    } |`,
    `| paced mean rate (after the first chunk) | ${
      c.meanRate === null ? "–" : c.meanRate.toFixed(2)
    } tokens/s |`,
    `| unpaced streams' rate over the same span, p50 (min–max) | ${unpacedRates(c)} |`,
    `| unpaced streams still running when the paced one ended | ${c.unpacedRunning} / ${f.unpaced} |`,
  ];
}

function unpacedRates(c: CadenceResult): string {
  if (c.unpacedRates.length === 0) return "–";
  const r = c.unpacedRates;
  const p50 = summarize(r).p50!;
  return `${p50.toFixed(1)} (${Math.min(...r).toFixed(1)}–${Math.max(...r).toFixed(1)}) tokens/s`;
}

/** Anything that makes a figure above less than it seems. */
function notes(f: Options, r: Results): string[] {
  const c = r.cadence;
  const out = [
    ...(r.beside.stream.endedEarly
      ? ["The running stream ended before the prefill did; its largest gap is open-ended."]
      : []),
    ...[r.alone, r.beside.prefill].filter((p) => p.pollsStoppedBy !== "signal").map((p) =>
      `/health polling stopped by ${p.pollsStoppedBy}, not by the first token.`
    ),
    ...(c.unpacedRunning < f.unpaced
      ? [`Only ${c.unpacedRunning} of ${f.unpaced} unpaced streams outlasted the paced one.`]
      : []),
    ...(c.outcome !== "ok" ? [`The paced stream ended: ${c.outcome}.`] : []),
  ];
  return out.length ? ["", ...out.map((n) => `- ${n}`)] : [];
}
