// Block pools for tests of the KV bookkeeping (runtime/kv/).

import { BlockPool } from "../../runtime/kv/block_pool.ts";

/** A pool of one arena serving `numLayers` layers. */
export function onePool(numLayers: number, blocks: number, blockSize = 16): BlockPool {
  return new BlockPool({
    blocksPerArena: [blocks],
    layerArena: new Array(numLayers).fill(0),
    blockSize,
  });
}
