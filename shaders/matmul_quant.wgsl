// y = x · Wᵀ with W block-quantized (any of quant_blocks.wgsl's formats, in
// engine/gpu/kernels/quant_layout.ts's repacked layout), dequantized in registers, accumulated in
// f32. Modes as in matmul.wgsl.
//
// Consts: LANES, TILE_ROWS, OUTS (outputs per lane), MODE (0 store or add, 2 SwiGLU with gate rows
// 0..N-1 then up rows N..2N-1), CHUNKS (32-value chunks per block), and quant_blocks.wgsl's. Store
// and add differ only in the last write, so a uniform (p.add) chooses between them: one pipeline
// serves both, where a const would make llvmpipe compile the whole unrolled tile twice; so does a
// norm fused into the x loads (p.norm, as matmul.wgsl's NORM; engine/gpu/kernels/fused_norm.ts):
// the q/k/v projection (store with the norm) and o (add without) share one tile. W_F16: 1 when the
// norm's gain is f16.
// `$t` / `$r` lines are unrolled per tile row / per output, as in matmul.wgsl.
//
// The block decoding (quant_blocks.wgsl, prepended) gives each chunk of 32 weights as a·q + b per
// value, one (a, b) for each half of 16 values. So Σ x·w = a·Σ x·q + b·Σ x per half: the offset
// needs only the sum of x, computed once per tile row and shared by all outputs, and no weight is
// ever converted to a float twice. Each output is
// one chain over chunks in k order whatever the tile, so results are batch invariant.
//
// With p.norm, each tile row's x chunk is multiplied by the gain as it is loaded (its half sums taken
// after), the raw x's squares summed in matmul.wgsl's order (four interleaved sums, one vec4 at a time
// along the row), and each output scaled by 1 / sqrt(Σx² / K + eps) before it is written.

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
  /** 1: x is RMS-normalized on the way in, by the gain at binding 5 (else bound but never read). */
  norm: u32,
  /** The fused norm's epsilon (p.norm only). */
  eps: f32,
  /** GLU's gate activation: 0 SiLU, 1 GELU's tanh approximation (matmul.wgsl's gate4). */
  gelu: u32,
}

const MODE_GLU: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
// x: a storage buffer, or (matmul_quant.ts swaps this line where x fits) a uniform buffer of
// X_VEC4 vec4 words. On llvmpipe a storage load is a loop over the 8 lanes that goes through the
// stack (a stalled store-to-load forward per 4 bytes), while a uniform load with a varying offset
// is one AVX2 gather; at one row every lane reads all of x, so x costs as much as the weights.
@group(0) @binding(1) var<storage, read> xv: array<vec4<f32>>;
// The weight buffer twice: as vec4 words (Q and S regions) and as u32 words (the D region).
@group(0) @binding(2) var<storage, read> wq: array<vec4<u32>>;
fn wq_word(i: u32) -> vec4<u32> { return wq[i]; }
@group(0) @binding(3) var<storage, read> wd: array<u32>;
fn wd_word(i: u32) -> u32 { return wd[i]; }
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

/** 32 consecutive x values and the sums of their two halves. */
struct XChunk {
  v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
  v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32>,
  sums: vec2<f32>,
}

fn loadX(row: u32, chunk: u32) -> XChunk {
  let i = row * (p.K / 4u) + chunk * 8u;
  let v0 = xv[i];
  let v1 = xv[i + 1u];
  let v2 = xv[i + 2u];
  let v3 = xv[i + 3u];
  let v4 = xv[i + 4u];
  let v5 = xv[i + 5u];
  let v6 = xv[i + 6u];
  let v7 = xv[i + 7u];
  let one = vec4<f32>(1.0);
  let sums = vec2<f32>(dot((v0 + v1) + (v2 + v3), one), dot((v4 + v5) + (v6 + v7), one));
  return XChunk(v0, v1, v2, v3, v4, v5, v6, v7, sums);
}

// The norm's gain, 32 values per chunk in an XChunk, read as 16-byte words: 4 loads per chunk
// where W = f16 (W_F16), 8 where f32.
@group(0) @binding(5) var<storage, read> gq: array<vec4<u32>>;
fn gainChunk(chunk: u32) -> XChunk {
  if (W_F16 == 1u) {
    let i = chunk * 4u;
    let a = gq[i];
    let b = gq[i + 1u];
    let c = gq[i + 2u];
    let d = gq[i + 3u];
    return XChunk(vec4<f32>(unpack2x16float(a.x), unpack2x16float(a.y)), vec4<f32>(unpack2x16float(a.z), unpack2x16float(a.w)),
                  vec4<f32>(unpack2x16float(b.x), unpack2x16float(b.y)), vec4<f32>(unpack2x16float(b.z), unpack2x16float(b.w)),
                  vec4<f32>(unpack2x16float(c.x), unpack2x16float(c.y)), vec4<f32>(unpack2x16float(c.z), unpack2x16float(c.w)),
                  vec4<f32>(unpack2x16float(d.x), unpack2x16float(d.y)), vec4<f32>(unpack2x16float(d.z), unpack2x16float(d.w)),
                  vec2<f32>(0.0));
  }
  let i = chunk * 8u;
  return XChunk(bitcast<vec4<f32>>(gq[i]), bitcast<vec4<f32>>(gq[i + 1u]), bitcast<vec4<f32>>(gq[i + 2u]), bitcast<vec4<f32>>(gq[i + 3u]),
                bitcast<vec4<f32>>(gq[i + 4u]), bitcast<vec4<f32>>(gq[i + 5u]), bitcast<vec4<f32>>(gq[i + 6u]), bitcast<vec4<f32>>(gq[i + 7u]),
                vec2<f32>(0.0));
}

/** sq + the squares of x's 32 values, one vec4 at a time (matmul.wgsl's order). */
fn squares(sq: vec4<f32>, x: XChunk) -> vec4<f32> {
  var s = fma(x.v0, x.v0, sq);
  s = fma(x.v1, x.v1, s);
  s = fma(x.v2, x.v2, s);
  s = fma(x.v3, x.v3, s);
  s = fma(x.v4, x.v4, s);
  s = fma(x.v5, x.v5, s);
  s = fma(x.v6, x.v6, s);
  return fma(x.v7, x.v7, s);
}

/** x times the gain, with the sums of its halves taken as loadX takes them. */
fn gained(x: XChunk, g: XChunk) -> XChunk {
  let v0 = x.v0 * g.v0;
  let v1 = x.v1 * g.v1;
  let v2 = x.v2 * g.v2;
  let v3 = x.v3 * g.v3;
  let v4 = x.v4 * g.v4;
  let v5 = x.v5 * g.v5;
  let v6 = x.v6 * g.v6;
  let v7 = x.v7 * g.v7;
  let one = vec4<f32>(1.0);
  let sums = vec2<f32>(dot((v0 + v1) + (v2 + v3), one), dot((v4 + v5) + (v6 + v7), one));
  return XChunk(v0, v1, v2, v3, v4, v5, v6, v7, sums);
}

/** A row's norm scale from its four partial sums of squares (1 without the norm), as matmul.wgsl. */
fn normScale4(sq: vec4<f32>) -> f32 {
  if (p.norm == 0u) {
    return 1.0;
  }
  return 1.0 / sqrt((sq.x + sq.y + sq.z + sq.w) / f32(p.K) + p.eps);
}

/** acc + this chunk's Σ x·w. */
fn accumulate(acc: f32, x: XChunk, w: WChunk) -> f32 {
  let lo = dot(x.v0, quants(w, 0u, 0u)) + dot(x.v1, quants(w, 0u, 1u))
         + dot(x.v2, quants(w, 0u, 2u)) + dot(x.v3, quants(w, 0u, 3u));
  let hi = dot(x.v4, quants(w, 1u, 0u)) + dot(x.v5, quants(w, 1u, 1u))
         + dot(x.v6, quants(w, 1u, 2u)) + dot(x.v7, quants(w, 1u, 3u));
  if (FMT == FMT_Q8_0 || iq4()) {
    // No offset (b = 0).
    return fma(w.a.y, hi, fma(w.a.x, lo, acc));
  }
  return fma(w.a.y, hi, fma(w.b.y, x.sums.y, fma(w.a.x, lo, fma(w.b.x, x.sums.x, acc))));
}

// The GLU's gate (activations.wgsl).
fn gate(v: f32) -> f32 {
  if (p.gelu != 0u) {
    return geluTanh(v);
  }
  return silu(v);
}

fn finish(m: u32, n: u32, g: f32, u: f32) {
  if (m >= p.rows || n >= p.N) {
    return;
  }
  let i = m * p.ldy + p.yCol + n;
  if (MODE == MODE_GLU) {
    y[i] = gate(g) * u;
  } else if (p.add != 0u) {
    y[i] = y[i] + g;
  } else {
    y[i] = g;
  }
}

@compute @workgroup_size(LANES)
fn matmulQuant(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m0 = wg.y * TILE_ROWS;
  let nb = p.K / BLOCK;
  // Output r of this lane; outputs past N compute on the last row and store nothing.
  let n$r = wg.x * (LANES * OUTS) + $r * LANES + lid.x;
  let w$r = min(n$r, p.N - 1u);
  let xRow$t = min(m0 + $t, p.rows - 1u);
  var g$t_$r = 0.0;
  var u$t_$r = 0.0;
  var sq$t = vec4<f32>(0.0);
  // Blocks in pairs, so that each pair's D word (both blocks' d) is loaded once: 1.2x faster for
  // Q4_0 on llvmpipe, where every storage load costs the same whatever it carries.
  for (var bp = 0u; bp < nb; bp += 2u) {
    let dg$r = dPair(w$r, bp);
    var du$r = vec2<f32>(0.0);
    if (MODE == MODE_GLU) { du$r = dPair(w$r + p.N, bp); }
    for (var blk = bp; blk < min(bp + 2u, nb); blk++) {
      let hg$r = headerWith(w$r, blk, dg$r);
      var hu$r: Header;
      if (MODE == MODE_GLU) { hu$r = headerWith(w$r + p.N, blk, du$r); }
      for (var c = 0u; c < CHUNKS; c++) {
        var x$t = loadX(xRow$t, blk * CHUNKS + c);
        if (p.norm != 0u) {
          let gain = gainChunk(blk * CHUNKS + c);
          sq$t = squares(sq$t, x$t);
          x$t = gained(x$t, gain);
        }
        let wg$r = weights(w$r, blk, c, hg$r);
        g$t_$r = accumulate(g$t_$r, x$t, wg$r);
        var wu$r: WChunk;
        if (MODE == MODE_GLU) { wu$r = weights(w$r + p.N, blk, c, hu$r); }
        if (MODE == MODE_GLU) { u$t_$r = accumulate(u$t_$r, x$t, wu$r); }
      }
    }
  }
  let scale$t = normScale4(sq$t);
  finish(m0 + $t, n$r, g$t_$r * scale$t, u$t_$r * scale$t);
}
