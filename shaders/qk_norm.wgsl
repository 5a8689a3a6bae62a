// Qwen3's q and k norms: each q head and each k head of the fused qkv rows RMS-normalized on its
// own, in place, before RoPE (which kv_write and attention apply as they read the heads):
//   x[h, :] = x[h, :] / sqrt(mean(x[h, :]^2) + eps) * w[h < numHeads ? 0 : 1][:]
// qkv f32 [rows, (numHeads + 2 numKvHeads) * headDim] laid out [q heads | k heads | v heads]; the v
// heads are untouched. w of W [2, headDim]: the q norm's weights, then the k norm's.
//
// One lane per (row, head), summing in a fixed order: no barriers, and a
// head's result does not depend on the rest of the batch. 1/sqrt rather than inverseSqrt, which
// may be an approximation.

struct Params {
  rows: u32,
  numHeads: u32,
  numKvHeads: u32,
  headDim: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<W>;

const LANES: u32 = 8u;

@compute @workgroup_size(LANES)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let h = gid.x;
  let m = wg.y;
  if (h >= p.numHeads + p.numKvHeads || m >= p.rows) {
    return;
  }
  let base = (m * (p.numHeads + 2u * p.numKvHeads) + h) * p.headDim;
  let wBase = select(0u, p.headDim, h >= p.numHeads);
  var sq = 0.0;
  for (var i = 0u; i < p.headDim; i++) {
    let v = qkv[base + i];
    sq = fma(v, v, sq);
  }
  let scale = 1.0 / sqrt(sq / f32(p.headDim) + p.eps);
  for (var i = 0u; i < p.headDim; i++) {
    qkv[base + i] = qkv[base + i] * scale * f32(w[wBase + i]);
  }
}
