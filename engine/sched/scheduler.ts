// FCFS continuous batching: requests join and leave the batch at step boundaries, prefill runs in
// chunks beside the running decodes, and a request waits (in arrival order) until its KV fits.
//
// This is the baseline later policies are measured against: a request reserves KV for its
// prompt plus max_tokens when admitted, so a running request never runs out of blocks.

import type { BlockPool } from "../kv/block_pool.ts";
import type { DeviceKv } from "../kv/device_kv.ts";
import type { SampleRecord, SamplingParams, StepPlan, StepRow } from "../model/forward.ts";
import type { Sequence } from "./sequence.ts";

export interface SchedulerLimits {
  maxSlots: number;
  /** Most token rows per step; bounds how long one prefill chunk can stall the running decodes. */
  maxRows: number;
  numLayers: number;
}

/** A built step: the plan for the GPU and, per sample row, the sequence it belongs to. */
export interface BuiltStep {
  plan: StepPlan;
  owners: Sequence[];
}

export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  private readonly freeSlots: number[];

  constructor(
    private pool: BlockPool,
    private kv: DeviceKv,
    private limits: SchedulerLimits,
    private setSampling: (slot: number, p: SamplingParams) => void,
  ) {
    this.freeSlots = Array.from({ length: limits.maxSlots }, (_, i) => limits.maxSlots - 1 - i);
  }

  enqueue(seq: Sequence): void {
    this.waiting.push(seq);
  }

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Frees everything held by finished or cancelled sequences. Called at step boundaries only. */
  reap(): void {
    for (const seq of this.waiting.filter((s) => s.cancelled || s.finish)) {
      seq.end("cancelled");
      this.waiting.splice(this.waiting.indexOf(seq), 1);
    }
    for (const seq of [...this.running]) {
      if (seq.cancelled) seq.end("cancelled");
      if (seq.state !== "finished") continue;
      this.pool.release(seq.id);
      this.kv.clearSlot(seq.slot);
      this.freeSlots.push(seq.slot);
      seq.slot = -1;
      this.running.splice(this.running.indexOf(seq), 1);
    }
  }

  /** Admits waiting sequences in arrival order while a slot and their full KV reservation fit. */
  admit(): void {
    while (this.waiting.length > 0 && this.freeSlots.length > 0) {
      const seq = this.waiting[0];
      if (!this.pool.canAllocate(this.pool.blocksFor(seq.reservedTokens))) break; // FCFS: no overtaking
      for (let layer = 0; layer < this.limits.numLayers; layer++) {
        if (!this.pool.grow(seq.id, layer, seq.reservedTokens)) {
          this.pool.release(seq.id);
          throw new Error("block pool refused an allocation it said would fit");
        }
      }
      this.waiting.shift();
      seq.slot = this.freeSlots.pop()!;
      seq.state = "running";
      for (let layer = 0; layer < this.limits.numLayers; layer++) {
        this.kv.writeTable(seq.slot, layer, this.pool.table(seq.id, layer));
      }
      this.setSampling(seq.slot, seq.req.sampling);
      this.running.push(seq);
    }
  }

  /** Decode rows for every generating sequence, then prefill chunks in admission order. */
  buildStep(): BuiltStep | null {
    const rows: StepRow[] = [];
    const samples: { row: number }[] = [];
    const owners: Sequence[] = [];
    let wantTopLogprobs = false;
    const sample = (seq: Sequence) => {
      samples.push({ row: rows.length - 1 });
      owners.push(seq);
      seq.issued++;
      wantTopLogprobs ||= (seq.req.topLogprobs ?? 0) > 0;
    };

    for (const seq of this.running) {
      if (seq.state !== "running" || !seq.prefillDone || seq.issued >= seq.req.maxTokens) continue;
      rows.push({ slot: seq.slot, pos: seq.promptLength + seq.issued - 1, token: null });
      sample(seq);
    }
    for (const seq of this.running) {
      if (rows.length >= this.limits.maxRows) break;
      if (seq.state !== "running" || seq.prefillDone) continue;
      const n = Math.min(seq.promptLength - seq.prefilled, this.limits.maxRows - rows.length);
      for (let i = 0; i < n; i++) {
        const pos = seq.prefilled + i;
        rows.push({ slot: seq.slot, pos, token: seq.req.ids[pos] });
      }
      seq.prefilled += n;
      if (seq.prefillDone && seq.req.maxTokens > 0) sample(seq);
    }
    if (rows.length === 0) return null;
    return { plan: { rows, samples, wantTopLogprobs }, owners };
  }

  /** Delivers a step's sampled tokens to their sequences; tokens after a finish are dropped. */
  deliver(owners: Sequence[], records: SampleRecord[]): void {
    records.forEach((rec, i) => {
      const seq = owners[i];
      if (seq.state === "finished") return;
      if (seq.stopIds.has(rec.id)) {
        seq.end("stop");
        return;
      }
      seq.received++;
      const k = seq.req.topLogprobs ?? 0;
      seq.events.push({ id: rec.id, logprob: rec.logprob, top: rec.top.slice(0, k) });
      if (seq.received >= seq.req.maxTokens) seq.end("length");
    });
  }

  /** A max_tokens = 0 request is finished once its prompt is prefilled: it never samples. */
  finishZeroTokenPrefills(): void {
    for (const seq of this.running) {
      if (seq.state === "running" && seq.prefillDone && seq.req.maxTokens === 0) seq.end("length");
    }
  }

  failAll(message: string): void {
    for (const seq of [...this.waiting, ...this.running]) seq.end("error", message);
  }
}
