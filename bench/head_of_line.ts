// `deno task bench head-of-line [flags]`: how long a short stream waits for its first token when it
// arrives while a long prompt prefills (issue 31), against the same stream on an idle server. Each
// round sends the long prompt (max_tokens 4), then the short one a fixed delay later, against one
// real server (main.ts serve on a loopback port). Before prefill rows were shared
// (runtime/prefill_share.ts) the short stream waited for all of the long prompt's chunks.

import { z } from "zod";
import { parseBenchFlags } from "./common/cli.ts";
import { splitFlags } from "./serve/flags.ts";
import type { LoopbackTarget } from "./serve/loopback.ts";
import { seededRandom } from "./serve/random.ts";
import { type ModelInfo, modelInfo } from "./serve/run.ts";
import { startServer } from "./serve/server_process.ts";
import { openStream, sleepUntil, type Stream } from "./responsiveness/stream.ts";

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  flags: z.string().default(""),
  label: z.string().default(""),
  "long-len": z.coerce.number().int().min(1).default(1800),
  "short-len": z.coerce.number().int().min(1).default(60),
  "after-ms": z.coerce.number().min(0).max(60_000).default(1000),
  rounds: z.coerce.number().int().min(1).max(10).default(2),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  "deadline-s": z.coerce.number().positive().max(3600).default(600),
});
type Options = z.infer<typeof Flags>;

export const USAGE = `usage: deno task bench head-of-line [flags]

Time to first token of a short stream sent while a long prompt prefills, against the same stream on
an idle server, and the long prompt's own, over a few rounds against one real server (main.ts serve
on a loopback port).

  --model M              model to serve (default demo)
  --flags "..."          extra server flags
  --label X              label for the report
  --long-len N           the long prompt's tokens (default 1800)
  --short-len N          the short stream's prompt tokens (default 60)
  --after-ms MS          the short stream is sent this long after the long prompt (default 1000)
  --rounds N             rounds (default 2)
  --start-timeout-s S    server start bound (default 300)
  --deadline-s S         whole-run bound (default 600)`;

const SHORT_TOKENS = 16;
const STREAM_TIMEOUT_MS = 240_000;

/** One round's times to first token, in ms. */
interface Round {
  idleMs: number;
  besideMs: number;
  longMs: number;
}

export async function benchHeadOfLine(args: string[]): Promise<string> {
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
    const t = server.target;
    log("warming up");
    await firstToken(openStream(t, req(model, 200, 1, 4), STREAM_TIMEOUT_MS, deadline), "warm-up");
    const rounds: Round[] = [];
    for (let i = 1; i <= f.rounds; i++) {
      log(`round ${i}`);
      rounds.push(await round(t, model, f, i, deadline));
    }
    return report(f, measuredAt, await gitDescribe(), rounds);
  } catch (e) {
    throw new Error(
      `${e instanceof Error ? e.message : e}\n--- server output (tail) ---\n${server.logTail()}`,
    );
  } finally {
    await server.stop();
  }
}

function log(line: string) {
  console.error(`head-of-line: ${line}`);
}

/** A request with `promptLen` seeded random ids inside the vocabulary. */
function req(model: ModelInfo, promptLen: number, seed: number, maxTokens: number) {
  const next = seededRandom(seed);
  const prompt = Array.from({ length: promptLen }, () => Math.floor(next() * model.vocabSize));
  return { model: model.id, prompt, maxTokens };
}

/** The stream's time to first token (ms), once it has ended well. */
async function firstToken(s: Stream, what: string): Promise<number> {
  const end = await s.done;
  if (end.outcome !== "ok") throw new Error(`${what} failed: ${end.error ?? end.outcome}`);
  return (await s.firstToken) - s.sentAtMs;
}

/** The short stream alone, then the long prompt and the short stream `after-ms` later. */
async function round(
  t: LoopbackTarget,
  model: ModelInfo,
  f: Options,
  i: number,
  deadline: AbortSignal,
): Promise<Round> {
  const longLen = Math.min(f["long-len"], (model.maxContext ?? Infinity) - 5);
  const short = () => req(model, f["short-len"], 10 + i, SHORT_TOKENS);
  const idleMs = await firstToken(
    openStream(t, short(), STREAM_TIMEOUT_MS, deadline),
    "short stream, idle",
  );
  const long = openStream(t, req(model, longLen, 20 + i, 4), STREAM_TIMEOUT_MS, deadline);
  await sleepUntil(long.sentAtMs + f["after-ms"]);
  const beside = openStream(t, short(), STREAM_TIMEOUT_MS, deadline);
  const [besideMs, longMs] = await Promise.all([
    firstToken(beside, "short stream, beside the long prompt"),
    firstToken(long, "long prompt"),
  ]);
  return { idleMs, besideMs, longMs };
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

function report(f: Options, measuredAt: Date, commit: string, rounds: Round[]): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return [
    `### Head-of-line prefill${f.label ? ` — ${f.label}` : ""} (model ${f.model})`,
    "",
    `Measured ${measuredAt.toISOString()} on ${navigator.hardwareConcurrency} CPU cores, commit ` +
    `${commit}, server flags \`${f.flags || "(defaults)"}\`. Each round: a ${
      f["short-len"]
    }-token ` +
    `stream (max_tokens ${SHORT_TOKENS}) alone, then a ${f["long-len"]}-token prompt (max_tokens ` +
    `4) and the same stream ${f["after-ms"]} ms after it. Times to first token:`,
    "",
    "| round | short stream, idle | short stream, beside the long prefill | long prompt |",
    "| --- | --- | --- | --- |",
    ...rounds.map((r, i) => `| ${i + 1} | ${s(r.idleMs)} | ${s(r.besideMs)} | ${s(r.longMs)} |`),
  ].join("\n");
}
