// Rotary position embedding, in place on the q and k heads of fused qkv rows (Hugging Face
// rotate_half convention): for i < headDim/2, (a, b) = (x[i], x[i + headDim/2]) becomes
// (a cos θ − b sin θ, b cos θ + a sin θ) with θ = positions[m] · invFreq[i]. v is untouched.
//
// θ is built from four exact partial products (position and frequency each split into 12-bit
// halves) and each is reduced modulo 2π in steps that are exact or nearly so, so large positions
// keep full precision: a plain f32 θ near position 10^5 is already off by ~4e-3 rad (and fma is
// not fused on llvmpipe, so the usual two-product trick does not work there). Exact reduction
// needs |θ| < 2^16 · 2π, i.e. positions below ~400k; positions must stay below 2^24.

struct Params {
  rows: u32,
  numRotated: u32, // numHeads + numKvHeads: the q heads then the k heads, contiguous
  headDim: u32,
  rowWidth: u32, // (numHeads + 2 * numKvHeads) * headDim
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;
@group(0) @binding(3) var<storage, read> invFreq: array<f32>;

const LANES: u32 = 32u;
const INV_TWO_PI: f32 = 0.15915494309189535;
// 2π = C1 + C2 + C3 + C4, the first three with 8 significant bits so k * Ci is exact for k < 2^16.
const TWO_PI_1: f32 = 6.28125;
const TWO_PI_2: f32 = 0.00193023681640625;
const TWO_PI_3: f32 = 5.066394805908203125e-06;
const TWO_PI_4: f32 = 3.968374318722162e-09;

/** t minus the nearest multiple of 2π, with an error of a few 1e-7 at most. */
fn reduceAngle(t: f32) -> f32 {
  let k = round(t * INV_TWO_PI);
  var r = t - k * TWO_PI_1;
  r -= k * TWO_PI_2;
  r -= k * TWO_PI_3;
  return r - k * TWO_PI_4;
}

/** pos * f modulo 2π, from exact 12-bit × 12-bit partial products. */
fn angle(pos: u32, f: f32) -> f32 {
  let posHi = f32(pos & 0xFFF000u);
  let posLo = f32(pos & 0xFFFu);
  let fHi = bitcast<f32>(bitcast<u32>(f) & 0xFFFFF000u);
  let fLo = f - fHi;
  let sum = reduceAngle(posHi * fHi) + reduceAngle(posHi * fLo) + reduceAngle(posLo * fHi) + posLo * fLo;
  return reduceAngle(sum); // back into [−π, π], where every GPU's sin/cos is accurate
}

// One lane per (row, i): the angle is computed once and applied to every rotated head.
@compute @workgroup_size(LANES)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let half = p.headDim / 2u;
  let i = gid.x;
  let m = wg.y;
  if (i >= half || m >= p.rows) {
    return;
  }
  let r = angle(positions[m], invFreq[i]);
  let c = cos(r);
  let s = sin(r);
  var at = m * p.rowWidth + i;
  for (var h = 0u; h < p.numRotated; h++) {
    let a = qkv[at];
    let b = qkv[at + half];
    qkv[at] = a * c - b * s;
    qkv[at + half] = b * c + a * s;
    at += p.headDim;
  }
}
