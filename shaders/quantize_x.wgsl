// Activations x [rows, K] (f32) to int8 blocks of 32 for the integer-dot matmul (matmul_int.wgsl),
// in the manner of GGML's Q8_1: per block a scale d = max|x| / 127, the quants q = round(x / d)
// packed four to a u32, and s = d · Σq, the block's sum as its quants hold it, which the formats
// with a min (Q4_1, Q5_1, Q4_K, Q5_K) need for their offset term. With p.norm, x is RMS-normalized
// first (x · gain / sqrt(Σx² / K + eps), as fused_norm.ts), the scale folded into d: the quants of
// x · gain are those of the normed x, so the row's sum of squares and the blocks share one pass.
//
// One workgroup per row, LANES lanes: each lane sums its vec4s' squares, the workgroup adds the lanes'
// partial sums in a fixed tree, then each lane quantizes whole blocks. A row's result depends on
// that row alone, so a batch changes no bits. W_F16: 1 when the norm's gain is f16.

struct Params {
  rows: u32,
  K: u32,
  /** 1: normalize x first, by the gain at binding 2 (else bound but never read). */
  norm: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> gain: array<W>;
/** Per block: 8 words of 4 int8 quants (value 4i + j at byte j of word i). */
@group(0) @binding(3) var<storage, read_write> xq: array<u32>;
/** Per block: (d, s). */
@group(0) @binding(4) var<storage, read_write> xs: array<vec2<f32>>;

var<workgroup> partial: array<f32, LANES>;

fn gained(row: u32, i: u32) -> vec4<f32> {
  let v = x[row * (p.K / 4u) + i];
  if (p.norm == 0u) {
    return v;
  }
  let k = 4u * i;
  return v * vec4<f32>(f32(gain[k]), f32(gain[k + 1u]), f32(gain[k + 2u]), f32(gain[k + 3u]));
}

@compute @workgroup_size(LANES)
fn quantizeX(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let row = wg.x;
  let nb = p.K / 32u;
  var scale = 1.0;
  if (p.norm != 0u) {
    var sq = vec4<f32>(0.0);
    for (var i = lid.x; i < p.K / 4u; i += LANES) {
      let v = x[row * (p.K / 4u) + i];
      sq = fma(v, v, sq);
    }
    partial[lid.x] = (sq.x + sq.y) + (sq.z + sq.w);
    workgroupBarrier();
    for (var half = LANES / 2u; half > 0u; half /= 2u) {
      if (lid.x < half) {
        partial[lid.x] += partial[lid.x + half];
      }
      workgroupBarrier();
    }
    scale = 1.0 / sqrt(partial[0] / f32(p.K) + p.eps);
  }
  for (var b = lid.x; b < nb; b += LANES) {
    let v0 = gained(row, 8u * b);
    let v1 = gained(row, 8u * b + 1u);
    let v2 = gained(row, 8u * b + 2u);
    let v3 = gained(row, 8u * b + 3u);
    let v4 = gained(row, 8u * b + 4u);
    let v5 = gained(row, 8u * b + 5u);
    let v6 = gained(row, 8u * b + 6u);
    let v7 = gained(row, 8u * b + 7u);
    let m = max(max(max(abs(v0), abs(v1)), max(abs(v2), abs(v3))),
                max(max(abs(v4), abs(v5)), max(abs(v6), abs(v7))));
    let amax = max(max(m.x, m.y), max(m.z, m.w));
    // An all-zero block keeps q = 0 and d = 0 (no division by zero).
    let inv = select(0.0, 127.0 / amax, amax > 0.0);
    let q0 = vec4<i32>(round(v0 * inv));
    let q1 = vec4<i32>(round(v1 * inv));
    let q2 = vec4<i32>(round(v2 * inv));
    let q3 = vec4<i32>(round(v3 * inv));
    let q4 = vec4<i32>(round(v4 * inv));
    let q5 = vec4<i32>(round(v5 * inv));
    let q6 = vec4<i32>(round(v6 * inv));
    let q7 = vec4<i32>(round(v7 * inv));
    let o = (row * nb + b) * 8u;
    xq[o] = pack4xI8(q0);
    xq[o + 1u] = pack4xI8(q1);
    xq[o + 2u] = pack4xI8(q2);
    xq[o + 3u] = pack4xI8(q3);
    xq[o + 4u] = pack4xI8(q4);
    xq[o + 5u] = pack4xI8(q5);
    xq[o + 6u] = pack4xI8(q6);
    xq[o + 7u] = pack4xI8(q7);
    let total = ((q0 + q1) + (q2 + q3)) + ((q4 + q5) + (q6 + q7));
    let d = (amax / 127.0) * scale;
    xs[row * nb + b] = vec2<f32>(d, d * f32((total.x + total.y) + (total.z + total.w)));
  }
}
