// y[s, :] = x[rowIndex[s], :] for each selected row s (f32 rows of width D): picks the last row of
// each request before the final norm and LM head.

struct Params {
  rows: u32,
  D: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rowIndex: array<u32>;

const LANES: u32 = 64u;

// ---- vector path (D % 4 == 0) -------------------------------------------------------------------

@group(0) @binding(2) var<storage, read> xV: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> yV: array<vec4<f32>>;

// One workgroup per selected row; lanes stride over its vec4s.
@compute @workgroup_size(LANES)
fn gatherVec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let s = wg.x;
  let n4 = p.D / 4u;
  let src = rowIndex[s] * n4;
  for (var i = lid.x; i < n4; i += LANES) {
    yV[s * n4 + i] = xV[src + i];
  }
}

// ---- scalar path (any D) --------------------------------------------------------------------------

@group(0) @binding(2) var<storage, read> xS: array<f32>;
@group(0) @binding(3) var<storage, read_write> yS: array<f32>;

@compute @workgroup_size(LANES)
fn gatherScalar(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let s = wg.x;
  let src = rowIndex[s] * p.D;
  for (var i = lid.x; i < p.D; i += LANES) {
    yS[s * p.D + i] = xS[src + i];
  }
}
