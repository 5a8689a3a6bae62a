// The fake engine on a profiled GPU: the runtime sees the KV geometry of the paper's model and
// budget (its layers, 16-token blocks, the device and host tiers the setup leaves) and the cost
// model it would profile at start-up, and each step takes what gpu_step_cost.ts says the GPU would
// take for it. Tokens are the fake engine's (cheap reads: only each sample's own position).

import type { SampleRecord, StepPlan } from "../engine/engine.ts";
import { FakeEngine } from "./fake_engine.ts";
import type { SimProfile } from "./gpu_profiles.ts";
import {
  blockBytes,
  blocksFor,
  gpuStepMs,
  profiledCostModel,
  SIM_BLOCK_SIZE,
} from "./gpu_step_cost.ts";

export interface GpuEngineLimits {
  /** Requests in flight at once (vLLM's max_num_seqs; default 256). */
  maxSlots?: number;
  /** Token rows per step (a prefill chunk plus decode rows; default 2048). */
  maxRows?: number;
  /** Longest context in tokens (default 4096). */
  maxContext?: number;
  /** Host KV blocks (default: the profile's host tier; 0 for none). */
  hostBlocks?: number;
  /** One copy call per block, as vLLM v0 swaps (default: one per run of blocks; gpu_step_cost.ts). */
  copyPerBlock?: boolean;
  /** µs a copy call costs, in place of the profile's (default: the profile's). */
  copyCallUs?: number;
  /** A step's copies between the tiers beside its kernels, not before them (CopyIssue.async). */
  asyncCopies?: boolean;
}

export class GpuEngine extends FakeEngine {
  private plan: StepPlan | null = null;
  /** The fake clock's timers count whole ms: the fractions carried to the next step. */
  private carriedMs = 0;

  constructor(readonly profile: SimProfile, private readonly limits: GpuEngineLimits = {}) {
    const layers = profile.model.layers;
    const maxContext = limits.maxContext ?? 4096;
    super(
      {
        numLayers: layers,
        blockSize: SIM_BLOCK_SIZE,
        blocksPerArena: [blocksFor(profile, profile.kvTokens)],
        maxSlots: limits.maxSlots ?? 256,
        maxRows: limits.maxRows ?? 2048,
        maxBlocksPerSeq: Math.ceil(maxContext / SIM_BLOCK_SIZE),
        ringSize: 1,
        hostBlocks: limits.hostBlocks ?? blocksFor(profile, profile.hostKvTokens),
        costModel: profiledCostModel(profile),
        kvBlockBytes: blockBytes(profile),
        vocabSize: 32000,
        readsWholeContext: false,
      },
      () => new Promise((r) => setTimeout(r, this.takeStepMs())),
    );
  }

  override step(plan: StepPlan): Promise<SampleRecord[]> {
    this.plan = plan;
    return super.step(plan);
  }

  private takeStepMs(): number {
    const ms = gpuStepMs(this.profile, this.plan!, {
      perBlock: this.limits.copyPerBlock,
      callUs: this.limits.copyCallUs,
      async: this.limits.asyncCopies,
    });
    const whole = Math.floor(ms + this.carriedMs);
    this.carriedMs += ms - whole;
    return whole;
  }
}
