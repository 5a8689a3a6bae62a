// The block decoding shared by the quantized kernels (matmul_quant.wgsl, embedding_quant.wgsl),
// prepended to each of them. It reads engine/gpu/kernels/quant_layout.ts's layout through the
// including shader's `wq_word(i)` (vec4 words) and `wd_word(i)` (u32 words) loads of the weight
// buffer (or of a texture of the same words, engine/gpu/weight_texture.ts) and its params `p.K`
// (values per row), `p.sBase` (S region, vec4 words) and `p.dBase` (D region, u32 words).
//
// Consts: FMT (0 q8_0, 1 q4_0, 2 q4_k, 3 q6_k), BLOCK (values per block), Q_VEC4 (vec4 words of
// quants per block). A chunk of 32 weights is a·q + b per value, with q the raw quant and (a, b) one
// pair for each half of 16 values: Q8_0 (d, 0); Q4_0 (d, -8d); Q4_K (d·sc, -dmin·m); Q6_K (d·sc,
// -32·d·sc).

const FMT_Q8_0: u32 = 0u;
const FMT_Q4_0: u32 = 1u;
const FMT_Q4_K: u32 = 2u;
const FMT_Q6_K: u32 = 3u;

/** A block's scales: S (K-quants) and d (with dmin for Q4_K). */
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
  if (FMT == FMT_Q4_K) {
    return vec2<f32>(0.0);
  }
  let nb = p.K / BLOCK;
  return unpack2x16float(wd_word(p.dBase + row * ((nb + 1u) / 2u) + blk / 2u));
}

/** header(row, blk) with its D word already loaded: `pair` = dPair(row, blk). */
fn headerWith(row: u32, blk: u32, pair: vec2<f32>) -> Header {
  var s = vec4<u32>(0u);
  if (FMT == FMT_Q4_K || FMT == FMT_Q6_K) {
    s = wq_word(p.sBase + row * (p.K / BLOCK) + blk);
  }
  if (FMT == FMT_Q4_K) {
    return Header(s, unpack2x16float(s.w));
  }
  return Header(s, vec2<f32>(select(pair.x, pair.y, (blk & 1u) == 1u), 0.0));
}

/** One chunk's raw quants and its (a, b) per half. */
struct WChunk {
  q: vec4<u32>,
  /** Q8_0: values 16..31; Q6_K: .xy the 2-bit high parts. */
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
  let base = (row * (p.K / BLOCK) + blk) * Q_VEC4;
  if (FMT == FMT_Q8_0) {
    return WChunk(wq_word(base), wq_word(base + 1u), vec2<f32>(hd.d.x), vec2<f32>(0.0));
  }
  if (FMT == FMT_Q4_0) {
    return WChunk(wq_word(base), vec4<u32>(0u), vec2<f32>(hd.d.x), vec2<f32>(-8.0 * hd.d.x));
  }
  if (FMT == FMT_Q4_K) {
    let sm = scaleMinK4(hd.s, c);
    return WChunk(wq_word(base + c), vec4<u32>(0u), vec2<f32>(hd.d.x * sm.x), vec2<f32>(-(hd.d.y * sm.y)));
  }
  let hi = wq_word(base + 8u + c / 2u);
  let scales = hd.s[c >> 1u] >> ((c & 1u) * 16u);
  let a = hd.d.x * vec2<f32>(int8(scales & 0xFFu), int8((scales >> 8u) & 0xFFu));
  return WChunk(wq_word(base + c), vec4<u32>(select(hi.xy, hi.zw, (c & 1u) == 1u), 0u, 0u), a, -32.0 * a);
}

/** Word w's 4 nibbles at `shift` (0: values 4v.., 4: values 16 + 4v..), with Q6_K's high bits. */
fn quant4(w: u32, shift: u32, h: u32, v: u32) -> vec4<f32> {
  var q = (vec4<u32>(w) >> (vec4<u32>(0u, 8u, 16u, 24u) + shift)) & vec4<u32>(0xFu);
  if (FMT == FMT_Q6_K) {
    q |= ((vec4<u32>(h) >> (vec4<u32>(0u, 2u, 4u, 6u) + 8u * v)) & vec4<u32>(3u)) << vec4<u32>(4u);
  }
  return vec4<f32>(q);
}

/** Word w's 4 signed bytes. */
fn bytes4(w: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
