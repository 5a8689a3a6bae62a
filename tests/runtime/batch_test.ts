// Batch (runtime/batch.ts): the queue keeps arrival order with preempted requests at its head; a
// seated request takes a free slot and the next admission order; a slot given back is the next
// one taken.

import { Batch } from "../../runtime/batch.ts";
import { assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

Deno.test("batch: queue order, slots and admission order", () => {
  const batch = new Batch(2);
  const [a, b, c] = [1, 2, 3].map((id) => testRequest(id, { ids: [1] }));
  for (const r of [a, b, c]) batch.enqueue(r);
  assertEquals(batch.freeSlots, 2);
  assertEquals(batch.seat(a), { slot: 0, order: 0 });
  a.admit(0, 0, 0);
  assertEquals(batch.seat(c), { slot: 1, order: 1 });
  c.admit(1, 1, 0);
  assertEquals([batch.waiting, batch.running, batch.freeSlots], [[b], [a, c], 0]);
  batch.leave(a);
  a.pause();
  batch.requeue(a);
  assertEquals([batch.waiting, batch.running], [[a, b], [c]]);
  assertEquals(batch.seat(b), { slot: 0, order: 2 }, "the slot a gave back");
  batch.withdraw(a);
  assertEquals(batch.waiting, []);
});
