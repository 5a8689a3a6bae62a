// The capacity sweep's search: the highest Poisson arrival rate at which a configuration keeps at
// least `target` SLO goodput, by bisection in log space between two bounds. It checks the bounds
// first (below the lower one, or still fine at the upper one, the answer is a bound), then halves
// the ratio hi/lo `steps` times: the answer is the highest rate measured to pass, within a factor
// of (hi/lo)^(1/2^steps) of the true one when goodput falls with the rate. Every rate it measures
// lies between the passing and the failing ones before it, so noise cannot show as a pass above a
// failure: it moves the bracket instead (one run per rate; a repeated sweep shows it). Pure over
// `measure`.

export interface SearchOptions {
  lo: number;
  hi: number;
  /** Bisection steps after the two bounds. */
  steps: number;
  /** SLO goodput a rate must keep (0.9). */
  target: number;
}

export interface Point {
  rate: number;
  /** null: the run could not be measured (counts as a miss). */
  goodput: number | null;
  passed: boolean;
}

export interface Capacity {
  /** The highest rate measured to pass; null when even the lower bound missed. */
  rate: number | null;
  /** bracketed: below the lowest failing rate; below: under `lo`; at-least: `hi` passed. */
  status: "bracketed" | "below" | "at-least";
  /** Every measurement, in the order taken. */
  points: Point[];
}

/** Rates rounded to 4 significant digits, so they read well and repeat exactly. */
export function roundRate(r: number): number {
  return Number(r.toPrecision(4));
}

export async function searchCapacity(
  measure: (rate: number) => Promise<number | null>,
  o: SearchOptions,
): Promise<Capacity> {
  if (!(o.lo > 0 && o.hi > o.lo)) throw new Error(`capacity: need 0 < lo < hi (${o.lo}, ${o.hi})`);
  const points: Point[] = [];
  const at = async (rate: number) => {
    const goodput = await measure(rate);
    const passed = goodput !== null && goodput >= o.target;
    points.push({ rate, goodput, passed });
    return passed;
  };
  const done = (rate: number | null, status: Capacity["status"]) => ({ rate, status, points });
  let lo = roundRate(o.lo);
  let hi = roundRate(o.hi);
  if (!(await at(lo))) return done(null, "below");
  if (await at(hi)) return done(hi, "at-least");
  for (let i = 0; i < o.steps; i++) {
    const mid = roundRate(Math.sqrt(lo * hi));
    if (mid <= lo || mid >= hi) break; // rounding: nothing left between them
    if (await at(mid)) lo = mid;
    else hi = mid;
  }
  return done(lo, "bracketed");
}

/** Issue 19's capacity goal: the candidate sustains this multiple of the baseline's rate. */
export const CAPACITY_GOAL = 1.3;

export interface CapacityRatio {
  /** candidate ÷ baseline, null when either has no passing rate. */
  ratio: number | null;
  /** True when the ratio is only a lower bound (the candidate passed at the upper bound). */
  lowerBound: boolean;
  /** null: cannot be judged from these bounds (see `why`). */
  met: boolean | null;
  why?: string;
}

export function capacityRatio(candidate: Capacity, baseline: Capacity): CapacityRatio {
  if (baseline.status === "at-least") {
    return {
      ratio: null,
      lowerBound: false,
      met: null,
      why: "the baseline passed at the upper bound: raise --rate-hi",
    };
  }
  if (baseline.rate === null) {
    return {
      ratio: null,
      lowerBound: false,
      met: null,
      why: "the baseline missed at the lower bound: lower --rate-lo",
    };
  }
  if (candidate.rate === null) {
    return {
      ratio: null,
      lowerBound: false,
      met: false,
      why: "the candidate missed at the lower bound, where the baseline passed",
    };
  }
  const ratio = candidate.rate / baseline.rate;
  const lowerBound = candidate.status === "at-least";
  if (lowerBound && ratio < CAPACITY_GOAL) {
    return {
      ratio,
      lowerBound,
      met: null,
      why: "the candidate passed at the upper bound: raise --rate-hi",
    };
  }
  return { ratio, lowerBound, met: ratio >= CAPACITY_GOAL };
}
