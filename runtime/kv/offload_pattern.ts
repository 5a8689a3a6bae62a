// Which layers an offload distance puts on the host, and what a batch of distances holds on the
// device. The executor's convention: distance d keeps layer L's KV on the host when
// (L + 1) % d == 0 (0-based), so d = 3 offloads layers 2, 5, 8, … and d = 0 keeps every layer.
// Evenly spaced layers make each group of d layers cost the same, which keeps a step predictable.

/** Distance 0: no layer on the host. */
export const KEEP_ALL = 0;

/** Whether distance `d` keeps layer `layer` (0-based) on the host. */
export function isOffloaded(d: number, layer: number): boolean {
  return d > 0 && (layer + 1) % d === 0;
}

/** How many of `numLayers` layers distance `d` keeps on the host. */
export function offloadedCount(d: number, numLayers: number): number {
  return d > 0 ? Math.floor(numLayers / d) : 0;
}

/** The layers (0-based, ascending) distance `d` keeps on the host. */
export function offloadedLayers(d: number, numLayers: number): number[] {
  const out: number[] = [];
  if (d > 0) { for (let l = d - 1; l < numLayers; l += d) out.push(l); }
  return out;
}

/**
 * The distances worth choosing between: one per distinct count of offloaded layers, plus "keep
 * all". Of the distances that offload the same number of layers, the widest stride wins (its
 * first host layer comes latest), e.g. 30 layers → 0, 30, 15, 10, 7, 6, 5, 4, 3, 2, 1.
 */
export function candidateDistances(numLayers: number): number[] {
  const out = [KEEP_ALL];
  const seen = new Set<number>();
  for (let d = numLayers; d >= 1; d--) {
    const n = offloadedCount(d, numLayers);
    if (!seen.has(n)) {
      seen.add(n);
      out.push(d);
    }
  }
  return out;
}

/** One request of a batch, as placement sees it. */
export interface Placed {
  distance: number;
  /** KV blocks one layer of the request holds. */
  blocksPerLayer: number;
}

/** Blocks the batch keeps on the device outside the prefetch region. */
export function residentBlocks(numLayers: number, batch: readonly Placed[]): number {
  let n = 0;
  for (const r of batch) {
    n += (numLayers - offloadedCount(r.distance, numLayers)) * r.blocksPerLayer;
  }
  return n;
}

/** Host blocks each layer brings into the prefetch region (index = layer). */
export function prefetchBlocksByLayer(numLayers: number, batch: readonly Placed[]): number[] {
  const out = new Array<number>(numLayers).fill(0);
  for (const r of batch) {
    for (const l of offloadedLayers(r.distance, numLayers)) out[l] += r.blocksPerLayer;
  }
  return out;
}

/** The prefetch region the batch needs: the most any one layer brings in. */
export function prefetchRegionNeeded(numLayers: number, batch: readonly Placed[]): number {
  return Math.max(0, ...prefetchBlocksByLayer(numLayers, batch));
}

/** Everything the batch needs on the device: resident blocks plus the prefetch region. */
export function deviceBlocks(numLayers: number, batch: readonly Placed[]): number {
  return residentBlocks(numLayers, batch) + prefetchRegionNeeded(numLayers, batch);
}
