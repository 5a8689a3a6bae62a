// How the workload matrix is carried to a GPU profile (sim/matrix_scaling.ts): capacity follows
// the device's step costs and the batch its memory holds, and scaling a cell multiplies its rates.

import { CELLS } from "../../bench/matrix/cells.ts";
import { capacity, type Device, scaleCell, scaledTtftSlo } from "../../sim/matrix_scaling.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

/** A step costs 10 ms whatever its rows (the GPU premise) or 1 ms per row (a CPU's). */
const flat: Device = { stepMs: () => 10, maxSlots: 256, maxRows: 100, kvTokens: 1000 };
const perRow: Device = { ...flat, stepMs: (p) => p.rows.length };

Deno.test("capacity: a flat step cost serves as many requests as memory holds, a per-row one does not gain from batching", () => {
  const req = { prompt: 150, output: 50 };
  // 1000 KV tokens hold 5 requests of 200; prefill is 2 chunks of 10 ms, decode 50 steps of 10 ms.
  const f = capacity(flat, req);
  assertEquals(f.batch, 5);
  assert(Math.abs(f.perS - 5 / (5 * 20 + 500) * 1000) < 1e-9);
  const doubled = capacity({ ...flat, kvTokens: 2000 }, req);
  assert(doubled.perS > 1.6 * f.perS, "twice the memory: nearly twice the capacity");
  const r = capacity(perRow, req), r2 = capacity({ ...perRow, kvTokens: 2000 }, req);
  assert(Math.abs(r2.perS - r.perS) < 1e-9, "per-row costs: batching gains nothing");
});

Deno.test("scaleCell multiplies arrivals, the burst and the cap; TTFT SLOs floor at 1.3 s", () => {
  const burst = CELLS.find((c) => c.arrival.kind === "burst")!;
  const s = scaleCell(burst, 10);
  assert(s.arrival.kind === "burst" && burst.arrival.kind === "burst");
  assertEquals(s.arrival.size, burst.arrival.size * 10);
  assertEquals(s.maxRequests, burst.maxRequests * 10);
  assertEquals(s.seed, burst.seed);
  assertEquals(scaledTtftSlo(15_000, 5), 3000);
  assertEquals(scaledTtftSlo(15_000, 50), 1300);
});
