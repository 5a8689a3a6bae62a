// x[m, i] += b[i] for every row m < rows and column i < width: Qwen2's q, k and v biases, added in
// place to the fused qkv rows right after their matmul. x f32 [rows, width], b of W [width].
// One lane per element: nothing is summed, so the result is exactly f32(x + b).

struct Params {
  rows: u32,
  width: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<W>;

const LANES: u32 = 64u;

@compute @workgroup_size(LANES)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let i = gid.x;
  let m = wg.y;
  if (i >= p.width || m >= p.rows) {
    return;
  }
  x[m * p.width + i] += f32(b[i]);
}
