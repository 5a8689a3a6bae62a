// Greedy sampling, pass 2 of 2: one workgroup per sample row merges the row's chunk winners from
// argmax_partials.wgsl, then computes the chosen id's logprob exactly as sample.wgsl does, so a
// greedy row's record is bit for bit the one the full sampler writes (ids and logprobs do not
// depend on which sampler a step's batch took).
//
// For row s: id = the row's best (key, id); nextIds[sampleSlot[s]] = id; out[2s..2s+1] =
// [id, logits[s, id] - logZ], logZ = mx + log(Σ exp(x - mx)). The sum is sample.wgsl's sumExp:
// the same WG = 64 lanes, each adding its strided vec4s in order, then the lanes in lane order.

struct Params {
  rows: u32,
  V: u32,
  // Chunks per row in partials.
  G: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> logits1: array<f32>;
@group(0) @binding(3) var<storage, read> partials: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> sampleSlot: array<u32>;
@group(0) @binding(5) var<storage, read_write> nextIds: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<u32>;

// Must stay sample.wgsl's WG: the logprob's summation order depends on it.
const WG: u32 = 64u;
const NO_ID: u32 = 0xffffffffu;

var<workgroup> laneKey: array<u32, WG>;
var<workgroup> laneId: array<u32, WG>;
var<workgroup> laneZ: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let s = wid.x;
  if (s >= params.rows) { return; }
  let start = s * params.V;
  let end = start + params.V;
  let vBegin = start / 4u;
  let vEnd = (end + 3u) / 4u;

  var bestKey = 0u;
  var bestId = NO_ID;
  for (var g = lane; g < params.G; g += WG) {
    let p = partials[s * params.G + g];
    let c = before(p.x, p.y, bestKey, bestId);
    bestKey = select(bestKey, p.x, c);
    bestId = select(bestId, p.y, c);
  }
  laneKey[lane] = bestKey;
  laneId[lane] = bestId;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let c = before(laneKey[lane + stride], laneId[lane + stride], laneKey[lane], laneId[lane]);
      laneKey[lane] = select(laneKey[lane], laneKey[lane + stride], c);
      laneId[lane] = select(laneId[lane], laneId[lane + stride], c);
    }
    workgroupBarrier();
  }
  let id = laneId[0];
  let mx = keyValue(laneKey[0]);

  var z = 0.0;
  for (var v = vBegin + lane; v < vEnd; v += WG) {
    let d = load4(v) - mx;
    let e = 4u * v + vec4<u32>(0u, 1u, 2u, 3u);
    let ok = e >= vec4<u32>(start) & e < vec4<u32>(end);
    z += dot(select(vec4<f32>(0.0), exp(d), ok), vec4<f32>(1.0));
  }
  laneZ[lane] = z;
  workgroupBarrier();
  if (lane == 0u) {
    var total = 0.0;
    for (var l = 0u; l < WG; l++) { total += laneZ[l]; }
    let logZ = mx + log(total);
    nextIds[sampleSlot[s]] = id;
    out[2u * s] = id;
    out[2u * s + 1u] = bitcast<u32>(logits1[start + id] - logZ);
  }
}
