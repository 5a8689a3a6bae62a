// Rotary position embedding, as functions: no bindings, no entry point. kv_write.wgsl and
// kv_write_q8.wgsl rotate each k head with them on its way into the cache, attention.wgsl each q
// head as it loads it, so no pass rotates qkv in place (the wrappers append this file to theirs).
// Hugging Face's rotate_half convention: for i < headDim/2, (a, b) = (x[i], x[i + headDim/2])
// becomes (a cos θ − b sin θ, b cos θ + a sin θ) with θ = position · invFreq[i]. llama.cpp's
// interleaved order never reaches the GPU: the GGUF loader undoes its row permutation
// (formats/rope_permutation.ts), so one order serves every family.
//
// θ is built from four exact partial products (position and frequency each split into 12-bit
// halves) and each is reduced modulo 2π in steps that are exact or nearly so, so large positions
// keep full precision: a plain f32 θ near position 10^5 is already off by ~4e-3 rad (and fma is
// not fused on llvmpipe, so the usual two-product trick does not work there). Exact reduction
// needs |θ| < 2^16 · 2π, i.e. positions below ~400k; positions must stay below 2^24.
// Everything works on four pairs at once (componentwise, the same arithmetic as one at a time).

const ROPE_INV_TWO_PI: f32 = 0.15915494309189535;
// 2π = C1 + C2 + C3 + C4, the first three with 8 significant bits so k * Ci is exact for k < 2^16.
const ROPE_TWO_PI_1: f32 = 6.28125;
const ROPE_TWO_PI_2: f32 = 0.00193023681640625;
const ROPE_TWO_PI_3: f32 = 5.066394805908203125e-06;
const ROPE_TWO_PI_4: f32 = 3.968374318722162e-09;

/** t minus the nearest multiple of 2π, with an error of a few 1e-7 at most. */
fn ropeReduceAngle(t: vec4<f32>) -> vec4<f32> {
  let k = round(t * ROPE_INV_TWO_PI);
  var r = t - k * ROPE_TWO_PI_1;
  r -= k * ROPE_TWO_PI_2;
  r -= k * ROPE_TWO_PI_3;
  return r - k * ROPE_TWO_PI_4;
}

/** pos * f modulo 2π, from exact 12-bit × 12-bit partial products. */
fn ropeAngle(pos: u32, f: vec4<f32>) -> vec4<f32> {
  let posHi = f32(pos & 0xFFF000u);
  let posLo = f32(pos & 0xFFFu);
  let fHi = bitcast<vec4<f32>>(bitcast<vec4<u32>>(f) & vec4<u32>(0xFFFFF000u));
  let fLo = f - fHi;
  let sum = ropeReduceAngle(posHi * fHi) + ropeReduceAngle(posHi * fLo) +
    ropeReduceAngle(posLo * fHi) + posLo * fLo;
  return ropeReduceAngle(sum); // back into [−π, π], where every GPU's sin/cos is accurate
}

/** cos θ and sin θ of four pairs. */
struct RopeTurn {
  c: vec4<f32>,
  s: vec4<f32>,
}

/** The turn of four consecutive pairs at `pos`, given their inverse frequencies. */
fn ropeTurn(pos: u32, invFreq4: vec4<f32>) -> RopeTurn {
  let r = ropeAngle(pos, invFreq4);
  return RopeTurn(cos(r), sin(r));
}

/**
 * Four rotated values of a head: `x` at offset d of the head, `partner` at d + headDim/2 (when
 * `upper` is false) or d − headDim/2 (when true), `t` the turn of pairs d mod headDim/2 onwards.
 */
fn ropeRotate(x: vec4<f32>, partner: vec4<f32>, t: RopeTurn, upper: bool) -> vec4<f32> {
  // The same products, in the same order, as a = x, b = partner (lower) or b = x, a = partner.
  return select(x * t.c - partner * t.s, x * t.c + partner * t.s, upper);
}
