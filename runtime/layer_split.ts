// LayerKV's two decisions for layer-wise prefill (`--layerwise-prefill`), as pure functions:
//
//   layerSplit: how many of a prefill's layers keep their KV on the device. The rest go to the
//     host tier as the prefill writes them, so a queued prefill needs device blocks for only some
//     of its layers and need not wait for a whole request's worth (§3.1.1, Eq. 4 against Eq. 3).
//   forecastLowest: the Eq. 5 resource forecast. Stage by stage the free blocks move by what
//     running requests release when they finish less what their growth takes; its lowest point
//     is what admission may spend without overcommitting the device.
//
// Choices the paper leaves open:
//   - the paper keeps at least the layers whose copies would not hide under the prefill's compute,
//     keeps more while memory allows (retained layers act as free prefetching, and keeping them
//     spares decode steps their reloads, §5.2.3), and offloads retained layers when the Eq. 5
//     forecast runs short (§3.1.1). Here that choice is made once, at admission: the rule keeps
//     as many layers as the forecast leaves room for, offloading more only down to the count
//     whose copies still hide. A prefill that would need its copies exposed to fit waits.
//   - without a cost model nothing can be said about hiding: memory alone decides.
//   - the forecast knows each request's max_tokens, not a predicted length: it counts growth to
//     that bound (a request may end sooner, so it errs towards keeping blocks free), and a stage
//     is one step (one token per decoding request).

/** What layerSplit weighs for one prefill. */
export interface SplitInput {
  numLayers: number;
  /**
   * The numbers of offloaded layers the offloader can express, ascending, 0 first (its distances:
   * runtime/kv/offload_pattern.ts).
   */
  offloadChoices: readonly number[];
  /** Device blocks a layer kept on the device holds at admission (the whole prompt). */
  residentBlocks: number;
  /** Device blocks an offloaded layer holds at admission (its first chunk). */
  offloadedBlocks: number;
  /** Device blocks free now, over all layers. */
  freeBlocks: number;
  /** Blocks the running requests' growth will take first (forecastReserve), over all layers. */
  reservedBlocks: number;
  /** Predicted ms of the prefill's compute (Eq. 3's T_prefill); null without a cost model. */
  prefillMs: number | null;
  /** Predicted ms of copying `layers` layers' prompt KV out (Eq. 4's T_offload); null: no model. */
  offloadMs(layers: number): number | null;
}

/**
 * The number of layers whose KV stays on the device for this prefill, or null when no split
 * fits now (the prefill waits). numLayers means the whole prompt on the device.
 */
export function layerSplit(s: SplitInput): number | null {
  const room = s.freeBlocks - s.reservedBlocks;
  for (const offloaded of s.offloadChoices) {
    const kept = s.numLayers - offloaded;
    const blocks = kept * s.residentBlocks + offloaded * s.offloadedBlocks;
    if (blocks > room) continue; // Eq. 5: the forecast must still cover it
    if (offloaded === 0) return kept;
    // §3.1.1: the offloaded layers' copies must hide under the prefill's compute (T_offload ≤
    // T_prefill); more layers offloaded only cost more copy time, so the first miss ends it.
    const copy = s.offloadMs(offloaded);
    if (s.prefillMs !== null && copy !== null && copy > s.prefillMs) return null;
    return kept;
  }
  return null;
}

/** One running request, as the forecast sees it. */
export interface Grower {
  /** Device blocks it holds now, over all layers. */
  held: number;
  /** KV positions written (or given blocks) so far. */
  positions: number;
  /** Positions still to come at most (prefill left plus tokens still to sample). */
  left: number;
  /** Device blocks one more block of positions costs it (its layers on the device). */
  blocksPerBlock: number;
  /** Device blocks it takes at the first stage (offloaded layers it will bring back); default 0. */
  due?: number;
}

/**
 * Eq. 5 over `horizon` stages (one step each): Avail(t+1) = Avail(t) + Released(t) −
 * Allocated(t), from Avail(0) = `free`. Each stage every request writes one more position,
 * taking blocksPerBlock blocks when that position starts a block (and, at the first, its `due`
 * blocks); a request releases everything it holds the stage after its last position. Returns the lowest Avail over the horizon (free
 * itself when nothing grows): what admitting a new prefill may take now without running the
 * device dry before the running requests finish.
 */
export function forecastLowest(
  free: number,
  running: readonly Grower[],
  blockSize: number,
  horizon: number,
): number {
  let avail = free, lowest = free;
  const last = Math.min(
    horizon,
    Math.max(0, ...running.map((r) => r.left + 1), ...running.map((r) => r.due ? 1 : 0)),
  );
  const held = running.map((r) => r.held);
  for (let t = 1; t <= last; t++) {
    running.forEach((r, i) => {
      if (t === 1 && r.due) {
        avail -= r.due;
        held[i] += r.due;
      }
      if (t <= r.left) {
        // Its position positions + t - 1 starts a block: one more block per layer it keeps.
        if ((r.positions + t - 1) % blockSize === 0) {
          avail -= r.blocksPerBlock;
          held[i] += r.blocksPerBlock;
        }
      } else if (t === r.left + 1) avail += held[i]; // finished: reaped at the next boundary
    });
    lowest = Math.min(lowest, avail);
  }
  return lowest;
}

/** Blocks admission keeps back for the running requests' growth: how far Eq. 5 dips below free. */
export function forecastReserve(
  free: number,
  running: readonly Grower[],
  blockSize: number,
  horizon: number,
): number {
  return Math.max(0, free - forecastLowest(free, running, blockSize, horizon));
}
