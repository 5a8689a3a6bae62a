// GPU sampler: one workgroup per sample row s over logits f32 [rows, V].
//
// For row s, slot = sampleSlot[s] selects the slot's {temperature, topK, topP, seed}. The row's
// chosen id goes to nextIds[slot] and a record to out[s * (2 + 2K)]:
//   [id, logprob(id), then K pairs (id, logprob) of the K likeliest ids]
// with logprobs the log-softmax of the raw logits over the whole vocabulary.
//
// Order: by logit descending, ties to the lower id. temperature <= 0 is greedy (the first id in
// that order). Otherwise the candidates are the top-k ids (topK > 0), then the smallest prefix of
// them whose temperature-scaled probability mass, renormalized over the top-k, reaches topP; ids
// tied with a cutoff's logit are kept (as HF does). The draw is Gumbel-max over the candidates
// with noise hashed from (seed, samplePos[s], id): reproducible and independent of the batch.
//
// Logits are compared as order-preserving u32 keys (NaN below -inf). Every lane keeps its own
// sorted top-LIST list; the merged list answers greedy, the top-K records and, when the cutoffs
// fall inside it, the whole sampling step. Cutoffs beyond the list are found by radix selection
// (8 passes of 4-bit digits) and the draw then takes one more pass. All cross-lane reductions run
// in lane order, so a row's result does not depend on the other rows.

struct Params {
  rows: u32,
  V: u32,
  /** Top logprobs per record (<= LIST). */
  K: u32,
}

struct SlotParams {
  temperature: f32,
  topK: u32,
  topP: f32,
  seed: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> logits1: array<f32>;
@group(0) @binding(3) var<storage, read> sampleSlot: array<u32>;
@group(0) @binding(4) var<storage, read> samplePos: array<u32>;
@group(0) @binding(5) var<storage, read> slotParams: array<SlotParams>;
@group(0) @binding(6) var<storage, read_write> nextIds: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<u32>;

const LANES: u32 = 8u;
const LIST: u32 = 20u;
const NO_ID: u32 = 0xffffffffu;
const NEG_INF_BITS: u32 = 0xff800000u;

// Per-lane lists, then the merged list (topKey[0] is the maximum).
var<workgroup> laneKeys: array<u32, LANES * LIST>;
var<workgroup> laneIds: array<u32, LANES * LIST>;
var<workgroup> topKey: array<u32, LIST>;
var<workgroup> topId: array<u32, LIST>;
var<workgroup> laneF32: array<vec2<f32>, LANES>;
var<workgroup> laneBins: array<vec4<f32>, LANES * 4u>;
var<workgroup> laneBestScore: array<f32, LANES>;
var<workgroup> laneBestId: array<u32, LANES>;
var<workgroup> flag: u32;

/** The row's logits, as aligned vec4 indices [begin, end) and element range [start, end). */
struct Row {
  start: u32,
  end: u32,
  vBegin: u32,
  vEnd: u32,
}

/** Order-preserving key: larger logit, larger key. NaN maps to 0, below -inf. */
fn orderKey(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn keyValue(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

/** (ka, ia) comes before (kb, ib): larger key, then lower id. */
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  return ka > kb || (ka == kb && ia < ib);
}

/** Aligned vec4 v of the logits; the buffer's last partial vec4 is read element by element. */
fn load4(v: u32) -> vec4<f32> {
  let n = arrayLength(&logits1);
  if (4u * v + 3u < n) { return logits4[v]; }
  var r = vec4<f32>(0.0);
  for (var c = 0u; c < 4u; c++) {
    if (4u * v + c < n) { r[c] = logits1[4u * v + c]; }
  }
  return r;
}

fn mix32(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

/** Gumbel(0, 1) noise for one id, from the row's (seed, position) hash. */
fn gumbel(rowHash: u32, id: u32) -> f32 {
  let u = (f32(mix32(rowHash ^ id) >> 8u) + 0.5) * (1.0 / 16777216.0);
  return -log(-log(u));
}

/** `value` as seen by lane 0, usable in uniform control flow. */
fn uniformFlag(lane: u32, value: bool) -> bool {
  if (lane == 0u) { flag = u32(value); }
  let seen = workgroupUniformLoad(&flag) != 0u;
  workgroupBarrier();
  return seen;
}

/** Sum of each lane's v, added in lane order (every lane gets the same result). */
fn laneSum(lane: u32, v: vec2<f32>) -> vec2<f32> {
  laneF32[lane] = v;
  workgroupBarrier();
  var total = vec2<f32>(0.0);
  for (var l = 0u; l < LANES; l++) { total += laneF32[l]; }
  workgroupBarrier();
  return total;
}

/** Fills topKey/topId with the row's LIST first entries in (key desc, id asc) order. */
fn collectTop(lane: u32, row: Row) {
  var keys: array<u32, LIST>;
  var ids: array<u32, LIST>;
  for (var j = 0u; j < LIST; j++) {
    keys[j] = 0u;
    ids[j] = NO_ID;
  }
  for (var v = row.vBegin + lane; v < row.vEnd; v += LANES) {
    let x4 = load4(v);
    for (var c = 0u; c < 4u; c++) {
      let e = 4u * v + c;
      let key = orderKey(x4[c]);
      let id = e - row.start;
      if (e >= row.start && e < row.end && before(key, id, keys[LIST - 1u], ids[LIST - 1u])) {
        // Insertion into the sorted list, walking down from the tail.
        for (var j = LIST - 1u; j > 0u; j--) {
          if (before(key, id, keys[j - 1u], ids[j - 1u])) {
            keys[j] = keys[j - 1u];
            ids[j] = ids[j - 1u];
          } else if (before(key, id, keys[j], ids[j])) {
            keys[j] = key;
            ids[j] = id;
          }
        }
        if (before(key, id, keys[0], ids[0])) {
          keys[0] = key;
          ids[0] = id;
        }
      }
    }
  }
  for (var j = 0u; j < LIST; j++) {
    laneKeys[lane * LIST + j] = keys[j];
    laneIds[lane * LIST + j] = ids[j];
  }
  workgroupBarrier();
  if (lane == 0u) {
    var head: array<u32, LANES>;
    for (var l = 0u; l < LANES; l++) { head[l] = 0u; }
    for (var r = 0u; r < LIST; r++) {
      var bestLane = 0u;
      var bestKey = 0u;
      var bestId = NO_ID;
      for (var l = 0u; l < LANES; l++) {
        if (head[l] < LIST) {
          let k = laneKeys[l * LIST + head[l]];
          let i = laneIds[l * LIST + head[l]];
          if (before(k, i, bestKey, bestId)) {
            bestLane = l;
            bestKey = k;
            bestId = i;
          }
        }
      }
      for (var l = 0u; l < LANES; l++) {
        if (l == bestLane) { head[l] += 1u; }
      }
      topKey[r] = bestKey;
      topId[r] = bestId;
    }
  }
  workgroupBarrier();
}

/** (sum exp(x - mx), sum exp((x - mx) * invT)) over the row; the second only when asked. */
fn sumExp(lane: u32, row: Row, mx: f32, invT: f32, scaled: bool) -> vec2<f32> {
  var z = 0.0;
  var zt = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += LANES) {
    let x4 = load4(v);
    let e4 = 4u * v + vec4<u32>(0u, 1u, 2u, 3u);
    let valid = e4 >= vec4<u32>(row.start) & e4 < vec4<u32>(row.end);
    let d = x4 - mx;
    z += dot(select(vec4<f32>(0.0), exp(d), valid), vec4<f32>(1.0));
    if (scaled) { zt += dot(select(vec4<f32>(0.0), exp(d * invT), valid), vec4<f32>(1.0)); }
  }
  return laneSum(lane, vec2<f32>(z, zt));
}

/** Sum of exp((x - mx) * invT) over ids with key >= t. */
fn massAbove(lane: u32, row: Row, t: u32, mx: f32, invT: f32) -> f32 {
  var m = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += LANES) {
    let x4 = load4(v);
    for (var c = 0u; c < 4u; c++) {
      let e = 4u * v + c;
      if (e >= row.start && e < row.end && orderKey(x4[c]) >= t) { m += exp((x4[c] - mx) * invT); }
    }
  }
  return laneSum(lane, vec2<f32>(m, 0.0)).x;
}

/**
 * The largest key t such that the ids with key >= t (among those with key >= floorKey) weigh at
 * least `need`: counted one each (useMass false), or by exp((x - mx) * invT). Radix selection over
 * the key's 4-bit digits, most significant first; empty digits are never chosen, so t is the key
 * of some id even when rounding leaves the total short of `need`.
 */
fn radixSelect(lane: u32, row: Row, useMass: bool, need0: f32, floorKey: u32, mx: f32, invT: f32) -> u32 {
  var prefix = 0u;
  var need = need0;
  for (var r = 0u; r < 8u; r++) {
    let shift = 28u - 4u * r;
    var bins: array<f32, 16>;
    for (var b = 0u; b < 16u; b++) { bins[b] = 0.0; }
    for (var v = row.vBegin + lane; v < row.vEnd; v += LANES) {
      let x4 = load4(v);
      for (var c = 0u; c < 4u; c++) {
        let e = 4u * v + c;
        let key = orderKey(x4[c]);
        // Digits above this one must match the prefix (two shifts: a shift by 32 is undefined).
        let inRange = e >= row.start && e < row.end && key >= floorKey && (((key ^ prefix) >> shift) >> 4u) == 0u;
        if (inRange) {
          let w = select(1.0, exp((x4[c] - mx) * invT), useMass);
          let digit = (key >> shift) & 15u;
          for (var b = 0u; b < 16u; b++) { bins[b] += select(0.0, w, digit == b); }
        }
      }
    }
    for (var q = 0u; q < 4u; q++) {
      laneBins[lane * 4u + q] = vec4<f32>(bins[4u * q], bins[4u * q + 1u], bins[4u * q + 2u], bins[4u * q + 3u]);
    }
    workgroupBarrier();
    var total: array<vec4<f32>, 4>;
    for (var q = 0u; q < 4u; q++) {
      total[q] = vec4<f32>(0.0);
      for (var l = 0u; l < LANES; l++) { total[q] += laneBins[l * 4u + q]; }
    }
    workgroupBarrier();
    // Highest non-empty digit whose bin, with everything above it, reaches `need`.
    var cum = 0.0;
    var chosen = 16u;
    var lowest = 0u;
    var nextNeed = need;
    for (var i = 0u; i < 16u; i++) {
      let b = 15u - i;
      let w = total[b / 4u][b % 4u];
      if (w > 0.0) {
        lowest = b;
        if (chosen == 16u && cum + w >= need) {
          chosen = b;
          nextNeed = need - cum;
        }
        cum += w;
      }
    }
    if (chosen == 16u) {
      chosen = lowest;
      nextNeed = total[lowest / 4u][lowest % 4u];
    }
    prefix |= chosen << shift;
    need = nextNeed;
  }
  return prefix;
}

/** Gumbel-max over the merged list's entries with key >= t (all such ids are in the list). */
fn drawFromList(t: u32, rowHash: u32, mx: f32, invT: f32) -> u32 {
  var best = NO_ID;
  var bestScore = 0.0;
  for (var r = 0u; r < min(params.V, LIST); r++) {
    let key = topKey[r];
    if (key < t) { break; }
    let score = (keyValue(key) - mx) * invT + gumbel(rowHash, topId[r]);
    if (best == NO_ID || score > bestScore || (score == bestScore && topId[r] < best)) {
      best = topId[r];
      bestScore = score;
    }
  }
  return best;
}

/** Gumbel-max over all ids with key >= t, in one pass. */
fn drawFromRow(lane: u32, row: Row, t: u32, rowHash: u32, mx: f32, invT: f32) -> u32 {
  var best = NO_ID;
  var bestScore = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += LANES) {
    let x4 = load4(v);
    for (var c = 0u; c < 4u; c++) {
      let e = 4u * v + c;
      let id = e - row.start;
      if (e >= row.start && e < row.end && orderKey(x4[c]) >= t) {
        let score = (x4[c] - mx) * invT + gumbel(rowHash, id);
        // A lane visits its ids in increasing order: strict > keeps the lowest on ties.
        if (best == NO_ID || score > bestScore) {
          best = id;
          bestScore = score;
        }
      }
    }
  }
  laneBestScore[lane] = bestScore;
  laneBestId[lane] = best;
  workgroupBarrier();
  var id = NO_ID;
  var score = 0.0;
  for (var l = 0u; l < LANES; l++) {
    let i = laneBestId[l];
    let s = laneBestScore[l];
    if (i != NO_ID && (id == NO_ID || s > score || (s == score && i < id))) {
      id = i;
      score = s;
    }
  }
  workgroupBarrier();
  return id;
}

/** True when every id with key >= t is in the merged list. */
fn listHolds(t: u32) -> bool {
  return params.V <= LIST || topKey[LIST - 1u] < t;
}

/** Sum of exp((x - mx) * invT) over the list entries with key >= t. */
fn listMass(t: u32, mx: f32, invT: f32) -> f32 {
  var m = 0.0;
  for (var r = 0u; r < min(params.V, LIST); r++) {
    if (topKey[r] < t) { break; }
    m += exp((keyValue(topKey[r]) - mx) * invT);
  }
  return m;
}

/** Temperature / top-k / top-p draw (temperature > 0). `massAll` is the whole row's scaled mass when computed. */
fn drawSample(lane: u32, row: Row, sp: SlotParams, rowHash: u32, mx: f32, invT: f32, massAll: f32) -> u32 {
  let V = params.V;
  // Top-k cutoff key tk and the mass at or above it.
  var tk = 0u;
  var massK = massAll;
  if (sp.topK > 0u && sp.topK < V) {
    if (sp.topK <= LIST) {
      tk = topKey[sp.topK - 1u];
      if (uniformFlag(lane, listHolds(tk))) {
        massK = listMass(tk, mx, invT);
      } else {
        massK = massAbove(lane, row, tk, mx, invT);
      }
    } else {
      tk = radixSelect(lane, row, false, f32(sp.topK), 0u, mx, invT);
      massK = massAbove(lane, row, tk, mx, invT);
    }
  }
  var t = tk;
  if (sp.topP < 1.0) {
    // Nucleus cutoff: the key of the first entry (in order) where the cumulative mass reaches it.
    let goal = sp.topP * massK;
    var cum = 0.0;
    var tp = tk;
    var found = false;
    for (var r = 0u; r < min(V, LIST); r++) {
      let key = topKey[r];
      if (key < tk) { break; }
      cum += exp((keyValue(key) - mx) * invT);
      if (cum >= goal) {
        tp = key;
        found = true;
        break;
      }
    }
    if (!uniformFlag(lane, found || listHolds(tk))) {
      tp = radixSelect(lane, row, true, goal, tk, mx, invT);
    }
    t = max(tk, tp);
  }
  if (uniformFlag(lane, listHolds(t))) {
    return drawFromList(t, rowHash, mx, invT);
  }
  return drawFromRow(lane, row, t, rowHash, mx, invT);
}

@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let s = wid.x;
  if (s >= params.rows) { return; }
  let V = params.V;
  var row: Row;
  row.start = s * V;
  row.end = row.start + V;
  row.vBegin = row.start / 4u;
  row.vEnd = (row.end + 3u) / 4u;
  let slot = sampleSlot[s];
  let sp = slotParams[slot];

  collectTop(lane, row);
  let mx = keyValue(topKey[0]);
  let greedy = !(sp.temperature > 0.0);
  let invT = select(1.0 / sp.temperature, 1.0, greedy);
  // The whole row's scaled mass is needed only for top-p without a top-k cutoff.
  let needMassAll = !greedy && sp.topP < 1.0 && (sp.topK == 0u || sp.topK >= V);
  let sums = sumExp(lane, row, mx, invT, needMassAll);
  let logZ = mx + log(sums.x);

  var id = topId[0];
  if (!greedy) {
    let rowHash = mix32(mix32(sp.seed ^ 0x9e3779b9u) ^ samplePos[s]);
    id = drawSample(lane, row, sp, rowHash, mx, invT, sums.y);
  }

  if (lane == 0u) {
    nextIds[slot] = id;
    let base = s * (2u + 2u * params.K);
    out[base] = id;
    out[base + 1u] = bitcast<u32>(logits1[row.start + id] - logZ);
    for (var k = 0u; k < params.K; k++) {
      let real = k < V;
      out[base + 2u + 2u * k] = select(NO_ID, topId[k], real);
      out[base + 3u + 2u * k] = select(NEG_INF_BITS, bitcast<u32>(keyValue(topKey[k]) - logZ), real);
    }
  }
}
