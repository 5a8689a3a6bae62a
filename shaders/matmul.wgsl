// y = x · Wᵀ for a tile of rows (tokens) and outputs, with W in Hugging Face Linear layout [N, K].
//
// Consts: LANES (workgroup size), TILE_ROWS (rows per workgroup), OUTS (outputs per lane),
// W_F16 (1 when W = f16), MODE (0 store, 1 add into y, 2 SwiGLU: W is [2N, K], gate rows then up),
// NORM (1: x is RMS-normalized on the way in, engine/gpu/kernels/fused_norm.ts).
//
// Lines holding `$t` are repeated for t = 0..TILE_ROWS-1, `$r` for r = 0..OUTS-1, `$q` for
// q = 0..OUTS/4-1, and lines holding two of them for every pair (engine/gpu/kernels/matmul.ts
// expands them). WGSL has no unroll directive and the driver does not unroll a 16x24 register
// tile; left as loops over arrays, the accumulators live in scratch memory and run 2x slower.
//
// Each lane owns OUTS outputs for TILE_ROWS rows and walks k from 0 to K-1 itself, so every output
// is one multiply-add chain in k order: the same bits whatever the tile shape, the row count or the
// other rows (batch invariance); a given shape always takes the same path. A weight is read once
// per row tile, an x value once per lane and reused for all its outputs. No barriers, no shared
// memory: on llvmpipe every storage access is a per-lane loop, so loads are the cost to cut, and a
// vec4 load costs little more than a scalar one. (fma() is not fused on llvmpipe; it is still the
// same operation in every tile, which is all batch invariance needs.)
//
// With NORM, y = rmsnorm(x) · Wᵀ, up to rounding, with rmsnorm(x) = x / sqrt(mean(x²) + eps) · g:
// each lane multiplies the x it loads by the gain g and sums the squares of the raw x in a fixed
// order (four interleaved sums, one vec4 at a time along the row, on the vector path; one sum on
// the scalar path), and scales each output by 1 / sqrt(Σx² / K + eps) (1/sqrt, not inverseSqrt,
// which may be an approximation) before the store, add or SwiGLU. Every lane of a row computes the same sum the same way, so
// the result is still batch invariant.

struct Params {
  rows: u32,
  K: u32,
  N: u32,
  ldy: u32,
  yCol: u32,
  /** The fused norm's epsilon (NORM only). */
  eps: f32,
  /** GLU's gate activation: 0 SiLU (SwiGLU), 1 GELU's tanh approximation (GeGLU, Gemma). */
  gelu: u32,
}

const MODE_ADD: u32 = 1u;
const MODE_GLU: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;

// ---- vector path (K % 8 == 0; N, ldy, yCol multiples of 4) ---------------------------------------
//
// A lane owns OUTS / 4 quads of 4 adjacent outputs, so it stores 16 bytes at a time: each access
// to y is a per-lane loop on llvmpipe and a block of code for its JIT, and with one per output the
// 16x24 tile took LLVM twice as long to compile (5 s store, 14 s add, vs 3 s and 6 s).

@group(0) @binding(1) var<storage, read> xv: array<vec4<f32>>;
// Weights as raw 16-byte words: 8 f16 (packed pairs) or 4 f32 each, read only through wv_word, so
// that matmul.ts can swap the binding for a texture of the same words (engine/gpu/weight_texture.ts).
@group(0) @binding(2) var<storage, read> wv: array<vec4<u32>>;
fn wv_word(i: u32) -> vec4<u32> { return wv[i]; }
@group(0) @binding(3) var<storage, read_write> yv: array<vec4<f32>>;

struct Eight {
  lo: vec4<f32>,
  hi: vec4<f32>,
}

/** The 8 weights of step s of weight row `row`. */
fn weights8(row: u32, s: u32) -> Eight {
  if (W_F16 == 1u) {
    let q = wv_word(row * (p.K / 8u) + s);
    return Eight(vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)),
                 vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)));
  }
  let i = row * (p.K / 4u) + 2u * s;
  return Eight(bitcast<vec4<f32>>(wv_word(i)), bitcast<vec4<f32>>(wv_word(i + 1u)));
}

/** acc + a·b over 8 terms, strictly in k order. */
fn dot8(acc: f32, a: Eight, b: Eight) -> f32 {
  var s = fma(a.lo.x, b.lo.x, acc);
  s = fma(a.lo.y, b.lo.y, s);
  s = fma(a.lo.z, b.lo.z, s);
  s = fma(a.lo.w, b.lo.w, s);
  s = fma(a.hi.x, b.hi.x, s);
  s = fma(a.hi.y, b.hi.y, s);
  s = fma(a.hi.z, b.hi.z, s);
  return fma(a.hi.w, b.hi.w, s);
}

// The norm's gain, as 8 values per step (a stand-in of ones without NORM: then no binding 4), read
// as 16-byte words like the weights: one load per step where W = f16.
// #if NORM
@group(0) @binding(4) var<storage, read> gv: array<vec4<u32>>;
fn gain8(s: u32) -> Eight {
  if (W_F16 == 1u) {
    let q = gv[s];
    return Eight(vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)),
                 vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)));
  }
  return Eight(bitcast<vec4<f32>>(gv[2u * s]), bitcast<vec4<f32>>(gv[2u * s + 1u]));
}
// #else
fn gain8(s: u32) -> Eight { return Eight(vec4<f32>(1.0), vec4<f32>(1.0)); }
// #endif

/** A row's norm scale from its four partial sums of squares (1 without NORM). */
fn normScale4(sq: vec4<f32>) -> f32 {
  if (NORM == 0u) {
    return 1.0;
  }
  return 1.0 / sqrt((sq.x + sq.y + sq.z + sq.w) / f32(p.K) + p.eps);
}

// The GLU's gate (activations.wgsl).
fn gate4(v: vec4<f32>) -> vec4<f32> {
  if (p.gelu != 0u) {
    return geluTanh4(v);
  }
  return silu4(v);
}

/** Writes outputs n..n+3 of row m according to MODE. `u` is the up projection (GLU only). */
fn finish4(m: u32, n: u32, g: vec4<f32>, u: vec4<f32>) {
  if (m >= p.rows || n >= p.N) {
    return;
  }
  let i = (m * p.ldy + p.yCol + n) / 4u;
  if (MODE == MODE_GLU) {
    yv[i] = gate4(g) * u;
  } else if (MODE == MODE_ADD) {
    yv[i] = yv[i] + g;
  } else {
    yv[i] = g;
  }
}

@compute @workgroup_size(LANES)
fn matmulVec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m0 = wg.y * TILE_ROWS;
  let steps = p.K / 8u;
  // Quad q of this lane: outputs n$q..n$q+3. Quads past N load the last quad and store nothing;
  // rows past the end load the last row.
  let n$q = wg.x * (LANES * OUTS) + $q * (4u * LANES) + 4u * lid.x;
  let w$q = min(n$q, p.N - 4u);
  let xRow$t = min(m0 + $t, p.rows - 1u) * (p.K / 4u);
  var g$t_$q = vec4<f32>(0.0);
  var u$t_$q = vec4<f32>(0.0);
  var sq$t = vec4<f32>(0.0);
  for (var s = 0u; s < steps; s++) {
    var x$t = Eight(xv[xRow$t + 2u * s], xv[xRow$t + 2u * s + 1u]);
    if (NORM == 1u) {
      let gain = gain8(s);
      sq$t = fma(x$t.hi, x$t.hi, fma(x$t.lo, x$t.lo, sq$t));
      x$t = Eight(x$t.lo * gain.lo, x$t.hi * gain.hi);
    }
    let w$q_0 = weights8(w$q, s);
    let w$q_1 = weights8(w$q + 1u, s);
    let w$q_2 = weights8(w$q + 2u, s);
    let w$q_3 = weights8(w$q + 3u, s);
    g$t_$q = vec4<f32>(dot8(g$t_$q.x, x$t, w$q_0), dot8(g$t_$q.y, x$t, w$q_1), dot8(g$t_$q.z, x$t, w$q_2), dot8(g$t_$q.w, x$t, w$q_3));
    if (MODE == MODE_GLU) {
      let v$q_0 = weights8(w$q + p.N, s);
      let v$q_1 = weights8(w$q + p.N + 1u, s);
      let v$q_2 = weights8(w$q + p.N + 2u, s);
      let v$q_3 = weights8(w$q + p.N + 3u, s);
      u$t_$q = vec4<f32>(dot8(u$t_$q.x, x$t, v$q_0), dot8(u$t_$q.y, x$t, v$q_1), dot8(u$t_$q.z, x$t, v$q_2), dot8(u$t_$q.w, x$t, v$q_3));
    }
  }
  let scale$t = normScale4(sq$t);
  finish4(m0 + $t, n$q, g$t_$q * scale$t, u$t_$q * scale$t);
}

// ---- scalar path (any shape): one step is one k; only odd test shapes come here -------------------

@group(0) @binding(1) var<storage, read> xs: array<f32>;
@group(0) @binding(2) var<storage, read> ws: array<W>;
@group(0) @binding(3) var<storage, read_write> ys: array<f32>;
// #if NORM
@group(0) @binding(4) var<storage, read> gs: array<W>;
fn gainAt(k: u32) -> f32 { return f32(gs[k]); }
// #else
fn gainAt(k: u32) -> f32 { return 1.0; }
// #endif

/** normScale4 for the scalar path's one sum. */
fn normScale(sq: f32) -> f32 {
  if (NORM == 0u) {
    return 1.0;
  }
  return 1.0 / sqrt(sq / f32(p.K) + p.eps);
}

fn gateS(v: f32) -> f32 {
  if (p.gelu != 0u) {
    return geluTanh(v);
  }
  return silu(v);
}

fn finishS(m: u32, n: u32, g: f32, u: f32) {
  if (m >= p.rows || n >= p.N) {
    return;
  }
  let i = m * p.ldy + p.yCol + n;
  if (MODE == MODE_GLU) {
    ys[i] = gateS(g) * u;
  } else if (MODE == MODE_ADD) {
    ys[i] = ys[i] + g;
  } else {
    ys[i] = g;
  }
}

@compute @workgroup_size(LANES)
fn matmulScalar(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let n0 = wg.x * (LANES * OUTS) + lid.x;
  let m0 = wg.y * TILE_ROWS;
  let xRow$t = min(m0 + $t, p.rows - 1u) * p.K;
  let wRow$r = min(n0 + $r * LANES, p.N - 1u) * p.K;
  var g$t_$r = 0.0;
  var u$t_$r = 0.0;
  var sq$t = 0.0;
  for (var k = 0u; k < p.K; k++) {
    var x$t = xs[xRow$t + k];
    if (NORM == 1u) {
      let gain = gainAt(k);
      sq$t = fma(x$t, x$t, sq$t);
      x$t = x$t * gain;
    }
    g$t_$r = fma(x$t, f32(ws[wRow$r + k]), g$t_$r);
    if (MODE == MODE_GLU) {
      u$t_$r = fma(x$t, f32(ws[wRow$r + p.N * p.K + k]), u$t_$r);
    }
  }
  let scale$t = normScale(sq$t);
  finishS(m0 + $t, n0 + $r * LANES, g$t_$r * scale$t, u$t_$r * scale$t);
}
