// Request (runtime/request/request.ts): its state machine through its own methods — admitted,
// prefilling rows (recomputes counted), decoding, paused with its KV freed or swapped, paused
// keeping its newest blocks and resumed in place (dropped positions refilled first), its host copy's
// extent and epoch, cancelled, ended once — and that no code outside request.ts may write its
// fields (the type checker refuses it).

import { assert, assertEquals } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";

const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

Deno.test("request: admitted, prefilled in chunks, decoding, sampled", () => {
  const req = testRequest(1, { ids: ids(6), maxTokens: 2 });
  assertEquals([req.state, req.slot, req.resumable], ["waiting", -1, true]);
  req.admit(3, 7, 2);
  assertEquals([req.state, req.slot, req.admittedAt, req.computed], ["prefilling", 3, 7, 2]);
  assertEquals([2, 3, 4].map((pos) => req.rowAt(pos)), [false, false, false]);
  req.computeTo(5);
  req.rowAt(5);
  req.computeTo(6);
  req.startDecoding();
  req.issueSample();
  assertEquals([req.state, req.inflight, req.resumable], ["decoding", 1, false]);
  req.accept({ id: 42, logprob: -1, top: [] });
  assertEquals([req.generated, req.inflight, req.prefillTarget, req.tokenAt(6)], [[42], 0, 7, 42]);
  req.accept({ id: 43, logprob: -1, top: [] });
  assertEquals(req.finish?.reason, "length");
  assertEquals(req.state, "finished");
});

Deno.test("request: paused, its KV freed or swapped; rows it computed before are recomputes", () => {
  const req = testRequest(1, { ids: ids(8) });
  req.admit(0, 0, 0);
  for (let pos = 0; pos < 8; pos++) req.rowAt(pos);
  req.computeTo(8);
  req.pause(true);
  assertEquals([req.state, req.slot, req.computed, req.swapped, req.preemptions], [
    "paused",
    -1,
    0,
    true,
    1,
  ]);
  req.admit(1, 1, 4);
  assertEquals(req.swapped, false, "its KV came back with the admission");
  assertEquals([req.rowAt(4), req.rowAt(8)], [true, false]);
  req.pause();
  assertEquals([req.swapped, req.preemptions], [false, 2]);
});

Deno.test("request: paused keeping its newest blocks, resumed in place: the dropped positions first", () => {
  const req = testRequest(1, { ids: ids(10) });
  req.admit(0, 0, 0);
  req.computeTo(10);
  req.pauseKeepingNewest(8);
  assertEquals([req.state, req.dropped, req.computed], ["paused", 8, 10]);
  req.resumeInPlace(2, 5);
  assertEquals([req.state, req.slot, req.dropped, req.computed], ["prefilling", 2, 0, 9]);
  assertEquals(req.takeRefill(3), { from: 0, to: 3 });
  assertEquals(req.takeRefill(10), { from: 3, to: 8 });
  assertEquals(req.refill, null);
  // Its remaining KV taken back while it waits: it is computed again from its ids.
  req.pauseKeepingNewest(4);
  req.forgetKv();
  assertEquals([req.computed, req.dropped], [0, 0]);
});

Deno.test("request: its host copy's extent lands only within its epoch", () => {
  const req = testRequest(1, { ids: ids(4) });
  req.hostCopyIssued(8);
  const epoch = req.hostEpoch;
  assert(!req.swapped || req.resumable);
  req.hostCopyLanded(8, epoch);
  assertEquals([req.hostIssued, req.hostTokens], [8, 8]);
  req.hostCopyLanded(4, epoch);
  assertEquals(req.hostTokens, 8, "never shrinks");
  req.restartHostCopy();
  assertEquals(req.hostIssued, 0);
  req.hostCopyIssued(12);
  req.releaseHostCopy();
  req.hostCopyLanded(12, epoch);
  assertEquals([req.hostIssued, req.hostTokens, req.hostEpoch], [0, 0, epoch + 1]);
  assertEquals([req.countSwapOut(), req.countSwapOut(), req.swapsOut], [1, 2, 2]);
});

Deno.test("request: a swapped request is resumable only once its copy out has landed", () => {
  const req = testRequest(1, { ids: ids(4) });
  req.admit(0, 0, 0);
  req.hostCopyIssued(4);
  req.pause(true);
  assert(!req.resumable);
  req.hostCopyLanded(4, req.hostEpoch);
  assert(req.resumable);
});

Deno.test("request: cancelled, it ends once and drops what its buffer holds; priority changes", async () => {
  const req = testRequest(1, { ids: ids(4), priority: 3 });
  req.setPriority(-2);
  assertEquals(req.priority, -2);
  req.cancel();
  req.end("stop");
  assertEquals([req.cancelled, req.state, (await req.done).reason], [
    true,
    "finished",
    "cancelled",
  ]);
  assert(req.buffer.finished);
});

Deno.test("request: outside request.ts no field of it can be written (the type checker says so)", () => {
  const req = testRequest(1, { ids: ids(4) }), other = testRequest(2, { ids: ids(4) });
  // Each write below must fail to compile, since `deno check` (and so `deno test`) rejects an
  // expected error that does not come. They are never run: `readonly` is the type checker's,
  // nothing at run time.
  const writes: [string, () => unknown][] = [
    // @ts-expect-error: read-only outside request.ts
    ["state", () => req.state = "finished"],
    // @ts-expect-error: read-only outside request.ts
    ["slot", () => req.slot = 0],
    // @ts-expect-error: read-only outside request.ts
    ["generated", () => req.generated = []],
    // @ts-expect-error: its ids are read-only too
    ["generated", () => req.generated.push(1)],
    // @ts-expect-error: read-only outside request.ts
    ["computed", () => req.computed = 0],
    // @ts-expect-error: read-only outside request.ts
    ["computedHigh", () => req.computedHigh = 0],
    // @ts-expect-error: read-only outside request.ts
    ["issued", () => req.issued++],
    // @ts-expect-error: read-only outside request.ts
    ["preemptions", () => req.preemptions++],
    // @ts-expect-error: read-only outside request.ts
    ["hostTokens", () => req.hostTokens = 0],
    // @ts-expect-error: read-only outside request.ts
    ["hostIssued", () => req.hostIssued = 0],
    // @ts-expect-error: read-only outside request.ts
    ["hostEpoch", () => req.hostEpoch++],
    // @ts-expect-error: read-only outside request.ts
    ["swapped", () => req.swapped = true],
    // @ts-expect-error: read-only outside request.ts
    ["swapsOut", () => req.swapsOut += 1],
    // @ts-expect-error: read-only outside request.ts
    ["dropped", () => req.dropped = 0],
    // @ts-expect-error: read-only outside request.ts
    ["refill", () => req.refill = null],
    // @ts-expect-error: what it holds is read-only too
    ["refill", () => req.refill!.next = 0],
    // @ts-expect-error: read-only outside request.ts
    ["admittedAt", () => req.admittedAt = 0],
    // @ts-expect-error: read-only outside request.ts
    ["priority", () => req.priority = 0],
    // @ts-expect-error: read-only outside request.ts
    ["cancelled", () => req.cancelled = true],
    // @ts-expect-error: read-only outside request.ts
    ["finish", () => req.finish = null],
    // @ts-expect-error: what it holds is read-only too
    ["finish", () => req.finish!.reason = "stop"],
    // @ts-expect-error: read-only outside request.ts
    ["streamCut", () => req.streamCut = true],
    // @ts-expect-error: read-only outside request.ts
    ["buffer", () => req.buffer = other.buffer],
    // @ts-expect-error: read-only outside request.ts
    ["done", () => req.done = other.done],
    // @ts-expect-error: read-only outside request.ts
    ["id", () => req.id = 2],
    // @ts-expect-error: read-only outside request.ts
    ["spec", () => req.spec = other.spec],
    // @ts-expect-error: read-only outside request.ts
    ["arrivedAt", () => req.arrivedAt = 0],
    // @ts-expect-error: read-only outside request.ts
    ["grammar", () => req.grammar = null],
    // @ts-expect-error: read-only outside request.ts
    ["pooled", () => req.pooled = null],
  ];
  // Every field a request has is among them: a new one is added here too.
  assertEquals([...new Set(writes.map(([field]) => field))].sort(), Object.keys(req).sort());
});
