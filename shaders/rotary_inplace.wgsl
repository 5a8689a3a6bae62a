// Rotary position embedding applied in place to the q and k heads of fused qkv rows (NomicBERT:
// an encoder reads every key of its input once per query, so rotating them once up front is
// cheaper than rotating in the attention's loads as the decoder's kernels do). Hugging Face's
// rotate_half order over the first ROT_DIM dims of each head: for i < ROT_DIM/2,
// (a, b) = (x[i], x[i + ROT_DIM/2]) becomes (a cos θ − b sin θ, b cos θ + a sin θ); the table
// holds cos θ and sin θ per (position, i), computed on the host in float64.
// qkv f32 [rows, 3·heads·HEAD_DIM]: q heads, then k heads, then v heads.

struct Params {
  rows: u32,
  heads: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
/** u32 [rows]: each row's position. */
@group(0) @binding(2) var<storage, read> positions: array<u32>;
/** f32 [positions, ROT_DIM/2, 2]: (cos θ, sin θ). */
@group(0) @binding(3) var<storage, read> cosSin: array<vec2<f32>>;

const LANES: u32 = 64u;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let m = wg.x;
  let half = ROT_DIM / 2u;
  let width = 3u * p.heads * HEAD_DIM;
  let pos = positions[m];
  // Pairs of q and k together: 2 · heads · half of them.
  let pairs = 2u * p.heads * half;
  for (var j = lid.x; j < pairs; j += LANES) {
    let head = j / half; // 0..2·heads-1: q heads, then k heads
    let i = j % half;
    let at = m * width + head * HEAD_DIM + i;
    let cs = cosSin[pos * half + i];
    let a = qkv[at];
    let b = qkv[at + half];
    qkv[at] = a * cs.x - b * cs.y;
    qkv[at + half] = b * cs.x + a * cs.y;
  }
}
