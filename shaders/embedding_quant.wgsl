// Token embedding lookup from one row-part of a block-quantized table (quant_blocks.wgsl is
// prepended): embedding.wgsl's contract, with each 32-value chunk dequantized on the way.
//
// Values are decoded with GGML's f32 arithmetic, so y holds exactly what the CPU dequantizer gives:
// d·q and d·sc are exact products of small integers and f16 values (a·q + b then rounds once, as
// GGML's d·q + m does), and Q6_K and Q3_K take (d·sc)·(q - offset) as GGML does, not a·q + b, whose
// product a·q could round.

struct Params {
  rows: u32,
  /** D: values per row. */
  K: u32,
  rowStart: u32,
  rowCount: u32,
  sBase: u32,
  dBase: u32,
  hBase: u32,
  /** What each value is multiplied by (embedding.wgsl's scale). */
  scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(3) var<storage, read> nextIds: array<u32>;
@group(0) @binding(4) var<storage, read> wq: array<vec4<u32>>;
fn wq_word(i: u32) -> vec4<u32> { return wq[i]; }
@group(0) @binding(5) var<storage, read> wd: array<u32>;
fn wd_word(i: u32) -> u32 { return wd[i]; }
@group(0) @binding(6) var<storage, read_write> y: array<vec4<f32>>;

const LANES: u32 = 64u;
const FROM_SAMPLER: u32 = 0xFFFFFFFFu;

/** Row m's id relative to this part, or -1 when another part holds it. */
fn localRow(m: u32) -> i32 {
  var id = tokens[m];
  if (id == FROM_SAMPLER) {
    id = nextIds[rowSlot[m]];
  }
  if (id < p.rowStart || id - p.rowStart >= p.rowCount) {
    return -1;
  }
  return i32(id - p.rowStart);
}

/** Values 16·half + 4v .. + 3 of chunk w. */
fn values4(w: WChunk, half: u32, v: u32) -> vec4<f32> {
  let q = quants(w, half, v);
  let a = w.a[half];
  if (FMT == FMT_Q6_K) {
    return a * (q - 32.0);
  }
  if (FMT == FMT_Q3_K) {
    return a * (q - 4.0);
  }
  if (FMT == FMT_Q8_0 || iq4()) {
    return a * q;
  }
  return a * q + w.b[half];
}

// One workgroup per row; lanes stride over the row's 32-value chunks.
@compute @workgroup_size(LANES)
fn embeddingQuant(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let local = localRow(m);
  if (local < 0) {
    return;
  }
  let row = u32(local);
  let chunks = BLOCK / 32u;
  for (var c = lid.x; c < p.K / 32u; c += LANES) {
    let blk = c / chunks;
    let w = weights(row, blk, c % chunks, header(row, blk));
    let o = (m * p.K + 32u * c) / 4u;
    for (var v = 0u; v < 4u; v++) {
      y[o + v] = values4(w, 0u, v) * p.scale;
      y[o + 4u + v] = values4(w, 1u, v) * p.scale;
    }
  }
}
