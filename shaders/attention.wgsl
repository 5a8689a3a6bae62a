// Causal paged attention: for row m and query head h,
//   out[m, h*HD + d] = sum_j softmax_j(q_h . k_j · scoreScale) v_j[d],  j = lo..rowPos[m],
// (scoreScale 1/sqrt(HD), or Gemma's query_pre_attn_scalar^-1/2; with Gemma 2's soft cap c > 0,
// each score s becomes c·tanh(s / c) before the softmax),
// reading K/V of slot rowSlot[m] through the block table. lo is 0, or with a sliding window W
// (Mistral) rowPos[m] - W + 1: positions before it are never read, so their blocks may be freed
// (the runtime does), except that the first quad may begin up to 3 positions before lo, in lo's
// block. GQA: q head h reads kv head
// h / (numHeads / numKvHeads). q_h is qkv's q head h rotated by the row's position (RoPE:
// rope_rotation.wgsl, appended to this file) as it is loaded into registers; qkv holds q unrotated,
// and the cache holds the keys kv_write rotated. As there, only the first 8 * ropeHalf4 values of
// a head turn (none on a layer without RoPE), scaled by ropeScale.
//
// Shader consts: HD (head dim, multiple of 8); HPW, the query heads one workgroup computes (all of
// one kv head); KV_F16 (1 when the cache holds f16, read as packed u32 pairs); KV_Q8 (1 when it
// holds q8_0 blocks, engine/kv/kv_format.ts: HD a multiple of 32, SW scale words per row), whose
// values are dequantized in registers (int8 times the group's f16 scale) and summed in f32.
//
// One workgroup per (HPW heads, row): GROUPS teams of LANES invocations. Positions go in tiles of
// TP; team t takes tiles t, t+GROUPS, ... and keeps its own online-softmax state; the teams'
// states are merged at the end in team order. Inside a team the head dim is cut into chunks of
// 4 (f32) or 8 (f16) values and lane l owns chunks l, l+LANES, ... of q, K, V and the accumulator:
// each lane computes partial q.k over its chunks, the partials are summed across the team's lanes
// through workgroup memory in lane order, and every lane of the team then sees the same scores.
// The reduction order depends only on the row's own length, so a row's result does not depend on
// the rest of the batch.
//
// Written for llvmpipe, where a team is one 8-wide SIMD group of a CPU thread:
//   - each storage or workgroup load costs a per-lane loop, so loads are as wide as possible and
//     each K/V element is loaded once for all HPW heads;
//   - per-lane arrays stay small so their loops unroll into registers;
//   - llvmpipe ends all loops of a SIMD group after 65535 iterations in total, so long contexts
//     are spread over GROUPS teams (each with its own count) and the per-tile work loops little.

struct Params {
  rows: u32,
  layer: u32,
  numHeads: u32,
  numKvHeads: u32,
  blockSize: u32,
  maxSlots: u32,
  maxBlocksPerSeq: u32,
  window: u32, // 0: none
  ropeHalf4: u32,
  ropeScale: f32,
  scoreScale: f32,
  softcap: f32, // 0: none
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> kCache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vCache: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> blockTable: array<u32>;
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(6) var<storage, read> rowPos: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;
// f32 [ropeHalf4 * 4]: RoPE's inverse frequencies.
@group(0) @binding(8) var<storage, read> invFreq: array<vec4<f32>>;

const LANES: u32 = 8u;
const GROUPS: u32 = 4u;
// Positions per tile, in quads of 4 (TP4 = 4 is written out in softmaxStep).
const TP: u32 = 16u;
const TP4: u32 = TP / 4u;
const HD4: u32 = HD / 4u;
// vec4s per chunk: a vec4<u32> holds 8 f16 values, 4 f32 values or 16 q8_0 values.
const VPC: u32 = KV_F16 + 1u + 3u * KV_Q8;
const CHUNKS: u32 = HD4 / VPC;
// Chunks per lane.
const CPL: u32 = (CHUNKS + LANES - 1u) / LANES;
// Per-lane vec4s of q (and of the accumulator) for all HPW heads.
const QN: u32 = HPW * CPL * VPC;
// Score vec4s each lane sums in the cross-lane reduction.
const ITEMS_PER_LANE: u32 = (HPW * TP4 + LANES - 1u) / LANES;
// Finite stand-in for -inf so exp(a - b) never sees inf - inf.
const NEG_BIG: f32 = -3.0e38;

// partial[team][(g * TP4 + t4) * LANES + lane]: a lane's share of q.k for 4 positions of head g.
var<workgroup> partial: array<array<vec4<f32>, HPW * TP4 * LANES>, GROUPS>;
// scores[team][g * TP4 + t4]: the team's tile scores of head g, 4 positions per vec4.
var<workgroup> scores: array<array<vec4<f32>, HPW * TP4>, GROUPS>;
// Each team's final state, for the merge.
var<workgroup> teamMax: array<array<f32, HPW>, GROUPS>;
var<workgroup> teamSum: array<array<f32, HPW>, GROUPS>;
var<workgroup> teamAcc: array<array<vec4<f32>, QN * LANES>, GROUPS>;

// The layer's block stride and, for q8_0, where a block's scales start, in vec4s (set by main).
var<private> blockV4: u32;
var<private> quantV4: u32;

fn unpackChunk(w: vec4<u32>) -> array<vec4<f32>, VPC> {
  var r: array<vec4<f32>, VPC>;
  if (KV_F16 == 1u) {
    r[0] = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
    r[VPC - 1u] = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
  } else {
    r[0] = bitcast<vec4<f32>>(w);
  }
  return r;
}

// Sign-extends the four int8s of a word (element 0 in the low byte).
fn int8x4(w: u32) -> vec4<f32> {
  return vec4<f32>((vec4<i32>(bitcast<i32>(w)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// q8_0: the 16 values of chunk `ch` of a row, from its quant vec4 and its group's scale word.
fn dequantChunk(w: vec4<u32>, scaleWord: u32, ch: u32) -> array<vec4<f32>, VPC> {
  var r: array<vec4<f32>, VPC>;
  // Chunk ch is half of group ch / 2, whose f16 scale is half (ch / 2) % 2 of the word.
  let d = unpack2x16float(scaleWord)[(ch / 2u) % 2u];
  r[0] = int8x4(w.x) * d;
  r[1u % VPC] = int8x4(w.y) * d;
  r[2u % VPC] = int8x4(w.z) * d;
  r[3u % VPC] = int8x4(w.w) * d;
  return r;
}

// q8_0: the u32 index, in the cache, of the scale word of chunk `ch` of the row at `base`.
fn scaleWordIndex(base: u32, ch: u32) -> u32 {
  let inBlock = base % blockV4;
  return (base - inBlock + quantV4) * 4u + (inBlock / CHUNKS) * SW + ch / 4u;
}

fn loadK(base: u32, ch: u32) -> array<vec4<f32>, VPC> {
  if (KV_Q8 == 1u) {
    let s = scaleWordIndex(base, ch);
    return dequantChunk(kCache[base + ch], kCache[s / 4u][s % 4u], ch);
  }
  return unpackChunk(kCache[base + ch]);
}

fn loadV(base: u32, ch: u32) -> array<vec4<f32>, VPC> {
  if (KV_Q8 == 1u) {
    let s = scaleWordIndex(base, ch);
    return dequantChunk(vCache[base + ch], vCache[s / 4u][s % 4u], ch);
  }
  return unpackChunk(vCache[base + ch]);
}

// Index, in chunks, of position j's kv head in this layer's cache.
fn kvChunk(tableRow: u32, j: u32, kvHead: u32) -> u32 {
  let block = blockTable[tableRow + j / params.blockSize];
  return block * blockV4 + ((j % params.blockSize) * params.numKvHeads + kvHead) * CHUNKS;
}

// This lane's share of q_g . k for the position whose chunks start at `base`, per head (zeros
// unless `live`, i.e. the position is within the row).
fn partialDots(q: ptr<function, array<vec4<f32>, QN>>, base: u32, live: bool, lane: u32) -> array<f32, HPW> {
  var d: array<f32, HPW>;
  for (var g = 0u; g < HPW; g++) { d[g] = 0.0; }
  if (live) {
    for (var i = 0u; i < CPL; i++) {
      let ch = lane + i * LANES;
      if (ch < CHUNKS) {
        let k4 = loadK(base, ch);
        for (var g = 0u; g < HPW; g++) {
          var sum = vec4<f32>(0.0);
          for (var u = 0u; u < VPC; u++) { sum += (*q)[(g * CPL + i) * VPC + u] * k4[u]; }
          d[g] += sum.x + sum.y + sum.z + sum.w;
        }
      }
    }
  }
  return d;
}

// acc_g += p[g] * v over this lane's chunks of the position at `base` (only when `live`).
fn addValues(acc: ptr<function, array<vec4<f32>, QN>>, base: u32, live: bool, lane: u32, p: array<f32, HPW>) {
  if (!live) { return; }
  for (var i = 0u; i < CPL; i++) {
    let ch = lane + i * LANES;
    if (ch < CHUNKS) {
      let v4 = loadV(base, ch);
      for (var g = 0u; g < HPW; g++) {
        for (var u = 0u; u < VPC; u++) { (*acc)[(g * CPL + i) * VPC + u] += p[g] * v4[u]; }
      }
    }
  }
}

// Partial dot products of positions j0 + 4*t4 .. +3 into the team's `partial` (blockSize % 4 == 0,
// so the four share a block; j0 is a multiple of 4). Positions outside lo..n-1 are not read.
fn partialQuad(q: ptr<function, array<vec4<f32>, QN>>, tableRow: u32, kvHead: u32, stride: u32, j0: u32,
               t4: u32, lo: u32, n: u32, team: u32, lane: u32) {
  let j = j0 + t4 * 4u;
  let base = select(0u, kvChunk(tableRow, j, kvHead), j < n && j + 3u >= lo);
  let d0 = partialDots(q, base, j < n && j >= lo, lane);
  let d1 = partialDots(q, base + stride, j + 1u < n && j + 1u >= lo, lane);
  let d2 = partialDots(q, base + 2u * stride, j + 2u < n && j + 2u >= lo, lane);
  let d3 = partialDots(q, base + 3u * stride, j + 3u < n && j + 3u >= lo, lane);
  for (var g = 0u; g < HPW; g++) {
    partial[team][(g * TP4 + t4) * LANES + lane] = vec4<f32>(d0[g], d1[g], d2[g], d3[g]);
  }
}

// Adds positions j0 + 4*t4 .. +3, weighted by their softmax numerators, to the accumulators.
fn addQuad(acc: ptr<function, array<vec4<f32>, QN>>, runMax: ptr<function, array<f32, HPW>>,
           runSum: ptr<function, array<f32, HPW>>, tableRow: u32, kvHead: u32, stride: u32, j0: u32,
           t4: u32, lo: u32, n: u32, team: u32, lane: u32) {
  let j = j0 + t4 * 4u;
  if (j >= n || j + 3u < lo) { return; }
  var p0: array<f32, HPW>;
  var p1: array<f32, HPW>;
  var p2: array<f32, HPW>;
  var p3: array<f32, HPW>;
  for (var g = 0u; g < HPW; g++) {
    let p = exp(scores[team][g * TP4 + t4] - (*runMax)[g]);
    (*runSum)[g] += p.x + p.y + p.z + p.w;
    p0[g] = p.x;
    p1[g] = p.y;
    p2[g] = p.z;
    p3[g] = p.w;
  }
  let base = kvChunk(tableRow, j, kvHead);
  addValues(acc, base, j >= lo, lane, p0);
  addValues(acc, base + stride, j + 1u < n && j + 1u >= lo, lane, p1);
  addValues(acc, base + 2u * stride, j + 2u < n && j + 2u >= lo, lane, p2);
  addValues(acc, base + 3u * stride, j + 3u < n && j + 3u >= lo, lane, p3);
}

@compute @workgroup_size(LANES * GROUPS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h0 = wid.x * HPW;
  let m = wid.y;
  if (m >= params.rows) { return; }
  let lane = lid % LANES;
  let team = lid / LANES;
  let kvHead = h0 / (params.numHeads / params.numKvHeads);
  let n = rowPos[m] + 1u;
  // The window's first position; rounds start at a multiple of 4 so quads stay within a block.
  let lo = select(0u, n - params.window, params.window > 0u && n > params.window);
  let tableRow = (params.layer * params.maxSlots + rowSlot[m]) * params.maxBlocksPerSeq;
  let qBase = m * (params.numHeads + 2u * params.numKvHeads) * HD4 + h0 * HD4;
  let scale = params.scoreScale;
  // Chunks between consecutive positions of one block.
  let stride = params.numKvHeads * CHUNKS;
  quantV4 = params.blockSize * stride;
  blockV4 = quantV4 + (params.blockSize * params.numKvHeads * SW + 3u) / 4u;

  // q[(g * CPL + i) * VPC + u]: vec4 u of this lane's i-th chunk of head h0 + g, rotated (its
  // partners are read from qkv too) and scaled. One turn serves all HPW heads.
  var q: array<vec4<f32>, QN>;
  var acc: array<vec4<f32>, QN>;
  var runMax: array<f32, HPW>;
  var runSum: array<f32, HPW>;
  // A q value's RoPE partner is `ropeHalf` vec4s away; vec4s from 2 * ropeHalf on are not turned.
  let ropeHalf = params.ropeHalf4;
  for (var i = 0u; i < CPL; i++) {
    let ch = lane + i * LANES;
    for (var u = 0u; u < VPC; u++) {
      let d = ch * VPC + u;
      let turned = ch < CHUNKS && d < 2u * ropeHalf;
      let upper = d >= ropeHalf;
      let partner = select(d + ropeHalf, d - ropeHalf, upper);
      var turn = RopeTurn(vec4<f32>(0.0), vec4<f32>(0.0));
      if (turned) { turn = ropeTurn(n - 1u, invFreq[select(d, d - ropeHalf, upper)]); }
      for (var g = 0u; g < HPW; g++) {
        let k = (g * CPL + i) * VPC + u;
        q[k] = vec4<f32>(0.0);
        if (ch < CHUNKS) {
          let head = qBase + g * HD4;
          var x = qkv[head + d];
          if (turned) { x = ropeRotate(x, qkv[head + partner], turn, upper) * params.ropeScale; }
          q[k] = x * scale;
        }
        acc[k] = vec4<f32>(0.0);
      }
    }
  }
  for (var g = 0u; g < HPW; g++) {
    runMax[g] = NEG_BIG;
    runSum[g] = 0.0;
  }

  // Every team runs the same number of rounds (barriers need it); tiles past the end are masked.
  for (var round = lo & ~3u; round < n; round += GROUPS * TP) {
    let j0 = round + team * TP;
    for (var t4 = 0u; t4 < TP4; t4++) { partialQuad(&q, tableRow, kvHead, stride, j0, t4, lo, n, team, lane); }
    workgroupBarrier();

    // Sum the partials across the team's lanes (lane order); positions outside lo..n-1 get -inf.
    for (var r = 0u; r < ITEMS_PER_LANE; r++) {
      let it = lane + r * LANES;
      if (it < HPW * TP4) {
        var s = vec4<f32>(0.0);
        for (var l = 0u; l < LANES; l++) { s += partial[team][it * LANES + l]; }
        if (params.softcap > 0.0) { s = params.softcap * tanhStable4(s / params.softcap); }
        let j4 = j0 + (it % TP4) * 4u + vec4<u32>(0u, 1u, 2u, 3u);
        scores[team][it] = select(s, vec4<f32>(NEG_BIG), j4 >= vec4<u32>(n) | j4 < vec4<u32>(lo));
      }
    }
    workgroupBarrier();

    // Online softmax: the team's lanes see the same scores and keep the same max and sum.
    for (var g = 0u; g < HPW; g++) {
      let s4 = max(max(scores[team][g * TP4], scores[team][g * TP4 + 1u]),
                   max(scores[team][g * TP4 + 2u], scores[team][g * TP4 + 3u]));
      let tileMax = max(max(s4.x, s4.y), max(s4.z, s4.w));
      if (tileMax > runMax[g]) {
        let corr = exp(runMax[g] - tileMax);
        runSum[g] *= corr;
        for (var k = 0u; k < CPL * VPC; k++) { acc[g * CPL * VPC + k] *= corr; }
        runMax[g] = tileMax;
      }
    }
    for (var t4 = 0u; t4 < TP4; t4++) {
      addQuad(&acc, &runMax, &runSum, tableRow, kvHead, stride, j0, t4, lo, n, team, lane);
    }
  }

  // Merge the teams' states in team order; team t writes heads g = t, t + GROUPS, ...
  for (var g = 0u; g < HPW; g++) {
    if (lane == 0u) {
      teamMax[team][g] = runMax[g];
      teamSum[team][g] = runSum[g];
    }
  }
  for (var k = 0u; k < QN; k++) { teamAcc[team][k * LANES + lane] = acc[k]; }
  workgroupBarrier();
  for (var g = team; g < HPW; g += GROUPS) {
    var allMax = NEG_BIG;
    for (var t = 0u; t < GROUPS; t++) { allMax = max(allMax, teamMax[t][g]); }
    var total = 0.0;
    for (var t = 0u; t < GROUPS; t++) { total += exp(teamMax[t][g] - allMax) * teamSum[t][g]; }
    for (var i = 0u; i < CPL; i++) {
      let ch = lane + i * LANES;
      if (ch < CHUNKS) {
        for (var u = 0u; u < VPC; u++) {
          let k = (g * CPL + i) * VPC + u;
          var sum = vec4<f32>(0.0);
          for (var t = 0u; t < GROUPS; t++) { sum += exp(teamMax[t][g] - allMax) * teamAcc[t][k * LANES + lane]; }
          out[(m * params.numHeads + h0 + g) * HD4 + ch * VPC + u] = sum / total;
        }
      }
    }
  }
}
