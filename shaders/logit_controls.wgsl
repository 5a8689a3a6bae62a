// Sampling controls, applied in place to the sample rows' logits f32 [samples, V] just before the
// sampler (sample.wgsl), and the per-slot token counts the penalties read.
//
// `adjust`: one workgroup per listed row r: (s, mask) = controlRows[r], slot = sampleSlot[s].
//   1. logit bias: logit[id] += bias for the slot's entries (ids distinct: the host merges them);
//   2. repetition penalty, for ids in the prompt or generated: logit / r if > 0, else logit · r;
//   3. frequency and presence penalties, over generated ids: logit -= f · n + p · (n > 0);
//   4. the token mask (mask != NO_MASK): bit id % 32 of word id / 32 of the row's mask clear sets
//      the logit to -inf. An allowed -inf becomes -f32max so that it still outranks every banned
//      id; NaN stays NaN (the sampler ranks it below -inf).
// `count`: after the sampler, counts[slot][nextIds[slot]] += 1 for listed rows whose slot uses
//   penalties, so the counts stay exact while steps are pipelined (no host round trip).
//
// counts[slot * V + id]: bit 31 set when id is in the slot's prompt, bits 0..30 the times it was
// generated. The host seeds a slot's row when a request takes it (prompt and generated ids).
// A slot has at most one sample row per step, so increments never race.

struct Params {
  rows: u32,
  V: u32,
  // u32 words of one row's mask: ceil(V / 32).
  maskWords: u32,
}

struct SlotControls {
  repetition: f32,
  frequency: f32,
  presence: f32,
  biasCount: u32,
  // Bit 0: the slot uses penalties (its counts row is seeded and counted).
  flags: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> sampleSlot: array<u32>;
@group(0) @binding(2) var<storage, read> controlRows: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> controls: array<SlotControls>;

const WG: u32 = 64u;
const NO_MASK: u32 = 0xffffffffu;
const PENALTIES: u32 = 1u;
const IN_PROMPT: u32 = 0x80000000u;
// `adjust` only.
@group(0) @binding(5) var<storage, read_write> logits: array<f32>;
// [slots, MAX_BIAS] (id, f32 bits of the bias).
@group(0) @binding(6) var<storage, read> bias: array<vec2<u32>>;
// The step's masks, maskWords each, in controlRows' mask order.
@group(0) @binding(7) var<storage, read> masks: array<u32>;
// `count` only.
@group(0) @binding(8) var<storage, read> nextIds: array<u32>;

@compute @workgroup_size(WG)
fn adjust(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let r = wid.x;
  if (r >= params.rows) { return; }
  let V = params.V;
  let entry = controlRows[r];
  let slot = sampleSlot[entry.x];
  let c = controls[slot];
  let row = entry.x * V;

  for (var b = lane; b < min(c.biasCount, MAX_BIAS); b += WG) {
    let e = bias[slot * MAX_BIAS + b];
    if (e.x < V) { logits[row + e.x] += bitcast<f32>(e.y); }
  }
  // The bias is in before any lane reads a logit back.
  storageBarrier();

  let penalized = (c.flags & PENALTIES) != 0u;
  let mask = entry.y;
  let negInf = bitcast<f32>(0xff800000u);
  let lowest = bitcast<f32>(0xff7fffffu);
  for (var i = lane; i < V; i += WG) {
    var x = logits[row + i];
    if (penalized) {
      let w = atomicLoad(&counts[slot * V + i]);
      if (w != 0u) {
        x = select(x * c.repetition, x / c.repetition, x > 0.0);
        let n = w & ~IN_PROMPT;
        x -= c.frequency * f32(n) + select(0.0, c.presence, n > 0u);
      }
    }
    if (mask != NO_MASK) {
      let allowed = ((masks[mask * params.maskWords + i / 32u] >> (i % 32u)) & 1u) != 0u;
      x = select(negInf, select(x, lowest, x == negInf), allowed);
    }
    logits[row + i] = x;
  }
}

// One workgroup; a lane per listed row.
@compute @workgroup_size(WG)
fn count(@builtin(local_invocation_index) lane: u32) {
  for (var r = lane; r < params.rows; r += WG) {
    let slot = sampleSlot[controlRows[r].x];
    if ((controls[slot].flags & PENALTIES) != 0u) {
      let id = nextIds[slot];
      if (id < params.V) { atomicAdd(&counts[slot * params.V + id], 1u); }
    }
  }
}
