// The PolicyContext (policy.ts) over the scheduler's pool and slots and the engine's cost model:
// what a policy may read besides the requests. Built once; its numbers are read live.

import type { CostModel } from "../../engine/engine.ts";
import { copyMs as copyCost, predictStepMs } from "../../engine/kv/cost_model.ts";
import type { BlockPool } from "../kv/block_pool.ts";
import type { PolicyContext } from "./policy.ts";

export interface ContextSources {
  /** The runtime's clock (ms). */
  now: () => number;
  maxSlots: number;
  /** Free batch slots now. */
  freeSlots: () => number;
  maxRows: number;
  pool: BlockPool;
  hostTier: boolean;
  /** The engine's cost model as last re-fitted (undefined: none). */
  costModel: () => CostModel | undefined;
  /** Bytes of one KV block (one layer), for predicted copy times (0: none). */
  kvBlockBytes: number;
}

export function policyContext(s: ContextSources): PolicyContext {
  const { pool } = s;
  return {
    now: s.now,
    maxSlots: s.maxSlots,
    get freeSlots() {
      return s.freeSlots();
    },
    maxRows: s.maxRows,
    blockSize: pool.blockSize,
    blocksPerLayer: pool.blocksPerLayer,
    get freeBlocksPerLayer() {
      return pool.availablePerLayer;
    },
    hostTier: s.hostTier,
    stepMs(rows: number, samples: number) {
      const m = s.costModel();
      return m ? predictStepMs(m, { rows, samples }) : null;
    },
    copyMs(direction: "in" | "out", blocksPerLayer: number) {
      const m = s.costModel();
      if (!m || !s.kvBlockBytes) return null;
      const bytes = blocksPerLayer * pool.numLayers * s.kvBlockBytes;
      // One block group per layer, K and V.
      const copies = 2 * pool.numLayers;
      return copyCost(
        m,
        direction === "in"
          ? { rows: 0, bytesIn: bytes, copiesIn: copies }
          : { rows: 0, bytesOut: bytes, copiesOut: copies },
      );
    },
  };
}
