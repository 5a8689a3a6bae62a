// y[m, :] = x[m, :] / sqrt(mean(x[m, :]^2) + eps) * w[:], x and y f32 [rows, D], w of W [D].
//
// 1/sqrt rather than inverseSqrt: the latter may be an approximation.
// One lane per row, summing in a fixed order: no barriers (costly on llvmpipe) and the result of a
// row does not depend on the other rows. The work is tiny next to the matmuls around it.

struct Params {
  rows: u32,
  D: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;

const LANES: u32 = 8u;

// ---- vector path (D % 4 == 0) -------------------------------------------------------------------

@group(0) @binding(1) var<storage, read> xv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> wv: array<vec4<W>>;
@group(0) @binding(3) var<storage, read_write> yv: array<vec4<f32>>;

@compute @workgroup_size(LANES)
fn rmsnormVec(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = gid.x;
  if (m >= p.rows) {
    return;
  }
  let n4 = p.D / 4u;
  let row = m * n4;
  // Four interleaved partial sums, combined once: fewer dependent adds, still a fixed order.
  var sq = vec4<f32>(0.0);
  for (var i = 0u; i < n4; i++) {
    let v = xv[row + i];
    sq = fma(v, v, sq);
  }
  let scale = 1.0 / sqrt((sq.x + sq.y + sq.z + sq.w) / f32(p.D) + p.eps);
  for (var i = 0u; i < n4; i++) {
    yv[row + i] = xv[row + i] * scale * vec4<f32>(wv[i]);
  }
}

// ---- scalar path (any D) --------------------------------------------------------------------------

@group(0) @binding(1) var<storage, read> xs: array<f32>;
@group(0) @binding(2) var<storage, read> ws: array<W>;
@group(0) @binding(3) var<storage, read_write> ys: array<f32>;

@compute @workgroup_size(LANES)
fn rmsnormScalar(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = gid.x;
  if (m >= p.rows) {
    return;
  }
  let row = m * p.D;
  var sq = 0.0;
  for (var i = 0u; i < p.D; i++) {
    let v = xs[row + i];
    sq = fma(v, v, sq);
  }
  let scale = 1.0 / sqrt(sq / f32(p.D) + p.eps);
  for (var i = 0u; i < p.D; i++) {
    ys[row + i] = xs[row + i] * scale * f32(ws[i]);
  }
}
