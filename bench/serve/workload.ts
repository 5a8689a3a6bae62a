// The workload: when each request arrives, how long its prompt and output are, how fast its reader
// reads, and its SLOs. Generated from a seed (steady Poisson, or a burst over a light Poisson
// background), bounded by the model's context when it is known, or read from a trace; saved as JSON lines in the same format a trace is read from, so any run can
// be replayed exactly with `--workload trace --trace <report>/workload.jsonl`.

import { z } from "zod";
import {
  type Dist,
  exponential,
  logNormal,
  normal,
  sampleDist,
  seededRandom,
  subSeed,
} from "./random.ts";

export interface WorkloadRequest {
  id: number;
  /** Seconds after the run starts. */
  arrivalS: number;
  /** Exactly one of promptLen (random ids from promptSeed), promptIds, promptText is set. */
  promptLen?: number;
  promptSeed?: number;
  promptIds?: number[];
  promptText?: string;
  /** max_tokens; the server is asked to ignore EOS so this is the output length. */
  outputLen: number;
  /** The reader's pace in tokens/s. */
  readingRate: number;
  sloTtftMs: number;
  sloTbtMs: number;
  /** The client hangs up after this many tokens (a reader who closes the tab). */
  cancelAfterTokens?: number;
}

export type LengthProfile = "short" | "long" | "mixed" | "doc";

export interface GenerateOptions {
  kind: "poisson" | "burst";
  seed: number;
  /** Poisson arrival rate in requests/s (the background rate for "burst"). */
  rate: number;
  durationS: number;
  burstSize: number;
  burstAtS: number;
  /** The burst's requests arrive uniformly within this window (the issue's "within one second"). */
  burstWindowS: number;
  lengths: LengthProfile;
  readingRate: Dist;
  sloTtftMs: number;
  sloTbtMs: number;
  maxRequests: number;
  /** Fraction of requests whose reader hangs up part-way. */
  cancelFraction: number;
  /** The model's context: when given, every request's prompt + output fits (see boundByContext). */
  maxContext?: number;
}

/** Hard cap on requests in one run, whatever the flags or trace say. */
export const MAX_REQUESTS_CAP = 10_000;

// Reading rates are clamped to a plausible range so a bad distribution cannot produce a reader
// who never finishes (rate ~0) or a division blow-up.
const MIN_RATE = 1;
const MAX_RATE = 1000;

/** Arrival times in seconds, sorted. */
export function arrivals(o: GenerateOptions): number[] {
  const next = seededRandom(subSeed(o.seed, "arrivals"));
  const cap = Math.min(o.maxRequests, MAX_REQUESTS_CAP);
  const burst = o.kind === "burst" ? Math.min(o.burstSize, cap) : 0;
  const out: number[] = [];
  for (let i = 0; i < burst; i++) out.push(o.burstAtS + o.burstWindowS * next());
  if (o.rate > 0) {
    let t = exponential(next, o.rate);
    while (t < o.durationS && out.length < cap) {
      out.push(t);
      t += exponential(next, o.rate);
    }
  }
  // To the millisecond, rounding down: rounding to nearest put an arrival at 199.9996 s of a
  // 200 s run at 200.000, past the run's end.
  return out.map((t) => Math.floor(t * 1000) / 1000).sort((a, b) => a - b);
}

/**
 * Prompt/output lengths. "short" is ShareGPT-like chat: log-normal with a long tail, prompts
 * median 96 tokens, outputs median 96 (kept modest so a run on a slow device ends in minutes).
 * "long" prompts are several thousand tokens (clamped to the model's context when sent).
 * "mixed" is 75% short, 25% long prompts. "doc" prompts are long documents, uniform in 1–2k tokens.
 */
export function drawLengths(
  next: () => number,
  profile: LengthProfile,
): { prompt: number; output: number } {
  const clamp = (x: number, lo: number, hi: number) => Math.round(Math.min(hi, Math.max(lo, x)));
  const output = clamp(logNormal(next, 96, 0.6), 4, 512);
  const shortPrompt = () => clamp(logNormal(next, 96, 0.9), 4, 1024);
  const longPrompt = () => clamp(normal(next, 3000, 1000), 1024, 8192);
  if (profile === "doc") return { prompt: clamp(1024 + 1024 * next(), 1024, 2048), output };
  const long = profile === "long" || (profile === "mixed" && next() < 0.25);
  return { prompt: long ? longPrompt() : shortPrompt(), output };
}

/**
 * Lengths that fit a context of `maxContext` tokens, as materialize() would send them: the output
 * is capped first (leaving one prompt token), then the prompt shortened so prompt + output fits.
 */
export function boundByContext(
  lengths: { prompt: number; output: number },
  maxContext: number | undefined,
): { prompt: number; output: number } {
  if (maxContext === undefined) return lengths;
  const output = Math.max(0, Math.min(lengths.output, maxContext - 1));
  return { prompt: Math.max(1, Math.min(lengths.prompt, maxContext - output)), output };
}

export function generateWorkload(o: GenerateOptions): WorkloadRequest[] {
  const times = arrivals(o);
  const next = seededRandom(subSeed(o.seed, "requests"));
  return times.map((arrivalS, id) => {
    const { prompt, output } = boundByContext(drawLengths(next, o.lengths), o.maxContext);
    const rate = Math.min(MAX_RATE, Math.max(MIN_RATE, sampleDist(next, o.readingRate)));
    const cancel = next() < o.cancelFraction;
    const cancelAt = Math.max(1, Math.floor(output * (0.2 + 0.6 * next())));
    return {
      id,
      arrivalS,
      promptLen: prompt,
      promptSeed: Math.floor(next() * 2 ** 31),
      outputLen: output,
      readingRate: Math.round(rate * 100) / 100,
      sloTtftMs: o.sloTtftMs,
      sloTbtMs: o.sloTbtMs,
      ...(cancel ? { cancelAfterTokens: cancelAt } : {}),
    };
  });
}

const TraceLine = z.object({
  id: z.number().int().nonnegative().optional(),
  arrival_s: z.number().nonnegative().finite(),
  prompt_len: z.number().int().positive().optional(),
  prompt_seed: z.number().int().nonnegative().optional(),
  prompt_ids: z.array(z.number().int().nonnegative()).min(1).optional(),
  prompt: z.string().min(1).optional(),
  output_len: z.number().int().nonnegative(),
  reading_rate: z.number().positive().finite().optional(),
  slo_ttft_ms: z.number().positive().optional(),
  slo_tbt_ms: z.number().positive().optional(),
  cancel_after_tokens: z.number().int().nonnegative().optional(),
}).strict().refine(
  (l) => [l.prompt_len, l.prompt_ids, l.prompt].filter((x) => x !== undefined).length === 1,
  { message: "give exactly one of prompt_len, prompt_ids, prompt" },
);

export interface TraceDefaults {
  seed: number;
  readingRate: Dist;
  sloTtftMs: number;
  sloTbtMs: number;
  maxRequests: number;
}

/**
 * Reads a JSON-lines trace. Fields a line leaves out (reading rate, SLOs) come from the flags;
 * missing reading rates are drawn from the distribution with the seed. Blank lines are skipped.
 */
export function parseTrace(text: string, d: TraceDefaults): WorkloadRequest[] {
  const next = seededRandom(subSeed(d.seed, "trace-rates"));
  const lines: z.infer<typeof TraceLine>[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      throw new Error(`trace line ${i + 1}: not JSON`);
    }
    const parsed = TraceLine.safeParse(json);
    if (!parsed.success) {
      const why = parsed.error.issues.map((e) => `${e.path.join(".") || "line"}: ${e.message}`)
        .join("; ");
      throw new Error(`trace line ${i + 1}: ${why}`);
    }
    lines.push(parsed.data);
  });
  lines.sort((a, b) => a.arrival_s - b.arrival_s);
  const kept = lines.slice(0, Math.min(d.maxRequests, MAX_REQUESTS_CAP));
  return kept.map((l, i) => {
    const rate = l.reading_rate ??
      Math.min(MAX_RATE, Math.max(MIN_RATE, sampleDist(next, d.readingRate)));
    const id = l.id ?? i;
    return {
      id,
      arrivalS: l.arrival_s,
      ...(l.prompt_len !== undefined
        ? { promptLen: l.prompt_len, promptSeed: l.prompt_seed ?? subSeed(id, "prompt") }
        : {}),
      ...(l.prompt_ids !== undefined ? { promptIds: l.prompt_ids } : {}),
      ...(l.prompt !== undefined ? { promptText: l.prompt } : {}),
      outputLen: l.output_len,
      readingRate: Math.round(rate * 100) / 100,
      sloTtftMs: l.slo_ttft_ms ?? d.sloTtftMs,
      sloTbtMs: l.slo_tbt_ms ?? d.sloTbtMs,
      ...(l.cancel_after_tokens !== undefined ? { cancelAfterTokens: l.cancel_after_tokens } : {}),
    };
  }).map((r, i, all) => {
    if (all.findIndex((o) => o.id === r.id) !== i) throw new Error(`trace: duplicate id ${r.id}`);
    return r;
  });
}

/** The workload as JSON lines, in the trace format (snake_case), one request per line. */
export function workloadToJsonl(requests: WorkloadRequest[]): string {
  return requests.map((r) =>
    JSON.stringify({
      id: r.id,
      arrival_s: r.arrivalS,
      prompt_len: r.promptLen,
      prompt_seed: r.promptSeed,
      prompt_ids: r.promptIds,
      prompt: r.promptText,
      output_len: r.outputLen,
      reading_rate: r.readingRate,
      slo_ttft_ms: r.sloTtftMs,
      slo_tbt_ms: r.sloTbtMs,
      cancel_after_tokens: r.cancelAfterTokens,
    })
  ).join("\n") + "\n";
}

export interface ModelLimits {
  vocabSize: number;
  /** Context length if the server reports one; prompts are clamped to fit output within it. */
  maxContext?: number;
}

/** What is actually sent: the prompt (ids or text) and max_tokens, after the model's limits. */
export interface MaterializedPrompt {
  prompt: number[] | string;
  maxTokens: number;
}

/**
 * Turns a request into the prompt it sends. Random prompts are ids in [0, vocab) drawn from the
 * request's own seed, so every configuration receives byte-identical prompts. With a known context
 * limit, the output is capped first (leaving at least one prompt token) and the prompt shortened
 * so prompt + output fits.
 */
export function materialize(r: WorkloadRequest, limits: ModelLimits): MaterializedPrompt {
  const ctx = limits.maxContext;
  const maxTokens = ctx === undefined ? r.outputLen : Math.max(0, Math.min(r.outputLen, ctx - 1));
  if (r.promptText !== undefined) return { prompt: r.promptText, maxTokens };
  if (r.promptIds !== undefined) {
    const bad = r.promptIds.find((id) => id >= limits.vocabSize);
    if (bad !== undefined) {
      throw new Error(`request ${r.id}: prompt id ${bad} >= vocab ${limits.vocabSize}`);
    }
    return { prompt: r.promptIds, maxTokens };
  }
  const len = ctx === undefined
    ? r.promptLen!
    : Math.max(1, Math.min(r.promptLen!, ctx - maxTokens));
  const next = seededRandom(r.promptSeed ?? subSeed(r.id, "prompt"));
  const ids = Array.from({ length: len }, () => Math.floor(next() * limits.vocabSize));
  return { prompt: ids, maxTokens };
}
