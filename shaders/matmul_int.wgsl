// y = x · Wᵀ with W block-quantized (any of quant_blocks.wgsl's formats, in
// engine/gpu/kernels/quant_layout.ts's layout) and x already quantized to int8 blocks of 32
// (quantize_x.wgsl): each 16-value half-chunk's Σ xq·q is four dot4I8Packed of packed int8, exact
// in i32, and the scales are applied per chunk in f32. Needs WGSL's packed_4x8_integer_dot_product.
// Modes and the `$t` / `$r` unrolling as matmul_quant.wgsl (store and add share a pipeline through
// p.add).
//
// A chunk of 32 weights is a·q + b per value (quant_blocks.wgsl). Where b is a fixed multiple of a
// (Q4_0: b = -8a, Q5_0: -16a, Q6_K: -32a, Q3_K: -4a) the weights' int8 are q less that offset, so
// Σ x·w = dx · a · Σ xq·(q - c) needs no sum of x; Q8_0's and IQ4's q are signed already (IQ4: its
// levels). Where b is a min of its own (Q4_1, Q5_1, Q4_K, Q5_K: one per 32 values), q stays unsigned
// (at most 31: int8 still) and the chunk adds b · s, s = dx · Σxq from quantize_x. With one a per
// chunk the two halves' integer sums are added before the one multiply (exact: |Σ| < 2^19); Q6_K
// and Q3_K scale each half on its own. Each output is one chain over chunks in k order whatever the
// tile, so results are batch invariant.

struct Params {
  rows: u32,
  K: u32,
  N: u32,
  ldy: u32,
  yCol: u32,
  /** Start of the S region, in vec4 words. */
  sBase: u32,
  /** Start of the D region, in u32 words. */
  dBase: u32,
  /** Start of the H region (Q5_0, Q5_1), in u32 words. */
  hBase: u32,
  /** 1: add to y (MODE 0 only), 0: store. */
  add: u32,
}

const MODE_GLU: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
// x's quants (two vec4 of packed int8 per 32-value chunk) and each chunk's (d, s).
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> xs: array<vec2<f32>>;
// The weight buffer twice: as vec4 words (Q and S regions) and as u32 words (the D region).
@group(0) @binding(3) var<storage, read> wq: array<vec4<u32>>;
fn wq_word(i: u32) -> vec4<u32> { return wq[i]; }
@group(0) @binding(4) var<storage, read> wd: array<u32>;
fn wd_word(i: u32) -> u32 { return wd[i]; }
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

/** One 32-value chunk of quantized x: values 0..15 in lo, 16..31 in hi, and its (d, s). */
struct XInt {
  lo: vec4<u32>,
  hi: vec4<u32>,
  ds: vec2<f32>,
}

fn loadXInt(row: u32, chunk: u32) -> XInt {
  let i = row * (p.K / 32u) + chunk;
  return XInt(xq[2u * i], xq[2u * i + 1u], xs[i]);
}

/** A chunk's weights as packed int8, in x's order: values 0..15 in lo, 16..31 in hi. */
struct WInt {
  lo: vec4<u32>,
  hi: vec4<u32>,
}

/** Formats whose b is a min of its own, added as b · s. */
fn hasMin() -> bool {
  return FMT == FMT_Q4_1 || FMT == FMT_Q5_1 || FMT == FMT_Q4_K || FMT == FMT_Q5_K;
}

/** Formats with a scale per 16-value half (Q6_K, Q3_K). */
fn halfScales() -> bool {
  return FMT == FMT_Q6_K || FMT == FMT_Q3_K;
}

/** The fixed offset c of b = -c·a (0 where there is none, or where b is a min). */
fn offset() -> u32 {
  if (FMT == FMT_Q4_0) { return 8u; }
  if (FMT == FMT_Q5_0) { return 16u; }
  if (FMT == FMT_Q6_K) { return 32u; }
  if (FMT == FMT_Q3_K) { return 4u; }
  return 0u;
}

/** The four 2-bit fields of f's low byte, each moved to the bottom of its own byte. */
fn spread2(f: u32) -> u32 {
  return (f & 3u) | ((f & 0xCu) << 6u) | ((f & 0x30u) << 12u) | ((f & 0xC0u) << 18u);
}

/** The four bits of f's low nibble, each moved to the bottom of its own byte. */
fn spread1(f: u32) -> u32 {
  return (f & 1u) | ((f & 2u) << 7u) | ((f & 4u) << 14u) | ((f & 8u) << 21u);
}

/** Four IQ4 codes (one per byte) as their int8 levels (quant_blocks.wgsl's IQ4_WORDS). */
fn iq4Packed(codes: u32) -> u32 {
  let q = (vec4<u32>(codes) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFu);
  let low = select(vec4<u32>(IQ4_WORDS.x), vec4<u32>(IQ4_WORDS.y), q >= vec4<u32>(4u));
  let high = select(vec4<u32>(IQ4_WORDS.z), vec4<u32>(IQ4_WORDS.w), q >= vec4<u32>(12u));
  let word = select(low, high, q >= vec4<u32>(8u));
  let b = (word >> (8u * (q & vec4<u32>(3u)))) & vec4<u32>(0xFFu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

/** Values 16·half + 4v .. + 3 of chunk w as four int8, less the format's fixed offset. */
fn packed(w: WChunk, half: u32, v: u32) -> u32 {
  if (FMT == FMT_Q8_0) {
    return select(w.q[v], w.h[v], half == 1u);
  }
  var q: u32;
  if (FMT == FMT_Q3_K) {
    q = spread2(w.q[half] >> (8u * v)) | (spread1(w.h.x >> (4u * v + 16u * half)) << 2u);
  } else {
    q = (w.q[v] >> (4u * half)) & 0x0F0F0F0Fu;
    if (FMT == FMT_Q6_K) {
      q |= spread2(w.h[half] >> (8u * v)) << 4u;
    }
    if (fifthBit()) {
      q |= spread1(w.h.x >> (4u * v + 16u * half)) << 4u;
    }
    if (iq4()) {
      return iq4Packed(q);
    }
  }
  // Bytewise q - c with no borrow between bytes: each byte is 128 + q (q < 128) before the
  // subtraction, and the top bit flipped back after gives q - c as int8.
  let c = offset();
  if (c == 0u) {
    return q;
  }
  return ((q | 0x80808080u) - c * 0x01010101u) ^ 0x80808080u;
}

fn packedChunk(w: WChunk) -> WInt {
  return WInt(
    vec4<u32>(packed(w, 0u, 0u), packed(w, 0u, 1u), packed(w, 0u, 2u), packed(w, 0u, 3u)),
    vec4<u32>(packed(w, 1u, 0u), packed(w, 1u, 1u), packed(w, 1u, 2u), packed(w, 1u, 3u)),
  );
}

/** acc + this chunk's Σ x·w. */
fn accumulateInt(acc: f32, x: XInt, w: WChunk, q: WInt) -> f32 {
  let lo = dot4I8Packed(x.lo.x, q.lo.x) + dot4I8Packed(x.lo.y, q.lo.y)
         + dot4I8Packed(x.lo.z, q.lo.z) + dot4I8Packed(x.lo.w, q.lo.w);
  let hi = dot4I8Packed(x.hi.x, q.hi.x) + dot4I8Packed(x.hi.y, q.hi.y)
         + dot4I8Packed(x.hi.z, q.hi.z) + dot4I8Packed(x.hi.w, q.hi.w);
  var t: f32;
  if (halfScales()) {
    t = fma(w.a.x, f32(lo), w.a.y * f32(hi));
  } else {
    t = w.a.x * f32(lo + hi);
  }
  if (hasMin()) {
    return fma(w.b.x, x.ds.y, fma(x.ds.x, t, acc));
  }
  return fma(x.ds.x, t, acc);
}

fn finish(m: u32, n: u32, g: f32, u: f32) {
  if (m >= p.rows || n >= p.N) {
    return;
  }
  let i = m * p.ldy + p.yCol + n;
  if (MODE == MODE_GLU) {
    y[i] = silu(g) * u;
  } else if (p.add != 0u) {
    y[i] = y[i] + g;
  } else {
    y[i] = g;
  }
}

@compute @workgroup_size(LANES)
fn matmulInt(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m0 = wg.y * TILE_ROWS;
  let nb = p.K / BLOCK;
  // Output r of this lane; outputs past N compute on the last row and store nothing.
  let n$r = wg.x * (LANES * OUTS) + $r * LANES + lid.x;
  let w$r = min(n$r, p.N - 1u);
  let xRow$t = min(m0 + $t, p.rows - 1u);
  var g$t_$r = 0.0;
  var u$t_$r = 0.0;
  // Blocks in pairs, so that each pair's D word (both blocks' d) is loaded once (matmul_quant.wgsl).
  for (var bp = 0u; bp < nb; bp += 2u) {
    let dg$r = dPair(w$r, bp);
    var du$r = vec2<f32>(0.0);
    if (MODE == MODE_GLU) { du$r = dPair(w$r + p.N, bp); }
    for (var blk = bp; blk < min(bp + 2u, nb); blk++) {
      let hg$r = headerWith(w$r, blk, dg$r);
      var hu$r: Header;
      if (MODE == MODE_GLU) { hu$r = headerWith(w$r + p.N, blk, du$r); }
      for (var c = 0u; c < CHUNKS; c++) {
        let x$t = loadXInt(xRow$t, blk * CHUNKS + c);
        let wg$r = weights(w$r, blk, c, hg$r);
        let qg$r = packedChunk(wg$r);
        g$t_$r = accumulateInt(g$t_$r, x$t, wg$r, qg$r);
        if (MODE == MODE_GLU) {
          let wu$r = weights(w$r + p.N, blk, c, hu$r);
          let qu$r = packedChunk(wu$r);
          u$t_$r = accumulateInt(u$t_$r, x$t, wu$r, qu$r);
        }
      }
    }
  }
  finish(m0 + $t, n$r, g$t_$r, u$t_$r);
}
