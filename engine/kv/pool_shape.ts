// The device KV pool's shape, which the engine (its buffers and block table) and the runtime (its
// bookkeeping of who holds which block) must agree on: the blocks of each arena, the arena each
// layer draws from, the block size, and the table entry that names no block. One layer's KV lives
// in one arena, so "how many blocks could every layer have at once" is the same sum everywhere:
// each arena's blocks shared by the layers it serves, the least over the arenas.

/** Table entry for a position whose KV is not on the device (on the host, dropped, or unwritten). */
export const NOT_RESIDENT = 0xffffffff;

export interface PoolShape {
  /** Blocks in each arena. */
  blocksPerArena: readonly number[];
  /** The arena each layer draws its blocks from. */
  layerArena: readonly number[];
  /** Tokens per block: the block size the KV layout uses. */
  blockSize: number;
}

/** How many layers each of `arenas` arenas serves. */
export function layersPerArena(layerArena: readonly number[], arenas: number): number[] {
  const layers = new Array(arenas).fill(0);
  for (const a of layerArena) layers[a]++;
  return layers;
}

/**
 * Blocks every layer could hold at once when arena a has `blocks[a]` of them (default: the
 * whole arena): the least over the arenas of their blocks shared among their layers. An arena no
 * layer uses bounds nothing.
 */
export function blocksPerLayer(
  shape: Omit<PoolShape, "blockSize">,
  blocks: readonly number[] = shape.blocksPerArena,
): number {
  const layers = layersPerArena(shape.layerArena, shape.blocksPerArena.length);
  return Math.min(...blocks.flatMap((n, a) => layers[a] > 0 ? [Math.floor(n / layers[a])] : []));
}
