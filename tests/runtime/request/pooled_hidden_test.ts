// Which prefill rows an embedding request's pooling reads, chunk by chunk, and what it adds up to:
// every row read once over the request's life, also when a preemption prefills it again.

import { PooledHidden } from "../../../runtime/request/pooled_hidden.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

Deno.test("PooledHidden: last reads the final row of the last chunk only", () => {
  const p = new PooledHidden("last", 10);
  assertEquals(p.mark(0, 4, 2), null);
  assertEquals(p.mark(4, 10, 0), { first: 5, count: 1 });
  assert(!p.done);
  assertThrows(() => p.vector());
  assert(p.add(Float32Array.of(1, 2)));
  assertEquals([...p.vector()], [1, 2]);
  // Prefilled again after a preemption: nothing more is read.
  assertEquals(p.mark(0, 10, 0), null);
});

Deno.test("PooledHidden: cls reads the first row once", () => {
  const p = new PooledHidden("cls", 7);
  assertEquals(p.mark(0, 3, 5), { first: 5, count: 1 });
  assertEquals(p.mark(3, 7, 0), null);
  assertEquals(p.mark(0, 7, 0), null);
  assert(p.add(Float32Array.of(3)));
  assertEquals([...p.vector()], [3]);
});

Deno.test("PooledHidden: mean sums each chunk's rows once, and divides by the length", () => {
  const p = new PooledHidden("mean", 6);
  assertEquals(p.mark(0, 2, 1), { first: 1, count: 2 });
  // Preempted after the first chunk: its prefill starts again; rows 0..1 are not read twice.
  assertEquals(p.mark(0, 4, 0), { first: 2, count: 2 });
  assertEquals(p.mark(4, 6, 3), { first: 3, count: 2 });
  assert(!p.add(Float32Array.of(1, 0)));
  assert(!p.add(Float32Array.of(2, 0)));
  assert(p.add(Float32Array.of(3, 6)));
  assertEquals([...p.vector()], [1, 1]);
});
