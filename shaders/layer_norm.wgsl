// LayerNorm in place: x[m, :] = (x[m, :] - mean) / sqrt(var + eps) * gain + bias, for each row
// m < rows (BERT's post-attention and post-MLP norms, the embeddings' norm). x f32 [rows, D];
// gain and bias of W [D]. One workgroup per row; the mean first, then the variance of the centred
// values (two passes over the row, so a large mean does not cancel the variance away).

struct Params {
  rows: u32,
  D: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> gain: array<W>;
@group(0) @binding(3) var<storage, read> bias: array<W>;

const LANES: u32 = 64u;
var<workgroup> partial: array<f32, LANES>;

/** The sum of every lane's `v` (all lanes must call it). */
fn workgroupSum(lane: u32, v: f32) -> f32 {
  partial[lane] = v;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      partial[lane] += partial[lane + stride];
    }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let lane = lid.x;
  let base = wg.x * p.D;
  var s = 0.0;
  for (var i = lane; i < p.D; i += LANES) {
    s += x[base + i];
  }
  let mean = workgroupSum(lane, s) / f32(p.D);
  var s2 = 0.0;
  for (var i = lane; i < p.D; i += LANES) {
    let d = x[base + i] - mean;
    s2 += d * d;
  }
  let inv = 1.0 / sqrt(workgroupSum(lane, s2) / f32(p.D) + p.eps);
  for (var i = lane; i < p.D; i += LANES) {
    x[base + i] = (x[base + i] - mean) * inv * f32(gain[i]) + f32(bias[i]);
  }
}
