// Request (runtime/request/request.ts): its state machine through its own methods — admitted,
// prefilling rows (recomputes counted), decoding, paused with its KV freed or swapped, paused
// keeping its newest blocks and resumed in place (dropped positions refilled first), its host copy's
// extent and epoch, cancelled, ended once — and that no runtime/ file outside request.ts writes its
// fields directly.

import { join, relative } from "node:path";
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

/** Request's fields that carry its state. */
const FIELDS = [
  "state",
  "slot",
  "computed",
  "computedHigh",
  "issued",
  "preemptions",
  "hostTokens",
  "hostIssued",
  "hostEpoch",
  "swapped",
  "swapsOut",
  "dropped",
  "refill",
  "admittedAt",
  "priority",
  "cancelled",
  "finish",
  "streamCut",
];

Deno.test("request: no runtime/ file but request.ts writes a request's fields", async () => {
  const runtime = join(import.meta.dirname!, "../../../runtime");
  // `x.field =`, `x.field++`, `x.field += …`, `x.generated.push(` where x names a request (any
  // name but `this`, which is the file's own object).
  const write = new RegExp(
    String.raw`(?<![\w$.])(?!this\b)[A-Za-z_$][\w$]*(?:\.req)?\.(${FIELDS.join("|")})\s*` +
      String.raw`(?:=(?!=)|\+\+|--|[-+*/]=)|\.generated\.(?:push|splice|pop|length\s*=(?!=))`,
  );
  const offenders: string[] = [];
  const visit = async (dir: string) => {
    for await (const e of Deno.readDir(dir)) {
      const path = join(dir, e.name);
      if (e.isDirectory) await visit(path);
      else if (e.name.endsWith(".ts") && e.name !== "request.ts") {
        (await Deno.readTextFile(path)).split("\n").forEach((line, i) => {
          if (write.test(line)) {
            offenders.push(`${relative(runtime, path)}:${i + 1}: ${line.trim()}`);
          }
        });
      }
    }
  };
  await visit(runtime);
  // Other objects with a field of the same name are not requests.
  const allowed = [/extent\.issued = /];
  assertEquals(offenders.filter((o) => !allowed.some((a) => a.test(o))), []);
});
