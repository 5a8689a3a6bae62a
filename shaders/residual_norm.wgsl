// A branch's output normed before it joins the residual stream (Gemma 3's norms after attention
// and after the MLP):
//   y[m, :] += x[m, :] / sqrt(mean(x[m, :]²) + eps) · w
// x f32 [rows, D] (the branch: o or down projection, stored), y f32 [rows, D] (the residual), w of
// W [D].
//
// One workgroup per row. Each lane sums the squares of its strided share of the row in order, and
// lane 0 adds the LANES partial sums in lane order: the same sum for a row whatever the batch (batch
// invariance). 1/sqrt rather than inverseSqrt, which may be an approximation.

struct Params {
  rows: u32,
  D: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<W>;

const LANES: u32 = 64u;

var<workgroup> partial: array<f32, LANES>;
var<workgroup> rowScale: f32;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let base = m * p.D;
  var sq = 0.0;
  for (var i = lid.x; i < p.D; i += LANES) {
    let v = x[base + i];
    sq = fma(v, v, sq);
  }
  partial[lid.x] = sq;
  workgroupBarrier();
  if (lid.x == 0u) {
    var sum = 0.0;
    for (var l = 0u; l < LANES; l++) {
      sum += partial[l];
    }
    rowScale = 1.0 / sqrt(sum / f32(p.D) + p.eps);
  }
  workgroupBarrier();
  let scale = rowScale;
  for (var i = lid.x; i < p.D; i += LANES) {
    y[base + i] = y[base + i] + x[base + i] * scale * f32(w[i]);
  }
}
