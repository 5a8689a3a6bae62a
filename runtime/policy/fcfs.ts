// The vLLM baseline every paper measures against: admit in arrival order while the prompt's
// blocks are free, hand out blocks on demand as prefill chunks and decode steps need them, and
// when a running request needs a block that is not there, preempt the most recently admitted
// running request (its KV is freed; it is recomputed from its ids when readmitted).

import type { Request } from "../request/request.ts";
import type { SchedulingPolicy } from "./policy.ts";
import { makePreset, type PresetEntry } from "./preset.ts";

export const fcfsPolicy: SchedulingPolicy = {
  name: "fcfs",
  // The prompt, plus the ids generated before a preemption: what its prefill will write.
  admissionTokens: (req: Request) => req.prefillTarget,
  pickVictim: (running: readonly Request[]) =>
    running.reduce((newest, r) => r.admittedAt > newest.admittedAt ? r : newest),
};

/** `--sched fcfs`. */
export const fcfs: PresetEntry = { make: (o) => makePreset("fcfs", fcfsPolicy, o) };
