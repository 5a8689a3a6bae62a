// Greedy sampling, pass 1 of 2: each workgroup finds the best logit of one chunk of one row, so a
// 49,152-token row's argmax is spread over many workgroups instead of one workgroup's loop.
//
// Dispatched as (G, rows): workgroup (g, s) covers aligned vec4s [vBegin + g·CHUNK, +CHUNK) of row
// s of logits f32 [rows, V] and writes partials[s·G + g] = (key, id) of its best logit, in the
// order sample.wgsl uses: larger order-preserving key first (NaN below -inf), then the lower id.
// An empty chunk writes (0, NO_ID), which loses to any id. sample_greedy.wgsl (pass 2) merges.

struct Params {
  rows: u32,
  V: u32,
  // Chunks per row.
  G: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> logits1: array<f32>;
@group(0) @binding(3) var<storage, read_write> partials: array<vec2<u32>>;

const WG: u32 = 64u;
// vec4s per lane per chunk (host side: sample_greedy.ts's CHUNK_VEC4S = WG · PER_LANE).
const PER_LANE: u32 = 8u;
const NO_ID: u32 = 0xffffffffu;

var<workgroup> laneKey: array<u32, WG>;
var<workgroup> laneId: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let s = wid.y;
  if (s >= params.rows) { return; }
  let start = s * params.V;
  let end = start + params.V;
  let vEnd = (end + 3u) / 4u;
  let chunkBegin = start / 4u + wid.x * WG * PER_LANE;
  let chunkEnd = min(vEnd, chunkBegin + WG * PER_LANE);

  var bestKey = 0u;
  var bestId = NO_ID;
  for (var v = chunkBegin + lane; v < chunkEnd; v += WG) {
    let e = 4u * v + vec4<u32>(0u, 1u, 2u, 3u);
    let ok = e >= vec4<u32>(start) & e < vec4<u32>(end);
    let x = load4(v);
    let k4 = select(vec4<u32>(0u), orderKey4(x), ok);
    let i4 = select(vec4<u32>(NO_ID), e - start, ok);
    for (var j = 0u; j < 4u; j++) {
      let c = before(k4[j], i4[j], bestKey, bestId);
      bestKey = select(bestKey, k4[j], c);
      bestId = select(bestId, i4[j], c);
    }
  }
  laneKey[lane] = bestKey;
  laneId[lane] = bestId;
  workgroupBarrier();
  // (key, id) is a total order over distinct ids, so the tree's shape cannot change the winner.
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let c = before(laneKey[lane + stride], laneId[lane + stride], laneKey[lane], laneId[lane]);
      laneKey[lane] = select(laneKey[lane], laneKey[lane + stride], c);
      laneId[lane] = select(laneId[lane], laneId[lane + stride], c);
    }
    workgroupBarrier();
  }
  if (lane == 0u) { partials[s * params.G + wid.x] = vec2<u32>(laneKey[0], laneId[0]); }
}
