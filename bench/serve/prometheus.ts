// A small parser for the Prometheus text exposition format (what GET /metrics returns), and the
// scraper that samples it during a run. Deliberately independent of server/metrics.ts so the
// instrument checks the server rather than sharing its assumptions.

import { getText } from "./http.ts";
import type { LoopbackTarget } from "./loopback.ts";

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseValue(s: string): number {
  switch (s) {
    case "+Inf":
    case "Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  const v = Number(s);
  if (s === "" || Number.isNaN(v)) throw new Error(`bad sample value "${s}"`);
  return v;
}

/** Parses one sample line: name{a="x",b="y"} value [timestamp]. */
function parseSampleLine(line: string): Sample {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (!m) throw new Error(`bad metric name in "${line}"`);
  const name = m[1];
  let i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === "{") {
    i++;
    for (;;) {
      while (line[i] === " " || line[i] === ",") i++;
      if (line[i] === "}") {
        i++;
        break;
      }
      const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
      if (!lm) throw new Error(`bad label in "${line}"`);
      i += lm[0].length;
      let value = "";
      for (;;) {
        const c = line[i++];
        if (c === undefined) throw new Error(`unterminated label value in "${line}"`);
        if (c === '"') break;
        if (c === "\\") {
          const e = line[i++];
          value += e === "n" ? "\n" : e;
        } else value += c;
      }
      labels[lm[1]] = value;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  if (rest.length < 1 || rest.length > 2) throw new Error(`bad sample "${line}"`);
  return { name, labels, value: parseValue(rest[0]) };
}

/** All samples in an exposition; comment and blank lines are skipped, malformed lines throw. */
export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    out.push(parseSampleLine(line));
  }
  return out;
}

export interface Scrape {
  /** ms since the run started. */
  tMs: number;
  samples: Sample[];
}

/** Only the server's own families are kept, so raw results stay small. */
const KEEP_PREFIX = "sluice_";

/**
 * Samples /metrics every `intervalMs` until stopped. At most `maxScrapes` scrapes (a bound, not a
 * target); failed scrapes (timeouts, parse errors) are counted and skipped.
 */
export class MetricsScraper {
  readonly scrapes: Scrape[] = [];
  failures = 0;
  lastError?: string;
  private stopped = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private stopping?: Promise<Scrape[]>;

  constructor(
    private target: LoopbackTarget,
    private runStartMs: number,
    private intervalMs = 250,
    private maxScrapes = 20_000,
  ) {}

  /** One scrape now (also used for the baseline before the workload starts). */
  async scrapeOnce(): Promise<void> {
    try {
      const { status, text } = await getText(this.target, "/metrics", 2000);
      const tMs = performance.now() - this.runStartMs;
      if (status !== 200) throw new Error(`/metrics answered ${status}`);
      this.scrapes.push({
        tMs,
        samples: parsePrometheus(text).filter((s) => s.name.startsWith(KEEP_PREFIX)),
      });
    } catch (e) {
      this.failures++;
      this.lastError = e instanceof Error ? e.message : String(e);
    }
  }

  start(): void {
    this.loop = (async () => {
      while (!this.stopped && this.scrapes.length + this.failures < this.maxScrapes) {
        await this.scrapeOnce();
        if (this.stopped) break;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.intervalMs);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    })();
  }

  /** Stops the loop and takes one last scrape so the counters' final values are seen. Idempotent. */
  stop(): Promise<Scrape[]> {
    this.stopping ??= (async () => {
      this.stopped = true;
      this.wake?.();
      await this.loop;
      await this.scrapeOnce();
      return this.scrapes;
    })();
    return this.stopping;
  }
}
