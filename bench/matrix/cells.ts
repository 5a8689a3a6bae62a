// The workload matrix of issue 19: each cell is one way users load a server (how fast they read,
// how requests arrive, how long prompts are, how much device memory the KV cache gets), with its
// own seed. This list is the committed definition; `bench matrix` replays each cell, generated
// here from the seed with the serving bench's generator, against every configuration.

import { parseDist } from "../serve/random.ts";
import { generateWorkload, type WorkloadRequest } from "../serve/workload.ts";

/** How fast a cell's readers read; bounded so no reader's own pace exceeds its TBT SLO. */
export type ReaderClass = "slow" | "human" | "fast" | "unpaced";

export const READERS: Record<ReaderClass, { dist: string; sloTbtMs: number; about: string }> = {
  slow: { dist: "uniform:4:6", sloTbtMs: 400, about: "slow, ~5 tokens/s" },
  human: { dist: "uniform:10:20", sloTbtMs: 250, about: "human, ~15 tokens/s" },
  fast: { dist: "uniform:25:35", sloTbtMs: 250, about: "fast, ~30 tokens/s" },
  // The generator's highest rate: above any generation rate here, so the stream is not paced.
  unpaced: { dist: "fixed:1000", sloTbtMs: 250, about: "unpaced (1000 tokens/s)" },
};

/** Prompt lengths: short chat (the generator's "short"), or 1–2k-token documents ("doc"). */
export type PromptClass = "chat" | "doc";

/** TTFT SLOs for the demo model on the development machine (2 cores, software Vulkan), where a
 * 1.4k-token document's first token took 16–20 s beside another one (a smoke run, machine busy);
 * on a faster device, tighten them here (a commit). */
export const PROMPTS: Record<PromptClass, { profile: "short" | "doc"; sloTtftMs: number }> = {
  chat: { profile: "short", sloTtftMs: 1300 },
  doc: { profile: "doc", sloTtftMs: 15_000 },
};

export type Arrival =
  /** `size` requests within one second at t = 1 s, over a Poisson background. */
  | { kind: "burst"; size: number; backgroundRate: number }
  /** Steady Poisson arrivals near the device's capacity. */
  | { kind: "steady"; rate: number };

/** The device KV budget: `tight` puts the cell under memory pressure, `ample` does not. */
export type Budget = "tight" | "ample";

export interface Cell {
  id: string;
  arrival: Arrival;
  readers: ReaderClass;
  prompts: PromptClass;
  budget: Budget;
  /** Arrivals stop after this many seconds (the burst is at 1 s). */
  durationS: number;
  maxRequests: number;
  seed: number;
}

/** Budgets in MB (--gpu-kv-mb) for the demo model: tight holds ~1,900 tokens of KV, a few chat
 * requests or one document; ample holds every cell's requests at once. */
export const DEFAULT_BUDGET_MB: Record<Budget, number> = { tight: 2, ample: 64 };

/**
 * The cells. Every dimension appears on both sides of another: readers slow, human, fast and
 * unpaced; bursts of 8, 16, 24 and 32 and steady arrivals; chat and documents; tight and ample
 * budgets. Steady rates are near the demo model's capacity on the development machine (2 cores,
 * software Vulkan); elsewhere scale them with --rate-scale from `bench capacity`.
 */
export const CELLS: readonly Cell[] = [
  cell("chat-burst16-human-ample", burst(16), "human", "chat", "ample", 20, 40, 1901),
  cell("chat-burst16-human-tight", burst(16), "human", "chat", "tight", 20, 40, 1902),
  cell("chat-burst32-slow-tight", burst(32), "slow", "chat", "tight", 20, 48, 1903),
  cell("chat-burst8-fast-ample", burst(8), "fast", "chat", "ample", 20, 40, 1904),
  cell("chat-burst24-unpaced-tight", burst(24), "unpaced", "chat", "tight", 20, 40, 1905),
  cell("chat-steady-human-tight", steady(0.5), "human", "chat", "tight", 40, 48, 1906),
  cell("chat-steady-unpaced-ample", steady(0.8), "unpaced", "chat", "ample", 40, 48, 1907),
  cell("doc-burst8-human-ample", burst(8, 0.1), "human", "doc", "ample", 20, 16, 1908),
  cell("doc-burst8-slow-tight", burst(8, 0.1), "slow", "doc", "tight", 20, 16, 1909),
  cell("doc-steady-fast-tight", steady(0.06), "fast", "doc", "tight", 120, 12, 1910),
];

function cell(
  id: string,
  arrival: Arrival,
  readers: ReaderClass,
  prompts: PromptClass,
  budget: Budget,
  durationS: number,
  maxRequests: number,
  seed: number,
): Cell {
  return { id, arrival, readers, prompts, budget, durationS, maxRequests, seed };
}

function burst(size: number, backgroundRate = 0.25): Arrival {
  return { kind: "burst", size, backgroundRate };
}

function steady(rate: number): Arrival {
  return { kind: "steady", rate };
}

/** The cells named in `ids` (all when undefined), in the list's order; an unknown id throws. */
export function selectCells(ids: string[] | undefined, all: readonly Cell[] = CELLS): Cell[] {
  if (ids === undefined) return [...all];
  const unknown = ids.filter((id) => !all.some((c) => c.id === id));
  if (unknown.length) throw new Error(`unknown cell(s): ${unknown.join(", ")}`);
  return all.filter((c) => ids.includes(c.id));
}

/** Under memory pressure: the second goal set applies. */
export const underPressure = (c: Cell): boolean => c.budget === "tight";

/** Changes a run may make to every cell (smoke runs, other devices), recorded in its report. */
export interface CellOverrides {
  /** Multiplies every arrival rate (background and steady). */
  rateScale?: number;
  /** Added to every cell's seed (another draw of the same matrix). */
  seedOffset?: number;
  /** Caps each cell's requests (the burst too) and its arrival window. */
  maxRequests?: number;
  durationS?: number;
}

/** The cell as it will run: overrides applied. */
export function applyOverrides(c: Cell, o: CellOverrides): Cell {
  const scale = o.rateScale ?? 1;
  const cap = Math.min(c.maxRequests, o.maxRequests ?? Infinity);
  const arrival: Arrival = c.arrival.kind === "burst"
    ? {
      kind: "burst",
      size: Math.min(c.arrival.size, cap),
      backgroundRate: c.arrival.backgroundRate * scale,
    }
    : { kind: "steady", rate: c.arrival.rate * scale };
  return {
    ...c,
    arrival,
    durationS: Math.min(c.durationS, o.durationS ?? Infinity),
    maxRequests: cap,
    seed: c.seed + (o.seedOffset ?? 0),
  };
}

/** The cell's workload, from its seed: prompt + output of every request fit `maxContext`. */
export function cellWorkload(c: Cell, maxContext: number | undefined): WorkloadRequest[] {
  const a = c.arrival;
  return generateWorkload({
    kind: a.kind === "burst" ? "burst" : "poisson",
    seed: c.seed,
    rate: a.kind === "burst" ? a.backgroundRate : a.rate,
    durationS: c.durationS,
    burstSize: a.kind === "burst" ? a.size : 0,
    burstAtS: 1,
    burstWindowS: 1,
    lengths: PROMPTS[c.prompts].profile,
    readingRate: parseDist(READERS[c.readers].dist),
    sloTtftMs: PROMPTS[c.prompts].sloTtftMs,
    sloTbtMs: READERS[c.readers].sloTbtMs,
    maxRequests: c.maxRequests,
    cancelFraction: 0,
    maxContext,
  });
}

/** One line: "burst of 16 within 1 s ... for 20 s (cap 40); " and describeRequests. */
export function describeCell(c: Cell, budgetMb: number): string {
  const a = c.arrival;
  const arrival = a.kind === "burst"
    ? `burst of ${a.size} within 1 s at t=1 s over Poisson ${a.backgroundRate} req/s`
    : `steady Poisson ${a.rate} req/s`;
  return `${arrival} for ${c.durationS} s (cap ${c.maxRequests}); ${describeRequests(c, budgetMb)}`;
}

/** The cell's requests and budget, without its arrivals: readers, prompts, budget, SLOs, seed. */
export function describeRequests(c: Cell, budgetMb: number): string {
  const r = READERS[c.readers];
  const p = PROMPTS[c.prompts];
  const prompts = c.prompts === "chat" ? "short chat prompts" : "1–2k-token documents";
  return `readers ${r.about} (${r.dist}); ${prompts}; ${c.budget} budget (--gpu-kv-mb ${budgetMb}); ` +
    `SLOs TTFT ${p.sloTtftMs} ms, TBT ${r.sloTbtMs} ms; seed ${c.seed}`;
}
