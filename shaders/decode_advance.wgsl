// Moves the rows of a decode group (several decode steps in one submission) from step to step, so
// no token crosses to the host in between. `begin` runs before the group's first step and notes
// each row's input id; `advance` runs before every later step, after the previous sampler, and
// moves each row on to the id it just sampled at its next position, as the host would have. A row
// whose sample ends it (its budget of samples taken, or a stop id) does not move: it takes its last
// input again at the same position, so it rewrites that position's KV with the same values and
// writes nothing past its end. The samples it draws after that are discarded by the host.
//
// Per sample s, state[s * STRIDE ..]: budget, taken, done, input id, stop count, stop ids.

const STRIDE: u32 = 13u;
const MAX_STOPS: u32 = 8u;

struct Params {
  samples: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> state: array<u32>;
@group(0) @binding(2) var<storage, read> sampleRow: array<u32>;
@group(0) @binding(3) var<storage, read> sampleSlot: array<u32>;
@group(0) @binding(4) var<storage, read_write> rowPos: array<u32>;
@group(0) @binding(5) var<storage, read_write> samplePos: array<u32>;
@group(0) @binding(6) var<storage, read_write> nextIds: array<u32>;

@compute @workgroup_size(64)
fn begin(@builtin(global_invocation_id) gid: vec3<u32>) {
  let s = gid.x;
  if (s >= p.samples) {
    return;
  }
  state[s * STRIDE + 3u] = nextIds[sampleSlot[s]];
}

@compute @workgroup_size(64)
fn advance(@builtin(global_invocation_id) gid: vec3<u32>) {
  let s = gid.x;
  if (s >= p.samples) {
    return;
  }
  let base = s * STRIDE;
  let slot = sampleSlot[s];
  if (state[base + 2u] != 0u) {
    // Finished earlier: the sampler has overwritten its id since.
    nextIds[slot] = state[base + 3u];
    return;
  }
  let id = nextIds[slot];
  let taken = state[base + 1u] + 1u;
  state[base + 1u] = taken;
  var done = taken >= state[base];
  let stops = min(state[base + 4u], MAX_STOPS);
  for (var i = 0u; i < stops; i++) {
    if (state[base + 5u + i] == id) {
      done = true;
    }
  }
  if (done) {
    state[base + 2u] = 1u;
    nextIds[slot] = state[base + 3u];
    return;
  }
  let row = sampleRow[s];
  rowPos[row] = rowPos[row] + 1u;
  samplePos[s] = samplePos[s] + 1u;
  state[base + 3u] = id;
}
