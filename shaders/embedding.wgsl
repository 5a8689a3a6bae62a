// Token embedding lookup for one row-part of the embedding table.
//
// Row m's token id is tokens[m], or, when that is 0xFFFFFFFF (a decode row), nextIds[rowSlot[m]]:
// the id the GPU sampler wrote last step, so decode never waits for the host. If the id falls in
// this part's rows [rowStart, rowStart + rowCount), y[m, :] = f32(table[id - rowStart, :]) * scale
// (1, or Gemma's √hidden); other parts (one kernel each) write the rows they hold.
//
// Consts: W_F16 (1 when the table holds f16 values).

struct Params {
  rows: u32,
  D: u32,
  rowStart: u32,
  rowCount: u32,
  scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(3) var<storage, read> nextIds: array<u32>;

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

// ---- vector path (D % 4 == 0) -------------------------------------------------------------------

@group(0) @binding(4) var<storage, read> tableV: array<vec4<W>>;
@group(0) @binding(5) var<storage, read_write> yV: array<vec4<f32>>;

// One workgroup per row; lanes stride over the row's vec4s.
@compute @workgroup_size(LANES)
fn embeddingVec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let local = localRow(m);
  if (local < 0) {
    return;
  }
  let n4 = p.D / 4u;
  let src = u32(local) * n4;
  for (var i = lid.x; i < n4; i += LANES) {
    yV[m * n4 + i] = vec4<f32>(tableV[src + i]) * p.scale;
  }
}

// ---- scalar path (any D) --------------------------------------------------------------------------

@group(0) @binding(4) var<storage, read> tableS: array<W>;
@group(0) @binding(5) var<storage, read_write> yS: array<f32>;

@compute @workgroup_size(LANES)
fn embeddingScalar(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let local = localRow(m);
  if (local < 0) {
    return;
  }
  let src = u32(local) * p.D;
  for (var i = lid.x; i < p.D; i += LANES) {
    yS[m * p.D + i] = f32(tableS[src + i]) * p.scale;
  }
}

// ---- word path (D % 8 == 0): the table as 16-byte words, which embedding.ts may swap for a weight
// texture of the same words (engine/gpu/weight_texture.ts) -----------------------------------------

@group(0) @binding(4) var<storage, read> tableW: array<vec4<u32>>;
fn tableW_word(i: u32) -> vec4<u32> { return tableW[i]; }

@compute @workgroup_size(LANES)
fn embeddingWords(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let local = localRow(m);
  if (local < 0) {
    return;
  }
  // Lanes stride over the row's 8-value steps: one word of f16 values, two of f32.
  let n8 = p.D / 8u;
  let out = m * (p.D / 4u);
  for (var i = lid.x; i < n8; i += LANES) {
    if (W_F16 == 1u) {
      let q = tableW_word(u32(local) * n8 + i);
      yV[out + 2u * i] = vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)) * p.scale;
      yV[out + 2u * i + 1u] = vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)) * p.scale;
    } else {
      let j = u32(local) * (p.D / 4u) + 2u * i;
      yV[out + 2u * i] = bitcast<vec4<f32>>(tableW_word(j)) * p.scale;
      yV[out + 2u * i + 1u] = bitcast<vec4<f32>>(tableW_word(j + 1u)) * p.scale;
    }
  }
}
