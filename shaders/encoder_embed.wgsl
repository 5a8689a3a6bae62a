// An encoder's input embedding: x[m, :] = word[id, :] + position[pos, :] + tokenType[type, :] for
// each row m < rows, with (id, pos, type) = rows3[3m .. 3m+2] written by the host (positions count
// from each input's start, plus XLM-R's offset). x f32 [rows, D]; the tables of W [n, D]. The
// embeddings' LayerNorm follows as its own dispatch (layer_norm.wgsl).
//
// Consts: HAS_POS (learned absolute positions; 0 for rotary models), HAS_TYPE (token types).

struct Params {
  rows: u32,
  D: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows3: array<u32>;
@group(0) @binding(2) var<storage, read> word: array<W>;
@group(0) @binding(3) var<storage, read> position: array<W>;
@group(0) @binding(4) var<storage, read> tokenType: array<W>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

const LANES: u32 = 64u;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let id = rows3[3u * m];
  let pos = rows3[3u * m + 1u];
  let tt = rows3[3u * m + 2u];
  for (var i = lid.x; i < p.D; i += LANES) {
    var v = f32(word[id * p.D + i]);
    if (HAS_POS == 1u) {
      v += f32(position[pos * p.D + i]);
    }
    if (HAS_TYPE == 1u) {
      v += f32(tokenType[tt * p.D + i]);
    }
    x[m * p.D + i] = v;
  }
}
