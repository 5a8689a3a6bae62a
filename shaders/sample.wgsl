// GPU sampler: one workgroup per sample row s over logits f32 [rows, V].
//
// For row s, slot = sampleSlot[s] selects the slot's {temperature, topK, topP, seed, minP}. The
// row's chosen id goes to nextIds[slot] and a record to out[s * (2 + 2K)]:
//   [id, logprob(id), then K pairs (id, logprob) of the K likeliest ids]
// with logprobs the log-softmax of the logits over the whole vocabulary. The logits are the ones
// this pass is given: after logit_controls.wgsl (logit bias, penalties, token mask) where a row has
// any, so logprobs are those of the adjusted logits (as vLLM reports "processed" logprobs).
//
// Order: by logit descending, ties to the lower id. temperature <= 0 is greedy (the first id in
// that order). Otherwise the candidates are the ids at or above two cutoffs, the top-k (topK > 0)
// and min-p (minP > 0: logit >= max + T ln(minP), i.e. p >= minP · p_max, vLLM's), then the
// smallest prefix of those whose temperature-scaled probability mass, renormalized over them,
// reaches topP; ids tied with a cutoff's logit are kept (as HF does). The draw is Gumbel-max over
// the candidates with noise hashed from (seed, samplePos[s], id): reproducible and independent of
// the batch. A row whose logits are all -inf (a token mask that allows nothing) gets id 0.
//
// Logits are compared as order-preserving u32 keys (NaN below -inf). Every lane keeps its own
// sorted top-LIST list; the merged list answers greedy, the top-K records and, when the cutoffs
// fall inside it, the whole sampling step. Cutoffs beyond the list are found by radix selection
// (8 passes of 4-bit digits) and the draw then takes one more pass. All cross-lane reductions run
// in lane order, so a row's result does not depend on the other rows.
//
// On llvmpipe a SIMD group (8 lanes) stops all its loops after 65535 iterations in total, so the
// passes are spread over WG lanes (WG / 8 groups) and the per-logit work has no inner loops.

struct Params {
  rows: u32,
  V: u32,
  // Top logprobs per record (<= LIST).
  K: u32,
}

struct SlotParams {
  temperature: f32,
  topK: u32,
  topP: f32,
  seed: u32,
  // <= 0: off.
  minP: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> logits1: array<f32>;
@group(0) @binding(3) var<storage, read> sampleSlot: array<u32>;
@group(0) @binding(4) var<storage, read> samplePos: array<u32>;
@group(0) @binding(5) var<storage, read> slotParams: array<SlotParams>;
@group(0) @binding(6) var<storage, read_write> nextIds: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<u32>;

const WG: u32 = 64u;
const LIST: u32 = 20u;
// Lists merged per lane in the first merge level (WG / MERGE lanes merge, then lane 0).
const MERGE: u32 = 8u;
// Entries per lane in the fast top-list pass.
const FAST: u32 = 4u;
const NO_ID: u32 = 0xffffffffu;
const NEG_INF_BITS: u32 = 0xff800000u;

// Per-lane lists (reused by the first merge level), then the merged list (topKey[0] = max).
var<workgroup> laneKeys: array<u32, WG * LIST>;
var<workgroup> laneIds: array<u32, WG * LIST>;
var<workgroup> topKey: array<u32, LIST>;
var<workgroup> topId: array<u32, LIST>;
var<workgroup> laneF32: array<vec2<f32>, WG>;
var<workgroup> sumF32: vec2<f32>;
var<workgroup> laneBins: array<vec4<f32>, WG * 4u>;
var<workgroup> totalBins: array<vec4<f32>, 4>;
var<workgroup> laneBestScore: array<f32, WG>;
var<workgroup> laneBestId: array<u32, WG>;
var<workgroup> bestId: u32;
var<workgroup> flag: u32;

// The row's logits: element range [start, end) within aligned vec4s [vBegin, vEnd).
struct Row {
  start: u32,
  end: u32,
  vBegin: u32,
  vEnd: u32,
}

// Which elements of aligned vec4 v belong to the row, and their ids.
fn ids4(row: Row, v: u32) -> vec4<u32> {
  return 4u * v + vec4<u32>(0u, 1u, 2u, 3u) - row.start;
}

fn inRow(row: Row, v: u32) -> vec4<bool> {
  let e = 4u * v + vec4<u32>(0u, 1u, 2u, 3u);
  return e >= vec4<u32>(row.start) & e < vec4<u32>(row.end);
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

// Gumbel(0, 1) noise for one id, from the row's (seed, position) hash.
fn gumbel(rowHash: u32, id: u32) -> f32 {
  let u = (f32(mix32(rowHash ^ id) >> 8u) + 0.5) * (1.0 / 16777216.0);
  return -log(-log(u));
}

// True when `value` holds on any lane, usable in uniform control flow.
fn uniformAny(lane: u32, value: bool) -> bool {
  if (lane == 0u) { flag = 0u; }
  workgroupBarrier();
  if (value) { flag = 1u; }
  let seen = workgroupUniformLoad(&flag) != 0u;
  workgroupBarrier();
  return seen;
}

// `value` as computed by lane 0, usable in uniform control flow.
fn uniformFlag(lane: u32, value: bool) -> bool {
  if (lane == 0u) { flag = u32(value); }
  let seen = workgroupUniformLoad(&flag) != 0u;
  workgroupBarrier();
  return seen;
}

// Sum over lanes of v, added in lane order by lane 0 (every lane gets the result).
fn laneSum(lane: u32, v: vec2<f32>) -> vec2<f32> {
  laneF32[lane] = v;
  workgroupBarrier();
  if (lane == 0u) {
    var total = vec2<f32>(0.0);
    for (var l = 0u; l < WG; l++) { total += laneF32[l]; }
    sumF32 = total;
  }
  workgroupBarrier();
  let total = sumF32;
  workgroupBarrier();
  return total;
}

// Inserts (key, id) into a sorted list if it beats the list's tail.
fn offer(keys: ptr<function, array<u32, LIST>>, ids: ptr<function, array<u32, LIST>>, key: u32, id: u32) {
  if (!before(key, id, (*keys)[LIST - 1u], (*ids)[LIST - 1u])) { return; }
  for (var j = LIST - 1u; j > 0u; j--) {
    if (before(key, id, (*keys)[j - 1u], (*ids)[j - 1u])) {
      (*keys)[j] = (*keys)[j - 1u];
      (*ids)[j] = (*ids)[j - 1u];
    } else if (before(key, id, (*keys)[j], (*ids)[j])) {
      (*keys)[j] = key;
      (*ids)[j] = id;
    }
  }
  if (before(key, id, (*keys)[0], (*ids)[0])) {
    (*keys)[0] = key;
    (*ids)[0] = id;
  }
}

// Merges `count` (<= MERGE) sorted lists stored at laneKeys/laneIds[first + i * stride] into
// their first LIST entries, written at laneKeys/laneIds[dst ..].
fn mergeLists(first: u32, stride: u32, count: u32, dst: u32) {
  var head: array<u32, MERGE>;
  for (var l = 0u; l < MERGE; l++) { head[l] = 0u; }
  var keys: array<u32, LIST>;
  var ids: array<u32, LIST>;
  for (var r = 0u; r < LIST; r++) {
    var bestLane = 0u;
    var bestKey = 0u;
    var bestIdx = NO_ID;
    for (var l = 0u; l < MERGE; l++) {
      if (l < count && head[l] < LIST) {
        let k = laneKeys[first + l * stride + head[l]];
        let i = laneIds[first + l * stride + head[l]];
        if (before(k, i, bestKey, bestIdx)) {
          bestLane = l;
          bestKey = k;
          bestIdx = i;
        }
      }
    }
    for (var l = 0u; l < MERGE; l++) {
      if (l == bestLane) { head[l] += 1u; }
    }
    keys[r] = bestKey;
    ids[r] = bestIdx;
  }
  for (var r = 0u; r < LIST; r++) {
    laneKeys[dst + r] = keys[r];
    laneIds[dst + r] = ids[r];
  }
}

// A lane's FAST best entries, sorted; kept with selects only (no loop, no branch per logit).
struct Best4 {
  keys: vec4<u32>,
  ids: vec4<u32>,
}

fn offer4(b: Best4, key: u32, id: u32) -> Best4 {
  let c0 = before(key, id, b.keys.x, b.ids.x);
  let c1 = before(key, id, b.keys.y, b.ids.y);
  let c2 = before(key, id, b.keys.z, b.ids.z);
  let c3 = before(key, id, b.keys.w, b.ids.w);
  var r: Best4;
  r.keys.w = select(select(b.keys.w, key, c3), b.keys.z, c2);
  r.ids.w = select(select(b.ids.w, id, c3), b.ids.z, c2);
  r.keys.z = select(select(b.keys.z, key, c2), b.keys.y, c1);
  r.ids.z = select(select(b.ids.z, id, c2), b.ids.y, c1);
  r.keys.y = select(select(b.keys.y, key, c1), b.keys.x, c0);
  r.ids.y = select(select(b.ids.y, id, c1), b.ids.x, c0);
  r.keys.x = select(b.keys.x, key, c0);
  r.ids.x = select(b.ids.x, id, c0);
  return r;
}

// Writes each lane's list to laneKeys/laneIds and merges them into topKey/topId (two levels:
// lanes 0..WG/MERGE-1 merge MERGE lists each in place, then lane 0 merges those).
fn mergeLaneLists(lane: u32) {
  workgroupBarrier();
  if (lane < WG / MERGE) { mergeLists(lane * MERGE * LIST, LIST, MERGE, lane * MERGE * LIST); }
  workgroupBarrier();
  if (lane == 0u) { mergeLists(0u, MERGE * LIST, WG / MERGE, 0u); }
  workgroupBarrier();
  if (lane < LIST) {
    topKey[lane] = laneKeys[lane];
    topId[lane] = laneIds[lane];
  }
  workgroupBarrier();
}

// Fills topKey/topId with the row's first LIST entries in (key desc, id asc) order.
//
// Fast pass: each lane keeps only its FAST best entries. The merge of those is exact unless some
// lane's last kept entry made the merged list (that lane may hold more of the true top LIST);
// only then a second pass keeps LIST entries per lane, inserting into a sorted list (costly on
// llvmpipe, where the insertion runs masked for every logit).
fn collectTop(lane: u32, row: Row) {
  var b: Best4;
  b.keys = vec4<u32>(0u);
  b.ids = vec4<u32>(NO_ID);
  for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
    let k4 = select(vec4<u32>(0u), orderKey4(load4(v)), inRow(row, v));
    let i4 = select(vec4<u32>(NO_ID), ids4(row, v), inRow(row, v));
    b = offer4(b, k4.x, i4.x);
    b = offer4(b, k4.y, i4.y);
    b = offer4(b, k4.z, i4.z);
    b = offer4(b, k4.w, i4.w);
  }
  for (var j = 0u; j < LIST; j++) {
    laneKeys[lane * LIST + j] = select(0u, b.keys[min(j, FAST - 1u)], j < FAST);
    laneIds[lane * LIST + j] = select(NO_ID, b.ids[min(j, FAST - 1u)], j < FAST);
  }
  mergeLaneLists(lane);
  let lastKept = before(b.keys.w, b.ids.w, topKey[LIST - 1u], topId[LIST - 1u]) ||
    (b.keys.w == topKey[LIST - 1u] && b.ids.w == topId[LIST - 1u]);
  if (!uniformAny(lane, lastKept && b.ids.w != NO_ID)) { return; }

  var keys: array<u32, LIST>;
  var ids: array<u32, LIST>;
  for (var j = 0u; j < LIST; j++) {
    keys[j] = 0u;
    ids[j] = NO_ID;
  }
  for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
    let k4 = orderKey4(load4(v));
    let i4 = ids4(row, v);
    let ok = inRow(row, v);
    if (ok.x) { offer(&keys, &ids, k4.x, i4.x); }
    if (ok.y) { offer(&keys, &ids, k4.y, i4.y); }
    if (ok.z) { offer(&keys, &ids, k4.z, i4.z); }
    if (ok.w) { offer(&keys, &ids, k4.w, i4.w); }
  }
  for (var j = 0u; j < LIST; j++) {
    laneKeys[lane * LIST + j] = keys[j];
    laneIds[lane * LIST + j] = ids[j];
  }
  mergeLaneLists(lane);
}

// (sum exp(x - mx), sum exp((x - mx) * invT)) over the row; the second only when asked.
fn sumExp(lane: u32, row: Row, mx: f32, invT: f32, scaled: bool) -> vec2<f32> {
  var z = 0.0;
  var zt = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
    let d = load4(v) - mx;
    let ok = inRow(row, v);
    z += dot(select(vec4<f32>(0.0), exp(d), ok), vec4<f32>(1.0));
    if (scaled) { zt += dot(select(vec4<f32>(0.0), exp(d * invT), ok), vec4<f32>(1.0)); }
  }
  return laneSum(lane, vec2<f32>(z, zt));
}

// Sum of exp((x - mx) * invT) over ids with key >= t.
fn massAbove(lane: u32, row: Row, t: u32, mx: f32, invT: f32) -> f32 {
  var m = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
    let x4 = load4(v);
    let ok = inRow(row, v) & orderKey4(x4) >= vec4<u32>(t);
    m += dot(select(vec4<f32>(0.0), exp((x4 - mx) * invT), ok), vec4<f32>(1.0));
  }
  return laneSum(lane, vec2<f32>(m, 0.0)).x;
}

// Adds weight w to bin `digit` of the 16 bins held as 4 vec4s.
fn addToBins(bins: ptr<function, array<vec4<f32>, 4>>, digit: u32, w: f32) {
  let d = vec4<u32>(digit);
  (*bins)[0] += select(vec4<f32>(0.0), vec4<f32>(w), d == vec4<u32>(0u, 1u, 2u, 3u));
  (*bins)[1] += select(vec4<f32>(0.0), vec4<f32>(w), d == vec4<u32>(4u, 5u, 6u, 7u));
  (*bins)[2] += select(vec4<f32>(0.0), vec4<f32>(w), d == vec4<u32>(8u, 9u, 10u, 11u));
  (*bins)[3] += select(vec4<f32>(0.0), vec4<f32>(w), d == vec4<u32>(12u, 13u, 14u, 15u));
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
    var bins: array<vec4<f32>, 4>;
    for (var q = 0u; q < 4u; q++) { bins[q] = vec4<f32>(0.0); }
    for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
      let x4 = load4(v);
      let k4 = orderKey4(x4);
      // Digits above this one must match the prefix (two shifts: a shift by 32 is undefined).
      let ok = inRow(row, v) & k4 >= vec4<u32>(floorKey) &
        ((((k4 ^ vec4<u32>(prefix)) >> vec4<u32>(shift)) >> vec4<u32>(4u)) == vec4<u32>(0u));
      let w4 = select(vec4<f32>(0.0), select(vec4<f32>(1.0), exp((x4 - mx) * invT), useMass), ok);
      let d4 = (k4 >> vec4<u32>(shift)) & vec4<u32>(15u);
      addToBins(&bins, d4.x, w4.x);
      addToBins(&bins, d4.y, w4.y);
      addToBins(&bins, d4.z, w4.z);
      addToBins(&bins, d4.w, w4.w);
    }
    for (var q = 0u; q < 4u; q++) { laneBins[q * WG + lane] = bins[q]; }
    workgroupBarrier();
    if (lane < 4u) {
      var total = vec4<f32>(0.0);
      for (var l = 0u; l < WG; l++) { total += laneBins[lane * WG + l]; }
      totalBins[lane] = total;
    }
    workgroupBarrier();
    var total: array<vec4<f32>, 4>;
    for (var q = 0u; q < 4u; q++) { total[q] = totalBins[q]; }
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

// Gumbel-max over the merged list's entries with key >= t (all such ids are in the list).
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

// Gumbel-max over all ids with key >= t, in one pass.
fn drawFromRow(lane: u32, row: Row, t: u32, rowHash: u32, mx: f32, invT: f32) -> u32 {
  var best = NO_ID;
  var bestScore = 0.0;
  for (var v = row.vBegin + lane; v < row.vEnd; v += WG) {
    let x4 = load4(v);
    let ok = inRow(row, v) & orderKey4(x4) >= vec4<u32>(t);
    let i4 = ids4(row, v);
    let base = (x4 - mx) * invT;
    // A lane visits its ids in increasing order: strict > keeps the lowest on ties.
    if (ok.x) {
      let s = base.x + gumbel(rowHash, i4.x);
      if (best == NO_ID || s > bestScore) { best = i4.x; bestScore = s; }
    }
    if (ok.y) {
      let s = base.y + gumbel(rowHash, i4.y);
      if (best == NO_ID || s > bestScore) { best = i4.y; bestScore = s; }
    }
    if (ok.z) {
      let s = base.z + gumbel(rowHash, i4.z);
      if (best == NO_ID || s > bestScore) { best = i4.z; bestScore = s; }
    }
    if (ok.w) {
      let s = base.w + gumbel(rowHash, i4.w);
      if (best == NO_ID || s > bestScore) { best = i4.w; bestScore = s; }
    }
  }
  laneBestScore[lane] = bestScore;
  laneBestId[lane] = best;
  workgroupBarrier();
  if (lane == 0u) {
    var id = NO_ID;
    var score = 0.0;
    for (var l = 0u; l < WG; l++) {
      let i = laneBestId[l];
      let s = laneBestScore[l];
      if (i != NO_ID && (id == NO_ID || s > score || (s == score && i < id))) {
        id = i;
        score = s;
      }
    }
    bestId = id;
  }
  workgroupBarrier();
  let id = bestId;
  workgroupBarrier();
  return id;
}

// True when every id with key >= t is in the merged list.
fn listHolds(t: u32) -> bool {
  return params.V <= LIST || topKey[LIST - 1u] < t;
}

// Sum of exp((x - mx) * invT) over the list entries with key >= t.
fn listMass(t: u32, mx: f32, invT: f32) -> f32 {
  var m = 0.0;
  for (var r = 0u; r < min(params.V, LIST); r++) {
    if (topKey[r] < t) { break; }
    m += exp((keyValue(topKey[r]) - mx) * invT);
  }
  return m;
}

// Temperature / top-k / top-p draw (temperature > 0). massAll: the row's scaled mass, when computed.
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
  // Min-p: one more key cutoff; when it is the higher one, top-p renormalizes over its survivors.
  if (sp.minP > 0.0) {
    let tm = orderKey(mx + sp.temperature * log(min(sp.minP, 1.0)));
    if (uniformFlag(lane, tm > tk)) {
      tk = tm;
      if (sp.topP < 1.0) {
        if (uniformFlag(lane, listHolds(tk))) {
          massK = listMass(tk, mx, invT);
        } else {
          massK = massAbove(lane, row, tk, mx, invT);
        }
      }
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

@compute @workgroup_size(WG)
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
