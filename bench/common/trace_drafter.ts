// A drafter of controlled acceptance, for benchmarks and tests of speculative decoding: random
// test models accept almost none of a real drafter's tokens, so this one proposes the target's own
// tokens, recorded in an earlier run of the same requests, each kept with probability p and
// otherwise replaced by another id. At p = 1 every draft is accepted (greedy or seeded, the target
// says what it said before); at p = 0 none is.

import type { Drafter } from "../../runtime/bench_api.ts";

export class TraceDrafter implements Drafter {
  private readonly traces = new Map<string, readonly number[]>();
  private state: number;

  /** `p`: the chance each draft is the recorded token; `seed` fixes which are not. */
  constructor(private readonly p: number, private readonly vocab: number, seed = 1) {
    this.state = seed >>> 0;
  }

  /** The tokens a request with prompt `ids` generated (its first run's). */
  record(ids: readonly number[], output: readonly number[]): void {
    this.traces.set(ids.join(","), [...output]);
  }

  propose(req: Parameters<Drafter["propose"]>[0], k: number): number[] {
    const trace = this.traces.get(req.spec.ids.join(","));
    if (!trace) return [];
    const next = req.generated.length; // the decode row samples trace[next]: the first draft's
    return trace.slice(next, next + k).map((t) =>
      this.random() < this.p
        ? t
        : (t + 1 + Math.floor(this.random() * (this.vocab - 1))) % this.vocab
    );
  }

  /** mulberry32. */
  private random(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}
