// dst = src, 16 bytes per lane: the plainest fast copy, and the bandwidth baseline of the benchmarks.

struct Params {
  rows: u32, // unused: a copy has a fixed size
  words: u32, // vec4<u32> count
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

const LANES: u32 = 256u;

// The grid may be two-dimensional when the copy needs more than 65535 workgroups.
@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let i = (wg.y * groups.x + wg.x) * LANES + lid.x;
  if (i < p.words) {
    dst[i] = src[i];
  }
}
