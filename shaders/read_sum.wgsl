// Sums a buffer's u32 words, one total per lane: a read-only kernel that moves bytes from
// memory to the cores and writes almost nothing, the roofline a matrix-vector kernel can approach
// (a copy's rate counts only half of the bytes it moves).
//
// Workgroup g reads words [g·LANES·PER_LANE, (g+1)·LANES·PER_LANE): in step k its lanes read LANES
// adjacent vec4 words, so each 8-lane SIMD group reads 128 contiguous bytes. PER_LANE stays far
// below llvmpipe's 65,535 loop iterations per SIMD group. Each lane writes 4 bytes per 16·PER_LANE
// read (a workgroup reduction through a barrier made llvmpipe's read rate half its copy rate).

struct Params {
  rows: u32, // unused: the size is fixed
  words: u32, // vec4<u32> count
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> totals: array<u32>;

const LANES: u32 = 256u;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let base = wg.x * LANES * PER_LANE + lid.x;
  var sum = vec4<u32>(0u);
  if (base + (PER_LANE - 1u) * LANES < p.words) {
    // A full range (every workgroup but the last): four loads per step, no bounds checks.
    for (var k = 0u; k < PER_LANE; k += 4u) {
      let i = base + k * LANES;
      sum += (src[i] + src[i + LANES]) + (src[i + 2u * LANES] + src[i + 3u * LANES]);
    }
  } else {
    for (var k = 0u; k < PER_LANE; k++) {
      let i = base + k * LANES;
      if (i < p.words) {
        sum += src[i];
      }
    }
  }
  totals[wg.x * LANES + lid.x] = sum.x + sum.y + sum.z + sum.w;
}
