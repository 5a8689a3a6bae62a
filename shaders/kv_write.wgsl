// Copies each row's K and V heads from the fused qkv activations into the paged KV cache of one
// layer, each K head rotated by the row's position on the way (RoPE, rope_rotation.wgsl, appended),
// so the cache holds post-RoPE keys and no pass rotates qkv in place.
// qkv row m is [q (numHeads*headDim) | k (numKvHeads*headDim) | v (numKvHeads*headDim)], f32;
// the cache is [numBlocks, blockSize, numKvHeads, headDim] of KV. Works in vec4s (headDim % 8 == 0,
// so a vec4's rotation partners are one vec4 headDim/2 away).
// Per layer: RoPE turns only the first 8 * ropeHalf4 values of a head (partial rotary, Phi-4-mini;
// pairs i and i + 4 * ropeHalf4), none on a layer without RoPE (ropeHalf4 = 0, SmolLM3), and the
// turned values are scaled by ropeScale (LongRoPE's attention factor; else 1, which is exact).

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
@group(0) @binding(2) var<storage, read_write> kCache: array<vec4<KV>>;
@group(0) @binding(3) var<storage, read_write> vCache: array<vec4<KV>>;
@group(0) @binding(4) var<storage, read> blockTable: array<u32>;
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(6) var<storage, read> rowPos: array<u32>;
// f32 [ropeHalf4 * 4]: RoPE's inverse frequencies.
@group(0) @binding(7) var<storage, read> invFreq: array<vec4<f32>>;

const WG: u32 = 64u;

// One workgroup per row; invocations stride over the row's K and V vec4s.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x;
  if (m >= params.rows) { return; }
  let kvVec4 = params.numKvHeads * params.headDim / 4u;
  let rowVec4 = (params.numHeads + 2u * params.numKvHeads) * params.headDim / 4u;
  let kSrc = m * rowVec4 + params.numHeads * params.headDim / 4u;
  let vSrc = kSrc + kvVec4;

  let slot = rowSlot[m];
  let pos = rowPos[m];
  let block = blockTable[(params.layer * params.maxSlots + slot) * params.maxBlocksPerSeq + pos / params.blockSize];
  let dst = (block * params.blockSize + pos % params.blockSize) * kvVec4;

  let headVec4 = params.headDim / 4u;
  let halfVec4 = params.ropeHalf4;
  for (var e = lid; e < kvVec4; e += WG) {
    let d = e % headVec4;
    var k = qkv[kSrc + e];
    if (d < 2u * halfVec4) {
      let upper = d >= halfVec4;
      let partner = select(e + halfVec4, e - halfVec4, upper);
      let turn = ropeTurn(pos, invFreq[select(d, d - halfVec4, upper)]);
      k = ropeRotate(k, qkv[kSrc + partner], turn, upper) * params.ropeScale;
    }
    kCache[dst + e] = vec4<KV>(k);
    vCache[dst + e] = vec4<KV>(qkv[vSrc + e]);
  }
}
