// LayerKV's decisions for layer-wise prefill (`--layerwise-prefill`), as pure functions:
//
//   layerSplit: how many of a prefill's layers keep their KV on the device (§3.1.1): the fewest,
//     x, whose offloaded L − x layers' copies still hide under the prefill's compute (Eq. 4's
//     T_offload ≤ Eq. 3's T_prefill). The rest go to the host tier as the prefill writes them, so
//     a queued prefill needs device blocks for only x layers and need not wait for a whole
//     request's worth. When even that does not fit the free blocks, it waits.
//   forecastLowest: the Eq. 5 resource forecast. Stage by stage the free blocks move by what
//     running requests release when they finish less what their growth takes.
//   relieve: when that forecast runs short, the kept layers of the most recently admitted
//     requests go to the host too, x/2 first, then all x (§3.1.1, after Eq. 5).
//
// Choices the paper leaves open:
//   - without a cost model nothing can be said about hiding: memory alone decides, keeping as
//     many layers as fit (the paper's "free prefetching").
//   - the forecast knows each request's max_tokens, not a predicted length: it counts growth to
//     that bound (a request may end sooner, so it errs towards offloading), and a stage is one
//     step (one token per decoding request).
//   - the "preset threshold" below which the forecast is short: the device blocks of the split
//     the queue's head was last refused (0 when none waits), so the running requests' kept layers
//     make way for a queued prefill as they would for their own growth.

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
  /** Predicted ms of the prefill's compute (Eq. 3's T_prefill); null without a cost model. */
  prefillMs: number | null;
  /** Predicted ms of copying `layers` layers' prompt KV out (Eq. 4's T_offload); null: no model. */
  offloadMs(layers: number): number | null;
}

/** A split: the layers kept on the device (null: it waits) and the device blocks it takes. */
export interface Split {
  kept: number | null;
  blocks: number;
}

/**
 * The number of layers whose KV stays on the device for this prefill (numLayers: the whole
 * prompt), or kept null when no split fits now (the prefill waits); `blocks`: what the split
 * chosen (or, waiting, the one it waits for) takes of the device.
 */
export function layerSplit(s: SplitInput): Split {
  const blocksOf = (offloaded: number) =>
    (s.numLayers - offloaded) * s.residentBlocks + offloaded * s.offloadedBlocks;
  const fits = (offloaded: number) => blocksOf(offloaded) <= s.freeBlocks;
  const noModel = s.prefillMs === null || s.offloadMs(s.offloadChoices.at(-1)!) === null;
  if (noModel) {
    // Memory alone: the most layers kept that fit.
    const offloaded = s.offloadChoices.find(fits);
    return offloaded === undefined
      ? { kept: null, blocks: blocksOf(s.offloadChoices.at(-1)!) }
      : { kept: s.numLayers - offloaded, blocks: blocksOf(offloaded) };
  }
  // §3.1.1: x is the fewest layers kept with T_offload(L − x) ≤ T_prefill (Eq. 4 ≤ Eq. 3). More
  // layers offloaded only cost more copy time, so the hidden choices are a prefix of the
  // ascending list; the last of them keeps the fewest layers and takes the fewest blocks.
  let offloaded = 0;
  for (const n of s.offloadChoices) {
    if (s.offloadMs(n)! <= s.prefillMs!) offloaded = n;
    else break;
  }
  const blocks = blocksOf(offloaded);
  return { kept: fits(offloaded) ? s.numLayers - offloaded : null, blocks };
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
}

/**
 * Eq. 5 over `horizon` stages (one step each): Avail(t+1) = Avail(t) + Released(t) −
 * Allocated(t), from Avail(0) = `free`. Each stage every request writes one more position,
 * taking blocksPerBlock blocks when that position starts a block; a request releases everything
 * it holds the stage after its last position. Returns the lowest Avail over the horizon (free
 * itself when nothing grows).
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
    Math.max(0, ...running.map((r) => r.left + 1)),
  );
  const held = running.map((r) => r.held);
  for (let t = 1; t <= last; t++) {
    running.forEach((r, i) => {
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

/** A running request whose kept layers may go to the host, as relieve sees it. */
export interface Keeper {
  /** Layers it keeps on the device now. */
  kept: number;
  /** Device blocks one of its kept layers gives back once offloaded (its full blocks). */
  blocksPerLayer: number;
}

/**
 * After Eq. 5: the device is `short` blocks short of the threshold, so the kept layers of the
 * most recently admitted requests go to the host, x/2 of a request's x first (the newest first),
 * then, if that is not enough, all of them (§3.1.1). `keepers` newest first; returns each one's
 * kept layers afterwards (unchanged when `short` ≤ 0).
 */
export function relieve(keepers: readonly Keeper[], short: number): number[] {
  const kept = keepers.map((k) => k.kept);
  let freed = 0;
  for (const target of [(x: number) => Math.floor(x / 2), () => 0]) {
    for (let i = 0; i < keepers.length && freed < short; i++) {
      const to = target(kept[i]);
      if (to >= kept[i] || keepers[i].blocksPerLayer === 0) continue;
      freed += (kept[i] - to) * keepers[i].blocksPerLayer;
      kept[i] = to;
    }
  }
  return kept;
}
