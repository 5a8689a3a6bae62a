// Bidirectional attention over packed inputs: each row attends to every row of its own input
// (spans[m] = [start, end)), nothing else: the padding mask of a padded batch, without the padding.
// No KV cache: q, k and v are read from the fused qkv rows of this pass. One workgroup per
// (head, row); the keys go by in chunks of CHUNK with an online softmax (running max and sum), so
// inputs of any length fit in a fixed workgroup memory, and no lane loops past CHUNK/LANES keys
// per chunk (llvmpipe's loop limit).
//
// qkv f32 [rows, 3·heads·HEAD_DIM] (q heads, then k, then v), out f32 [rows, heads·HEAD_DIM].

struct Params {
  rows: u32,
  heads: u32,
  scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> spans: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const LANES: u32 = 64u;
const CHUNK: u32 = 256u;
/** Output dims per lane. */
const DIMS: u32 = (HEAD_DIM + LANES - 1u) / LANES;
/** Stands for −∞ (WGSL has no infinite constants); exp of it minus any score is 0. */
const NEG_BIG: f32 = -3.0e38;

var<workgroup> q: array<f32, HEAD_DIM>;
var<workgroup> scores: array<f32, CHUNK>;
var<workgroup> partial: array<f32, LANES>;
var<workgroup> spanShared: vec2<u32>;

fn workgroupMax(lane: u32, v: f32) -> f32 {
  partial[lane] = v;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      partial[lane] = max(partial[lane], partial[lane + stride]);
    }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();
  return total;
}

fn workgroupSum(lane: u32, v: f32) -> f32 {
  partial[lane] = v;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      partial[lane] += partial[lane + stride];
    }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let lane = lid.x;
  let head = wg.x;
  let m = wg.y;
  let width = 3u * p.heads * HEAD_DIM;
  let qAt = m * width + head * HEAD_DIM;
  let kOff = p.heads * HEAD_DIM + head * HEAD_DIM;
  let vOff = 2u * p.heads * HEAD_DIM + head * HEAD_DIM;
  for (var d = lane; d < HEAD_DIM; d += LANES) {
    q[d] = qkv[qAt + d] * p.scale;
  }
  if (lane == 0u) {
    spanShared = spans[m];
  }
  // The span is the same for every lane; loading it so makes the chunk loop uniform for barriers.
  let span = workgroupUniformLoad(&spanShared);

  var runMax = NEG_BIG;
  var runSum = 0.0;
  var acc: array<f32, DIMS>;
  for (var c0 = span.x; c0 < span.y; c0 += CHUNK) {
    let n = min(CHUNK, span.y - c0);
    var localMax = NEG_BIG;
    for (var c = lane; c < CHUNK; c += LANES) {
      var s = NEG_BIG;
      if (c < n) {
        let kAt = (c0 + c) * width + kOff;
        s = 0.0;
        for (var d = 0u; d < HEAD_DIM; d++) {
          s += q[d] * qkv[kAt + d];
        }
        localMax = max(localMax, s);
      }
      scores[c] = s;
    }
    let newMax = max(runMax, workgroupMax(lane, localMax));
    var localSum = 0.0;
    for (var c = lane; c < CHUNK; c += LANES) {
      let e = select(0.0, exp(scores[c] - newMax), c < n);
      scores[c] = e;
      localSum += e;
    }
    let chunkSum = workgroupSum(lane, localSum); // its barriers also publish scores
    let factor = exp(runMax - newMax);
    runSum = runSum * factor + chunkSum;
    runMax = newMax;
    for (var j = 0u; j < DIMS; j++) {
      let d = lane + j * LANES;
      if (d < HEAD_DIM) {
        var a = acc[j] * factor;
        for (var c = 0u; c < n; c++) {
          a += scores[c] * qkv[(c0 + c) * width + vOff + d];
        }
        acc[j] = a;
      }
    }
    workgroupBarrier();
  }
  let outAt = m * p.heads * HEAD_DIM + head * HEAD_DIM;
  for (var j = 0u; j < DIMS; j++) {
    let d = lane + j * LANES;
    if (d < HEAD_DIM) {
      out[outAt + d] = acc[j] / runSum;
    }
  }
}
