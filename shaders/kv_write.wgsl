// Copies each row's K and V heads from the fused qkv activations into the paged KV cache of one layer.
// qkv row m is [q (numHeads*headDim) | k (numKvHeads*headDim) | v (numKvHeads*headDim)], f32;
// the cache is [numBlocks, blockSize, numKvHeads, headDim] of KV. Works in vec4s (headDim % 4 == 0).

struct Params {
  rows: u32,
  layer: u32,
  numHeads: u32,
  numKvHeads: u32,
  headDim: u32,
  blockSize: u32,
  maxSlots: u32,
  maxBlocksPerSeq: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> kCache: array<vec4<KV>>;
@group(0) @binding(3) var<storage, read_write> vCache: array<vec4<KV>>;
@group(0) @binding(4) var<storage, read> blockTable: array<u32>;
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(6) var<storage, read> rowPos: array<u32>;

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

  for (var e = lid; e < kvVec4; e += WG) {
    kCache[dst + e] = vec4<KV>(qkv[kSrc + e]);
    vCache[dst + e] = vec4<KV>(qkv[vSrc + e]);
  }
}
