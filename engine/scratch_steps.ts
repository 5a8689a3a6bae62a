// Steps on dummy rows, run while no request holds KV: the warm-up at load, which compiles every
// pipeline a request can need, and the cost profile's steps (kv/cost_profile.ts's ProfileTarget).
// Their rows write block 0 of every layer (scratch); the tables are pointed back at nothing after.

import type { Gpu } from "./gpu/device.ts";
import type { SampleRecord } from "./gpu/kernels/sample.ts";
import type { DeviceKv, TableWrite } from "./kv/device_kv.ts";
import { NOT_RESIDENT } from "./kv/pool_shape.ts";
import type { ProfileTarget } from "./kv/cost_profile.ts";
import type { ForwardPass } from "./forward/pass.ts";
import type { EngineInfo, StepPlan } from "./step_engine.ts";

/** The parts of a loaded engine that dummy steps drive. */
export interface ScratchParts {
  gpu: Gpu;
  info: EngineInfo;
  kv: DeviceKv;
  forward: ForwardPass;
  /** The engine's own step (checks and all). */
  step(plan: StepPlan): Promise<SampleRecord[]>;
}

const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

/**
 * Runs a step of each size in forward.variantRowCounts() (every row tile of every matrix, and
 * for the quantized ones x in a uniform and in storage), then steps with the full sampler, with
 * and without top logprobs, through the logit controls (a bias and a penalty: both passes), and a
 * decode group where the engine runs them. So every pipeline a request can need is built, and on
 * llvmpipe JIT-compiled, before the server says it is ready, rather than by the first client
 * (on a cold GL cache the sampler alone took minutes). Slot 0's table points at block 0
 * (scratch) meanwhile; the controls' slot state is reset to greedy after.
 */
export async function warmUp(e: ScratchParts): Promise<void> {
  const { numLayers, blockSize, maxSlots, vocabSize, maxBlocksPerSeq } = e.info;
  // Every row is slot 0's, so no more rows than one slot's table holds positions for (a count
  // past that, if any, is compiled by the first step that needs it).
  const counts = e.forward.variantRowCounts().filter((n) => n <= maxBlocksPerSeq * blockSize);
  const blocks = new Array(Math.ceil(Math.max(...counts) / blockSize)).fill(0);
  const tables: TableWrite[] = [];
  for (let layer = 0; layer < numLayers; layer++) {
    tables.push({ slot: 0, layer, first: 0, blocks });
  }
  const rowsOf = (n: number) =>
    Array.from({ length: n }, (_, pos) => ({ slot: 0, pos, token: pos % vocabSize }));
  const lastRows = (n: number) =>
    Array.from({ length: Math.min(n, maxSlots) }, (_, i) => ({ row: n - 1 - i })).reverse();
  let sampling = [{ slot: 0, params: GREEDY }];
  for (const n of counts) {
    await e.step({
      tables,
      sampling,
      rows: rowsOf(n),
      samples: lastRows(n),
      wantTopLogprobs: false,
    });
    sampling = [];
  }
  const sampled = {
    temperature: 1,
    topK: 0,
    topP: 0.9,
    seed: 1,
    logitBias: [[0, 1]] as [number, number][],
    repetitionPenalty: 1.1,
  };
  for (const wantTopLogprobs of [true, false]) {
    await e.step({
      tables: [],
      sampling: [{ slot: 0, params: sampled }],
      penaltySeeds: [{ slot: 0, prompt: [0], generated: [] }],
      rows: rowsOf(1),
      samples: [{ row: 0 }],
      wantTopLogprobs,
    });
  }
  if (e.info.maxDecodeSteps > 1) {
    await e.step({
      tables: [],
      sampling: [],
      rows: [{ slot: 0, pos: 0, token: null }],
      samples: [{ row: 0 }],
      wantTopLogprobs: false,
      group: { steps: 2, budgets: [2], stopIds: [[]] },
    });
  }
  e.forward.setSampling(0, GREEDY);
  clearTables(e, 1);
}

/** Points every table entry of slots 0..slots-1 at nothing. */
export function clearTables(e: ScratchParts, slots: number): void {
  const clear = new Array(e.info.maxBlocksPerSeq).fill(NOT_RESIDENT);
  for (let slot = 0; slot < slots; slot++) {
    for (let layer = 0; layer < e.info.numLayers; layer++) {
      e.kv.writeTable(slot, layer, clear);
    }
  }
}

/**
 * The profile's view of an engine: steps of n dummy rows, slot i % maxSlots each, every slot's
 * table pointed at block 0 and its sampling greedy (clearTables(e, maxSlots) undoes the tables).
 */
export function profileTarget(e: ScratchParts): ProfileTarget {
  const { numLayers, maxRows, maxSlots, ringSize, vocabSize, blockSize } = e.info;
  const entries = Math.ceil(Math.ceil(maxRows / maxSlots) / blockSize);
  for (let slot = 0; slot < maxSlots; slot++) {
    for (let layer = 0; layer < numLayers; layer++) {
      e.kv.writeTable(slot, layer, new Array(entries).fill(0));
    }
    e.forward.setSampling(slot, GREEDY);
  }
  return {
    gpu: e.gpu,
    numLayers,
    maxRows,
    maxSlots,
    ringSize,
    step: (n, samples, prelude) => {
      const rows = Array.from({ length: n }, (_, i) => ({
        slot: i % maxSlots,
        pos: Math.floor(i / maxSlots),
        token: i % vocabSize,
      }));
      const plan = {
        rows,
        samples: rows.slice(0, samples).map((_, row) => ({ row })),
        wantTopLogprobs: false,
      };
      return e.forward.submit(plan, prelude);
    },
  };
}
