// `deno task bench greedy-rate [flags]`: whether one stream that declares a huge reading_rate holds
// other requests hostage (issue 17). Four short requests (max_tokens 4) are sent while one long
// stream decodes, once with the long stream unpaced and once at the given rate, in alternating
// rounds against one real server (main.ts serve, default flags: --sched tokenflow). A reader faster
// than the adapter can serve is served like an unpaced one, so the short requests' latency should
// be about the same both ways: the goal is a ratio within 2×.

import { z } from "zod";
import { parseBenchFlags } from "../common/cli.ts";
import { splitFlags } from "../serve/flags.ts";
import type { LoopbackTarget } from "../serve/loopback.ts";
import { seededRandom } from "../serve/random.ts";
import { type ModelInfo, modelInfo } from "../serve/run.ts";
import { startServer } from "../serve/server_process.ts";
import { summarize, type Summary } from "../responsiveness/stats.ts";
import { openStream, sleepUntil, type Stream } from "../responsiveness/stream.ts";

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  flags: z.string().default(""),
  rate: z.coerce.number().min(0.1).max(10_000).default(10_000),
  rounds: z.coerce.number().int().min(1).max(20).default(3),
  "long-tokens": z.coerce.number().int().min(16).max(4096).default(200),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  "deadline-s": z.coerce.number().positive().max(3600).default(600),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench greedy-rate [flags]

Latency (TTFT and total) of four short requests (max_tokens 4) sent while one long stream runs,
with the long stream unpaced and at --rate, in alternating rounds against one real server
(main.ts serve on a loopback port). Prints both and their ratio; the goal is within 2×.

  --model M              model to serve (default demo)
  --flags "..."          extra server flags (default: none, so --sched tokenflow)
  --rate R               the long stream's reading_rate, tokens/s (default 10000)
  --rounds N             rounds of each (default 3)
  --long-tokens N        the long stream's max_tokens (default 200)
  --start-timeout-s S    server start bound (default 300)
  --deadline-s S         whole-run bound (default 600)`;

const PROMPT = 16;
const SHORT_TOKENS = 4;
const SHORTS = 4;
/** Chunks of the long stream before the short requests go: it is decoding, not prefilling. */
const LONG_CHUNKS_FIRST = 8;
const STREAM_TIMEOUT_MS = 240_000;

/** The four short requests of one round, beside a long stream paced at `rate` (undefined: not). */
interface Round {
  rate?: number;
  ttftMs: number[];
  totalMs: number[];
  /** Whether the long stream was still running when the last short request ended. */
  longOutlasted: boolean;
}

export async function benchGreedyRate(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
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
    log("warming up");
    await shortsBeside(server.target, model, f, undefined, 0, deadline);
    const rounds: Round[] = [];
    for (let i = 1; i <= f.rounds; i++) {
      for (const rate of [undefined, f.rate]) {
        log(`round ${i}: long stream ${rate === undefined ? "unpaced" : `at ${rate} tokens/s`}`);
        rounds.push(await shortsBeside(server.target, model, f, rate, i, deadline));
      }
    }
    return report(f, measuredAt, rounds);
  } catch (e) {
    throw new Error(
      `${e instanceof Error ? e.message : e}\n--- server output (tail) ---\n${server.logTail()}`,
    );
  } finally {
    await server.stop();
  }
}

function log(line: string) {
  console.error(`greedy-rate: ${line}`);
}

/** A request with a seeded random prompt inside the vocabulary. */
function req(model: ModelInfo, seed: number, maxTokens: number, rate?: number) {
  const next = seededRandom(seed);
  const prompt = Array.from({ length: PROMPT }, () => Math.floor(next() * model.vocabSize));
  return { model: model.id, prompt, maxTokens, readingRate: rate };
}

async function ended(s: Stream, what: string): Promise<number> {
  const end = await s.done;
  if (end.outcome !== "ok") throw new Error(`${what} failed: ${end.error ?? end.outcome}`);
  return performance.now();
}

/** One round: the long stream, then the four short requests once it decodes. */
async function shortsBeside(
  t: LoopbackTarget,
  model: ModelInfo,
  f: Options,
  rate: number | undefined,
  round: number,
  deadline: AbortSignal,
): Promise<Round> {
  const longTokens = Math.min(f["long-tokens"], (model.maxContext ?? 4096) - PROMPT - 1);
  const long = openStream(
    t,
    req(model, 100 + round, longTokens, rate),
    STREAM_TIMEOUT_MS,
    deadline,
  );
  try {
    await long.firstToken;
    const until = performance.now() + 30_000;
    while (long.chunks.length < LONG_CHUNKS_FIRST && !long.ended() && performance.now() < until) {
      await sleepUntil(performance.now() + 5);
    }
    if (long.ended()) throw new Error("the long stream ended before the short requests were sent");
    const shorts = Array.from(
      { length: SHORTS },
      (_, i) =>
        openStream(t, req(model, 10 * round + i, SHORT_TOKENS), STREAM_TIMEOUT_MS, deadline),
    );
    const ends = await Promise.all(shorts.map((s, i) => ended(s, `short request ${i}`)));
    return {
      rate,
      ttftMs: await Promise.all(shorts.map(async (s) => (await s.firstToken) - s.sentAtMs)),
      totalMs: shorts.map((s, i) => ends[i] - s.sentAtMs),
      longOutlasted: !long.ended(),
    };
  } finally {
    long.cancel();
    await long.done;
  }
}

const ms = (x: number | null) => (x === null ? "–" : x < 10 ? x.toFixed(1) : x.toFixed(0));
const pair = (s: Summary) => `${ms(s.p50)} / ${ms(s.max)} ms`;

function report(f: Options, measuredAt: Date, rounds: Round[]): string {
  const of = (paced: boolean) => rounds.filter((r) => (r.rate !== undefined) === paced);
  const stats = (rs: Round[]) => ({
    ttft: summarize(rs.flatMap((r) => r.ttftMs)),
    total: summarize(rs.flatMap((r) => r.totalMs)),
    outlasted: rs.filter((r) => r.longOutlasted).length,
  });
  const unpaced = stats(of(false)), paced = stats(of(true));
  const ratio = (a: Summary, b: Summary) => a.p50! / b.p50!;
  const ttftRatio = ratio(paced.ttft, unpaced.ttft), totalRatio = ratio(paced.total, unpaced.total);
  const row = (what: string, s: ReturnType<typeof stats>) =>
    `| ${what} | ${pair(s.ttft)} | ${pair(s.total)} | ${s.outlasted} / ${f.rounds} |`;
  const met = Math.max(ttftRatio, totalRatio) <= 2;
  return [
    `### Greedy reading rate (model ${f.model})`,
    "",
    `Measured ${measuredAt.toISOString()} on ${navigator.hardwareConcurrency} CPU cores, server ` +
    `flags \`${f.flags || "(defaults)"}\`. Each round: one long stream (${PROMPT}-token prompt, ` +
    `max_tokens ${f["long-tokens"]}) decodes, then ${SHORTS} short requests (max_tokens ` +
    `${SHORT_TOKENS}) are sent at once; ${f.rounds} rounds each way, alternating.`,
    "",
    "| long stream | short TTFT p50 / max | short total p50 / max | long stream outlasted them |",
    "| --- | --- | --- | --- |",
    row("unpaced", unpaced),
    row(`reading_rate ${f.rate}`, paced),
    "",
    `**Ratio (reading_rate ${f.rate} / unpaced, p50)**: TTFT ${ttftRatio.toFixed(2)}×, total ` +
    `${totalRatio.toFixed(2)}× — goal within 2×: ${met ? "met" : "missed"}.`,
  ].join("\n");
}
