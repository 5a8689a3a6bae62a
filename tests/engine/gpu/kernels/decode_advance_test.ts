// shaders/decode_advance.wgsl against a CPU reference of the same state machine, on random group
// states (budgets, samples taken, finished rows, stop lists of 0..MAX_GROUP_STOP_IDS+2 ids of which
// the GPU checks the first MAX_GROUP_STOP_IDS) and sample counts that fill one workgroup, spill
// into a second and a third (1, 7, 64, 65, 130), with samples in shuffled row order. The kernel
// moves only integers, so the bound is exact equality of every word of every buffer it can
// write (positions, ids, state), so a word it should leave alone but writes is caught too.

import { readU32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import {
  bindDecodeAdvance,
  GROUP_STATE_WORDS,
  groupStateWords,
  MAX_GROUP_STOP_IDS,
} from "../../../../engine/gpu/kernels/decode_advance.ts";
import { assertEquals } from "../../../helpers/testing.ts";
import { testGpu } from "../../../helpers/gpu.ts";
import { rng, testSeed } from "../../../helpers/random.ts";

interface Case {
  state: Uint32Array;
  sampleRow: Uint32Array;
  sampleSlot: Uint32Array;
  rowPos: Uint32Array;
  samplePos: Uint32Array;
  nextIds: Uint32Array;
}

/** The reference: what `advance` does to each sample (see the shader's header). */
function advanceReference(c: Case): Case {
  const out = {
    state: c.state.slice(),
    sampleRow: c.sampleRow,
    sampleSlot: c.sampleSlot,
    rowPos: c.rowPos.slice(),
    samplePos: c.samplePos.slice(),
    nextIds: c.nextIds.slice(),
  };
  const S = c.sampleRow.length;
  for (let s = 0; s < S; s++) {
    const b = s * GROUP_STATE_WORDS, st = out.state, slot = c.sampleSlot[s];
    if (st[b + 2] !== 0) {
      out.nextIds[slot] = st[b + 3];
      continue;
    }
    const id = c.nextIds[slot];
    st[b + 1]++;
    const stops = Array.from(st.subarray(b + 5, b + 5 + Math.min(st[b + 4], MAX_GROUP_STOP_IDS)));
    if (st[b + 1] >= st[b] || stops.includes(id)) {
      st[b + 2] = 1;
      out.nextIds[slot] = st[b + 3];
      continue;
    }
    out.rowPos[c.sampleRow[s]]++;
    out.samplePos[s]++;
    st[b + 3] = id;
  }
  return out;
}

function randomCase(next: () => number, S: number): Case {
  const int = (n: number) => Math.floor(next() * n);
  const slots = 2 * S + 3;
  // Each sample its own row and slot, in shuffled orders.
  const shuffled = (n: number) => {
    const a = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = int(i + 1);
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  };
  const rowOrder = shuffled(S), slotOrder = shuffled(slots);
  const budgets = Array.from({ length: S }, () => 1 + int(6));
  const nextIds = Uint32Array.from({ length: slots }, () => int(50));
  const stopIds = Array.from({ length: S }, (_, s) => {
    const ids = Array.from({ length: int(MAX_GROUP_STOP_IDS + 3) }, () => int(50));
    // Often the id the row is about to read, at any place in its list.
    if (ids.length > 0 && next() < 0.5) ids[int(ids.length)] = nextIds[slotOrder[s]];
    return ids;
  });
  const state = groupStateWords(budgets, stopIds);
  for (let s = 0; s < S; s++) {
    const b = s * GROUP_STATE_WORDS;
    state[b + 1] = int(budgets[s] + 1); // taken: any, up to and at the budget
    state[b + 2] = next() < 0.25 ? 1 : 0; // finished earlier
    state[b + 3] = 1000 + int(50); // input id noted before
  }
  return {
    state,
    sampleRow: Uint32Array.from(rowOrder),
    sampleSlot: Uint32Array.from(slotOrder.slice(0, S)),
    rowPos: Uint32Array.from({ length: S }, () => int(4000)),
    samplePos: Uint32Array.from({ length: S }, () => int(4000)),
    nextIds,
  };
}

Deno.test("decode_advance: begin and advance match the CPU reference exactly", async (t) => {
  const seed = testSeed();
  const gpu = await testGpu();
  for (const S of [1, 7, 64, 65, 130]) {
    await t.step(`${S} samples (seed ${seed})`, async () => {
      const c = randomCase(rng(seed + S), S);
      const bufs = {
        state: uploadStorage(gpu, c.state),
        sampleRow: uploadStorage(gpu, c.sampleRow),
        sampleSlot: uploadStorage(gpu, c.sampleSlot),
        rowPos: uploadStorage(gpu, c.rowPos),
        samplePos: uploadStorage(gpu, c.samplePos),
        nextIds: uploadStorage(gpu, c.nextIds),
      };
      const kernel = bindDecodeAdvance(gpu, bufs);
      const read = async () => ({
        state: await readU32(gpu, bufs.state, c.state.length),
        rowPos: await readU32(gpu, bufs.rowPos, S),
        samplePos: await readU32(gpu, bufs.samplePos, S),
        nextIds: await readU32(gpu, bufs.nextIds, c.nextIds.length),
      });
      const run = (encode: (pass: GPUComputePassEncoder) => void) => {
        const encoder = gpu.device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        encode(pass);
        pass.end();
        gpu.device.queue.submit([encoder.finish()]);
      };

      // advance, from the random state.
      run((pass) => kernel.encodeAdvance(pass, S));
      const want = advanceReference(c);
      const got = await read();
      assertEquals(got.state, want.state);
      assertEquals(got.rowPos, want.rowPos);
      assertEquals(got.samplePos, want.samplePos);
      assertEquals(got.nextIds, want.nextIds);

      // begin: each sample's input id is its slot's id now; nothing else moves.
      run((pass) => kernel.encodeBegin(pass, S));
      const after = await read();
      const noted = want.state.slice();
      for (let s = 0; s < S; s++) {
        noted[s * GROUP_STATE_WORDS + 3] = want.nextIds[c.sampleSlot[s]];
      }
      assertEquals(after.state, noted);
      assertEquals(after.rowPos, want.rowPos);
      assertEquals(after.nextIds, want.nextIds);
      for (const b of Object.values(bufs)) b.destroy();
    });
  }
});
