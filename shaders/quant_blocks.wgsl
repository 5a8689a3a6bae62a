// The block decoding shared by the quantized kernels (matmul_quant.wgsl, embedding_quant.wgsl),
// prepended to each of them. It reads engine/gpu/kernels/quant_layout.ts's layout through the
// including shader's `wq_word(i)` (vec4 words) and `wd_word(i)` (u32 words) loads of the weight
// buffer (or of a texture of the same words, engine/gpu/weight_texture.ts) and its params `p.K`
// (values per row), `p.sBase` (S region, vec4 words), `p.dBase` (D region, u32 words) and `p.hBase`
// (H region, u32 words).
//
// Consts: FMT (the FMT_* codes below), BLOCK (values per block), Q_VEC4 (vec4 words of quants per
// block). A chunk of 32 weights is a·q + b per value, with q the chunk's quants (quants() below)
// and (a, b) one pair for each half of 16 values: Q8_0 (d, 0); Q4_0 (d, -8d); Q4_1, Q5_1 (d, m);
// Q5_0 (d, -16d); Q4_K, Q5_K (d·sc, -dmin·m); Q6_K (d·sc, -32·d·sc); Q3_K (d·sc, -4·d·sc, sc
// already less its offset of 32); IQ4_NL, IQ4_XS (d or d·sc, 0), whose q is the non-linear level
// of the 4-bit code rather than the code itself.

const FMT_Q8_0: u32 = 0u;
const FMT_Q4_0: u32 = 1u;
const FMT_Q4_K: u32 = 2u;
const FMT_Q6_K: u32 = 3u;
const FMT_Q4_1: u32 = 4u;
const FMT_Q5_0: u32 = 5u;
const FMT_Q5_1: u32 = 6u;
const FMT_Q5_K: u32 = 7u;
const FMT_Q3_K: u32 = 8u;
const FMT_IQ4_NL: u32 = 9u;
const FMT_IQ4_XS: u32 = 10u;

/** Formats with an S region (one vec4 of scales per block). */
fn hasS() -> bool {
  return FMT == FMT_Q4_K || FMT == FMT_Q5_K || FMT == FMT_Q6_K || FMT == FMT_Q3_K || FMT == FMT_IQ4_XS;
}

/** Q4_K and Q5_K keep d and dmin in S's last word. */
fn dInS() -> bool {
  return FMT == FMT_Q4_K || FMT == FMT_Q5_K;
}

/** Q4_1 and Q5_1 have one D word per block: (d, m). */
fn dWithMin() -> bool {
  return FMT == FMT_Q4_1 || FMT == FMT_Q5_1;
}

fn fifthBit() -> bool {
  return FMT == FMT_Q5_0 || FMT == FMT_Q5_1 || FMT == FMT_Q5_K;
}

fn iq4() -> bool {
  return FMT == FMT_IQ4_NL || FMT == FMT_IQ4_XS;
}

/** A block's scales: S (K-quants, IQ4_XS) and d (with dmin for Q4_K and Q5_K, m for Q4_1, Q5_1). */
struct Header {
  s: vec4<u32>,
  d: vec2<f32>,
}

fn header(row: u32, blk: u32) -> Header {
  return headerWith(row, blk, dPair(row, blk));
}

/**
 * The f16 d of block blk and of its pair (blocks 2i and 2i + 1 share one u32 of the D region), so a
 * kernel walking blocks in pairs loads it once: storage loads are what llvmpipe's kernels wait on.
 */
fn dPair(row: u32, blk: u32) -> vec2<f32> {
  if (dInS() || dWithMin()) {
    return vec2<f32>(0.0);
  }
  let nb = p.K / BLOCK;
  return unpack2x16float(wd_word(p.dBase + row * ((nb + 1u) / 2u) + blk / 2u));
}

/** header(row, blk) with its D word already loaded: `pair` = dPair(row, blk). */
fn headerWith(row: u32, blk: u32, pair: vec2<f32>) -> Header {
  var s = vec4<u32>(0u);
  if (hasS()) {
    s = wq_word(p.sBase + row * (p.K / BLOCK) + blk);
  }
  if (dInS()) {
    return Header(s, unpack2x16float(s.w));
  }
  if (dWithMin()) {
    return Header(s, unpack2x16float(wd_word(p.dBase + row * (p.K / BLOCK) + blk)));
  }
  return Header(s, vec2<f32>(select(pair.x, pair.y, (blk & 1u) == 1u), 0.0));
}

/** One chunk's raw quants and its (a, b) per half. */
struct WChunk {
  /** 16 bytes of nibbles (byte j: value j low, 16 + j high); Q8_0: values 0..15; Q3_K: .xy the
   *  2-bit low parts of each half (value j's at bits 2j). */
  q: vec4<u32>,
  /** Q8_0: values 16..31; Q6_K: .xy the 2-bit high parts of each half; Q5_x, Q3_K: .x the high
   *  bits (value j's at bit j). */
  h: vec4<u32>,
  a: vec2<f32>,
  b: vec2<f32>,
}

fn byteOf(s: vec4<u32>, k: u32) -> u32 {
  return (s[k >> 2u] >> ((k & 3u) * 8u)) & 0xFFu;
}

/** Q4_K sub-block j's 6-bit (scale, min), unpacked from the 12 scale bytes. */
fn scaleMinK4(s: vec4<u32>, j: u32) -> vec2<f32> {
  if (j < 4u) {
    return vec2<f32>(f32(byteOf(s, j) & 63u), f32(byteOf(s, j + 4u) & 63u));
  }
  let sc = (byteOf(s, j + 4u) & 0xFu) | ((byteOf(s, j - 4u) >> 6u) << 4u);
  let m = (byteOf(s, j + 4u) >> 4u) | ((byteOf(s, j) >> 6u) << 4u);
  return vec2<f32>(f32(sc), f32(m));
}

fn int8(b: u32) -> f32 {
  return f32(bitcast<i32>(b << 24u) >> 24u);
}

fn weights(row: u32, blk: u32, c: u32, hd: Header) -> WChunk {
  let block = row * (p.K / BLOCK) + blk;
  let base = block * Q_VEC4;
  let d = hd.d.x;
  let none = vec4<u32>(0u);
  if (FMT == FMT_Q8_0) {
    return WChunk(wq_word(base), wq_word(base + 1u), vec2<f32>(d), vec2<f32>(0.0));
  }
  if (FMT == FMT_Q4_0) {
    return WChunk(wq_word(base), none, vec2<f32>(d), vec2<f32>(-8.0 * d));
  }
  if (FMT == FMT_Q4_1) {
    return WChunk(wq_word(base), none, vec2<f32>(d), vec2<f32>(hd.d.y));
  }
  if (FMT == FMT_IQ4_NL) {
    return WChunk(wq_word(base), none, vec2<f32>(d), vec2<f32>(0.0));
  }
  if (FMT == FMT_Q5_0) {
    return WChunk(wq_word(base), vec4<u32>(wd_word(p.hBase + block), 0u, 0u, 0u), vec2<f32>(d), vec2<f32>(-16.0 * d));
  }
  if (FMT == FMT_Q5_1) {
    return WChunk(wq_word(base), vec4<u32>(wd_word(p.hBase + block), 0u, 0u, 0u), vec2<f32>(d), vec2<f32>(hd.d.y));
  }
  if (FMT == FMT_Q4_K || FMT == FMT_Q5_K) {
    let sm = scaleMinK4(hd.s, c);
    var h = none;
    if (FMT == FMT_Q5_K) {
      h.x = wq_word(base + 8u + c / 4u)[c & 3u];
    }
    return WChunk(wq_word(base + c), h, vec2<f32>(d * sm.x), vec2<f32>(-(hd.d.y * sm.y)));
  }
  if (FMT == FMT_IQ4_XS) {
    return WChunk(wq_word(base + c), none, vec2<f32>(d * int8(byteOf(hd.s, c))), vec2<f32>(0.0));
  }
  // Q6_K and Q3_K: an int8 scale per half.
  let scales = hd.s[c >> 1u] >> ((c & 1u) * 16u);
  let a = d * vec2<f32>(int8(scales & 0xFFu), int8((scales >> 8u) & 0xFFu));
  if (FMT == FMT_Q3_K) {
    let low = wq_word(base + c / 2u);
    let high = wq_word(base + 4u + c / 4u)[c & 3u];
    return WChunk(vec4<u32>(select(low.xy, low.zw, (c & 1u) == 1u), 0u, 0u), vec4<u32>(high, 0u, 0u, 0u), a, -4.0 * a);
  }
  let hi = wq_word(base + 8u + c / 2u);
  return WChunk(wq_word(base + c), vec4<u32>(select(hi.xy, hi.zw, (c & 1u) == 1u), 0u, 0u), a, -32.0 * a);
}

const LANE4 = vec4<u32>(0u, 1u, 2u, 3u);

/**
 * GGML's 16 IQ4 levels (kvalues_iq4nl: -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38,
 * 53, 69, 89, 113) as four words of int8: level q is byte q & 3 of word q >> 2. Chosen with selects
 * and a shift rather than an array index, which llvmpipe would spill to the stack.
 */
const IQ4_WORDS = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

fn iq4Levels(q: vec4<u32>) -> vec4<f32> {
  let low = select(vec4<u32>(IQ4_WORDS.x), vec4<u32>(IQ4_WORDS.y), q >= vec4<u32>(4u));
  let high = select(vec4<u32>(IQ4_WORDS.z), vec4<u32>(IQ4_WORDS.w), q >= vec4<u32>(12u));
  let word = select(low, high, q >= vec4<u32>(8u));
  return vec4<f32>(bitcast<vec4<i32>>(word << (vec4<u32>(24u) - 8u * (q & vec4<u32>(3u)))) >> vec4<u32>(24u));
}

/** Word w's 4 signed bytes. */
fn bytes4(w: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

/** The quants q of values 16·half + 4v .. + 3 of chunk w (IQ4: their levels). */
fn quants(w: WChunk, half: u32, v: u32) -> vec4<f32> {
  if (FMT == FMT_Q8_0) {
    return bytes4(select(w.q[v], w.h[v], half == 1u));
  }
  let i = LANE4 + 4u * v; // the values' index in their half
  if (FMT == FMT_Q3_K) {
    let low = (vec4<u32>(w.q[half]) >> (2u * i)) & vec4<u32>(3u);
    let high = (vec4<u32>(w.h.x) >> (i + 16u * half)) & vec4<u32>(1u);
    return vec4<f32>(low | (high << vec4<u32>(2u)));
  }
  var q = (vec4<u32>(w.q[v]) >> (8u * LANE4 + 4u * half)) & vec4<u32>(0xFu);
  if (FMT == FMT_Q6_K) {
    q |= ((vec4<u32>(w.h[half]) >> (2u * i)) & vec4<u32>(3u)) << vec4<u32>(4u);
  }
  if (fifthBit()) {
    q |= ((vec4<u32>(w.h.x) >> (i + 16u * half)) & vec4<u32>(1u)) << vec4<u32>(4u);
  }
  if (iq4()) {
    return iq4Levels(q);
  }
  return vec4<f32>(q);
}
