// How a cell of the workload matrix (bench/matrix/cells.ts), written for the demo model on this
// machine, is carried to a GPU profile so that it loads that GPU as it loads this machine.
//
// Capacity: the requests/s a device finishes of a cell's mean request (its workload's mean prompt
// P and output O) when it serves B of them together: B prompts prefilled in chunks of its row
// limit, then O decode steps of B rows at the mean context P + O/2, each step's time from the
// device's own cost model. B is as many as its slots and its KV memory hold (⌊KV / (P + O)⌋): on
// a GPU a decode step of 1 or 200 rows costs about the same, so memory sets its capacity.
//
// Scale = GPU capacity ÷ demo capacity, per cell. Everything that is a rate is multiplied by it:
// steady and background arrivals, the burst's size (a burst is requests per second too) and the
// request cap, so a cell keeps its duration and its load relative to the device. Documents' TTFT
// SLO (15 s: the demo's slow prefill) is divided by it, but not below chat's 1.3 s (a human's
// threshold, as are the TBT SLOs, which follow the readers and stay).
//
// Budgets: tight is the demo's tight budget (1,984 tokens) times the scale, since the working set
// in flight grows with the arrival rate, but never more than the profile's real KV memory; ample
// holds every request of the cell at once, as the demo's 64 MB does.

import type { StepPlan } from "../engine/engine.ts";
import type { Cell } from "../bench/matrix/cells.ts";
import type { WorkloadRequest } from "../bench/serve/workload.ts";

/** A device as the capacity estimate reads it. */
export interface Device {
  /** One step's time, ms. */
  stepMs: (plan: StepPlan) => number;
  maxSlots: number;
  /** Token rows per step (the prefill chunk). */
  maxRows: number;
  /** KV tokens the device holds. */
  kvTokens: number;
}

/** A plan of `rows`, the last `samples` of them sampled (all the cost models read). */
export function planOf(rows: { slot: number; pos: number }[], samples: number): StepPlan {
  return {
    rows: rows.map((r) => ({ ...r, token: null })),
    samples: Array.from({ length: samples }, (_, i) => ({ row: rows.length - samples + i })),
    sampling: [],
    tables: [],
  } as unknown as StepPlan;
}

/** The workload's mean prompt and output, in whole tokens. */
export function meanRequest(w: readonly WorkloadRequest[]): { prompt: number; output: number } {
  const mean = (f: (r: WorkloadRequest) => number) =>
    Math.round(w.reduce((s, r) => s + f(r), 0) / w.length);
  return { prompt: mean((r) => r.promptLen ?? 1), output: mean((r) => r.outputLen) };
}

/** Requests/s `d` finishes of the mean request (see the header), and the batch it assumed. */
export function capacity(
  d: Device,
  req: { prompt: number; output: number },
): { perS: number; batch: number } {
  const batch = Math.max(
    1,
    Math.min(d.maxSlots, Math.floor(d.kvTokens / (req.prompt + req.output))),
  );
  let prefillMs = 0;
  for (let start = 0; start < req.prompt; start += d.maxRows) {
    const end = Math.min(req.prompt, start + d.maxRows);
    const rows = Array.from({ length: end - start }, (_, i) => ({ slot: 0, pos: start + i }));
    prefillMs += d.stepMs(planOf(rows, end === req.prompt ? 1 : 0));
  }
  const ctx = req.prompt + Math.floor(req.output / 2);
  const decode = Array.from({ length: batch }, (_, slot) => ({ slot, pos: ctx }));
  const decodeMs = d.stepMs(planOf(decode, batch)) * req.output;
  return { perS: batch / (batch * prefillMs + decodeMs) * 1000, batch };
}

/** `c` with every rate (arrivals, burst size, request cap) multiplied by `scale`. */
export function scaleCell(c: Cell, scale: number): Cell {
  const a = c.arrival;
  return {
    ...c,
    arrival: a.kind === "burst"
      ? {
        kind: "burst",
        size: Math.round(a.size * scale),
        backgroundRate: a.backgroundRate * scale,
      }
      : { kind: "steady", rate: a.rate * scale },
    maxRequests: Math.round(c.maxRequests * scale),
  };
}

/** Chat's TTFT SLO: the floor of every scaled TTFT SLO. */
const HUMAN_TTFT_MS = 1300;

/** A TTFT SLO of the demo's divided by the scale, but not below a human's 1.3 s. */
export function scaledTtftSlo(demoMs: number, scale: number): number {
  return Math.max(HUMAN_TTFT_MS, Math.round(demoMs / scale));
}

/** KV tokens of every request at once (prompt and output, each rounded up to whole blocks). */
export function workloadTokens(w: readonly WorkloadRequest[], blockSize: number): number {
  return w.reduce(
    (s, r) => s + Math.ceil(((r.promptLen ?? 1) + r.outputLen) / blockSize) * blockSize,
    0,
  );
}
