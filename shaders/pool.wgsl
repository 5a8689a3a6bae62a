// Pools each input's token states into one vector: y[s, :] = the first row (CLS), the last row,
// or the mean of rows start..end-1 of input s, for s < inputs (the count in word 0). x f32
// [rows, D], spans u32 [inputs, 2] (start, end), y f32 [inputs, D]. L2 normalisation is left to
// the host, which reads the pooled vectors back anyway.
//
// Consts: MODE (0 first, 1 mean, 2 last).

struct Params {
  inputs: u32,
  D: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> spans: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const LANES: u32 = 64u;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let s = wg.x;
  let span = spans[s];
  for (var i = lid.x; i < p.D; i += LANES) {
    var v = 0.0;
    if (MODE == 0u) {
      v = x[span.x * p.D + i];
    } else if (MODE == 2u) {
      v = x[(span.y - 1u) * p.D + i];
    } else {
      for (var r = span.x; r < span.y; r++) {
        v += x[r * p.D + i];
      }
      v /= f32(span.y - span.x);
    }
    y[s * p.D + i] = v;
  }
}
