// x[m, i] = act(x[m, i] + b[i]) in place, for every row m < rows and column i < width: the bias
// and activation after an encoder's up projection (GELU) or its pooler (tanh), or Gemma 2's soft
// cap of its logits. x f32 [rows, width], b of W [width]. One lane per element.
//
// Consts: ACT (0 GELU as erf, Hugging Face's "gelu"; 1 GELU's tanh approximation, "gelu_new" and
// "gelu_pytorch_tanh"; 2 tanh; 3 soft cap, cap·tanh(v / cap)), HAS_BIAS (0: no bias, b unread).

struct Params {
  rows: u32,
  width: u32,
  cap: f32, // ACT 3's
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<W>;

const LANES: u32 = 64u;

/**
 * erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, under f32's rounding of
 * GELU's result): WGSL has no erf.
 */
fn erf(z: f32) -> f32 {
  let a = abs(z);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 +
    t * 1.061405429))));
  let r = 1.0 - poly * exp(-a * a);
  return select(-r, r, z >= 0.0);
}

fn act(v: f32) -> f32 {
  if (ACT == 0u) {
    return 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
  }
  if (ACT == 1u) {
    return geluTanh(v);
  }
  if (ACT == 3u) {
    return p.cap * tanhStable(v / p.cap);
  }
  return tanhStable(v);
}

@compute @workgroup_size(LANES)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let i = gid.x;
  let m = wg.y;
  if (i >= p.width || m >= p.rows) {
    return;
  }
  var v = x[m * p.width + i];
  if (HAS_BIAS == 1u) {
    v += f32(b[i]);
  }
  x[m * p.width + i] = act(v);
}
