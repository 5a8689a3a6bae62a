// kv_write.wgsl for a q8_0 KV cache: quantizes each row's K and V heads from the fused qkv
// activations into one layer's paged cache, in groups of 32 values along the head dim with one f16
// scale each (the layout is engine/kv/kv_format.ts's): d = max|x| / 127 rounded to f16, q =
// round(x / d) in -127..127, so that q * d is what attention reads back. K values are rotated by
// the row's position (RoPE, rope_rotation.wgsl, appended) before they are quantized, as if a RoPE
// pass had rotated qkv first: the cache holds post-RoPE keys. RoPE's per-layer options (ropeHalf4,
// ropeScale) as in kv_write.wgsl.
//
// Shader consts: HD (head dim, multiple of 32); SW, scale words per (position, head) row.
// One workgroup per row; each invocation takes one scale word of K or V (two groups, 64 values):
// it writes the word and the quants of its groups, so no two invocations share a word.

struct Params {
  rows: u32,
  layer: u32,
  numHeads: u32,
  numKvHeads: u32,
  headDim: u32,
  blockSize: u32,
  maxSlots: u32,
  maxBlocksPerSeq: u32,
  ropeHalf4: u32,
  ropeScale: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> kCache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> vCache: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> blockTable: array<u32>;
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(6) var<storage, read> rowPos: array<u32>;
// f32 [ropeHalf4 * 4]: RoPE's inverse frequencies.
@group(0) @binding(7) var<storage, read> invFreq: array<vec4<f32>>;

const WG: u32 = 64u;
const GROUPS: u32 = HD / 32u;
// vec4<u32> of quants per (position, head) row: 16 int8 values each.
const ROW_V4: u32 = HD / 16u;

struct Group {
  // 32 int8 values in 8 u32 words.
  lo: vec4<u32>,
  hi: vec4<u32>,
  // The scale's f16 bits (a NaN where a value is not finite, so a NaN in K or V is never lost).
  scaleBits: u32,
}

// Packs four values, already in -127..127, into one little-endian word of int8s.
fn pack4(q: vec4<f32>) -> u32 {
  let b = bitcast<vec4<u32>>(vec4<i32>(q)) & vec4<u32>(0xffu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// The four values at qkv vec4 `src`, vec4 `d` of its head, rotated by RoPE at `pos` when `rotate`
// and d is among the turned vec4s (a value's partner is `ropeHalf` vec4s away).
fn loadValues(src: u32, d: u32, rotate: bool, pos: u32) -> vec4<f32> {
  let x = qkv[src];
  let ropeHalf = params.ropeHalf4;
  if (!rotate || d >= 2u * ropeHalf) { return x; }
  let upper = d >= ropeHalf;
  let partner = qkv[select(src + ropeHalf, src - ropeHalf, upper)];
  let turn = ropeTurn(pos, invFreq[select(d, d - ropeHalf, upper)]);
  return ropeRotate(x, partner, turn, upper) * params.ropeScale;
}

// Quantizes the 32 values at qkv vec4 `src`, vec4 `d0` of its head (K rotated first: `rotate`).
fn quantize(src: u32, d0: u32, rotate: bool, pos: u32) -> Group {
  var x: array<vec4<f32>, 8>;
  var amax = vec4<f32>(0.0);
  var nonFinite = false;
  for (var i = 0u; i < 8u; i++) {
    x[i] = loadValues(src + i, d0 + i, rotate, pos);
    amax = max(amax, abs(x[i]));
    // By the bits: a float compare with NaN may be folded away.
    nonFinite = nonFinite || any((bitcast<vec4<u32>>(x[i]) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u));
  }
  let m = max(max(amax.x, amax.y), max(amax.z, amax.w));
  // The scale as stored (f16), so quantizing and reading back use the same d.
  let bits = pack2x16float(vec2<f32>(m / 127.0, 0.0)) & 0xffffu;
  let d = unpack2x16float(bits).x;
  let inv = select(0.0, 1.0 / d, d > 0.0);
  var w: array<u32, 8>;
  for (var i = 0u; i < 8u; i++) {
    w[i] = pack4(clamp(round(x[i] * inv), vec4<f32>(-127.0), vec4<f32>(127.0)));
  }
  return Group(vec4<u32>(w[0], w[1], w[2], w[3]), vec4<u32>(w[4], w[5], w[6], w[7]),
               select(bits, 0x7e00u, nonFinite));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x;
  if (m >= params.rows) { return; }
  let H = params.numKvHeads;
  let rowVec4 = (params.numHeads + 2u * H) * HD / 4u;
  let kSrc = m * rowVec4 + params.numHeads * HD / 4u;

  let slot = rowSlot[m];
  let pos = rowPos[m];
  let block = blockTable[(params.layer * params.maxSlots + slot) * params.maxBlocksPerSeq + pos / params.blockSize];
  let rowsPerBlock = params.blockSize * H;
  let quantV4 = rowsPerBlock * ROW_V4;
  let blockV4 = quantV4 + (rowsPerBlock * SW + 3u) / 4u;
  // This position's first (position, head) row within its block.
  let row0 = (pos % params.blockSize) * H;

  // Items: (cache, head, scale word); cache 0 is K, 1 is V.
  for (var it = lid; it < 2u * H * SW; it += WG) {
    let isV = it >= H * SW;
    let hw = it % (H * SW);
    let head = hw / SW;
    let word = hw % SW;
    let g0 = 2u * word;
    let src = kSrc + select(0u, H * HD / 4u, isV) + head * HD / 4u + g0 * 8u;
    let q0Dst = block * blockV4 + (row0 + head) * ROW_V4 + g0 * 2u;
    let a = quantize(src, g0 * 8u, !isV, pos);
    var scales = a.scaleBits;
    if (isV) {
      vCache[q0Dst] = a.lo;
      vCache[q0Dst + 1u] = a.hi;
    } else {
      kCache[q0Dst] = a.lo;
      kCache[q0Dst + 1u] = a.hi;
    }
    if (g0 + 1u < GROUPS) {
      let b = quantize(src + 8u, g0 * 8u + 8u, !isV, pos);
      scales |= b.scaleBits << 16u;
      if (isV) {
        vCache[q0Dst + 2u] = b.lo;
        vCache[q0Dst + 3u] = b.hi;
      } else {
        kCache[q0Dst + 2u] = b.lo;
        kCache[q0Dst + 3u] = b.hi;
      }
    }
    // The scale word, one u32 lane of a vec4 of the block's scale region.
    let s = (block * blockV4 + quantV4) * 4u + (row0 + head) * SW + word;
    if (isV) { vCache[s / 4u][s % 4u] = scales; } else { kCache[s / 4u][s % 4u] = scales; }
  }
}
