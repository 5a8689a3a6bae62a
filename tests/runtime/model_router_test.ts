// The model router's rules over fake models (no GPU): one load for concurrent first requests,
// keep-alive unloads (counted from the end of a model's last request, 0 and forever included),
// LRU eviction under --max-loaded and under the device budget, pinned models kept, a busy model
// never evicted (the load waits for it), unknown names answered with the ids, failed loads retried.

import {
  type LoadedModel,
  ModelRouter,
  ModelUnavailable,
  type RouterOptions,
  UnknownModel,
} from "../../runtime/model_router.ts";
import { entry } from "../helpers/model_router.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

/** The error `fn` rejects with, checked to be a `type`. */
async function rejection<E>(
  fn: () => Promise<unknown>,
  type: new (...a: never[]) => E,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    assert(err instanceof type, String(err));
    return err as E;
  }
  throw new Error("expected a rejection");
}

interface FakeModel extends LoadedModel {
  closed: boolean;
  /** Requests it runs (the router reads inFlight()). */
  running: number;
}

function fakeModel(deviceBytes = 100): FakeModel {
  const m: FakeModel = {
    kind: "chat",
    chat: null,
    embedder: null,
    reranker: null,
    deviceBytes,
    hostBytes: 0,
    closed: false,
    running: 0,
    inFlight: () => m.running,
    close: () => {
      m.closed = true;
      return Promise.resolve();
    },
  };
  return m;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fixture(ids: string[], options: Partial<RouterOptions> = {}) {
  const opened: string[] = [];
  const models = new Map<string, FakeModel>();
  let gate: Promise<void> = Promise.resolve();
  const router = new ModelRouter(ids.map((id) => entry(id, 100)), {
    open: async (e) => {
      opened.push(e.id);
      await gate;
      const m = fakeModel();
      models.set(e.id, m);
      return m;
    },
    keepAliveMs: Infinity,
    maxLoaded: 8,
    deviceBudgetBytes: null,
    extraDeviceBytes: 0,
    pinned: [],
    pollMs: 5,
    ...options,
  });
  return {
    router,
    opened,
    models,
    hold: () => {
      let open!: () => void;
      gate = new Promise((r) => open = r);
      return open;
    },
  };
}

const loadedIds = (router: ModelRouter) => router.loaded().map((l) => l.id).sort();

Deno.test("model router: two requests for a cold model load it once", async () => {
  const { router, opened, hold } = fixture(["a", "b"]);
  const release = hold();
  const first = router.acquire("a");
  const second = router.acquire("a");
  await sleep(5);
  assertEquals(router.list().find((m) => m.id === "a")!.status, "loading");
  release();
  const [x, y] = await Promise.all([first, second]);
  assertEquals(opened, ["a"]);
  assert(x.model === y.model);
  x.release();
  y.release();
  assertEquals(loadedIds(router), ["a"]);
  await router.close();
});

Deno.test("model router: names, aliases, default and :latest; an unknown name lists the ids", async () => {
  const router = new ModelRouter([
    { ...entry("qwen"), aliases: ["Qwen/Qwen3-0.6B"] },
    entry("m:q8"),
  ], {
    open: () => Promise.resolve(fakeModel()),
    keepAliveMs: Infinity,
    maxLoaded: 2,
    deviceBudgetBytes: null,
    extraDeviceBytes: 0,
    pinned: [],
  });
  assertEquals(router.idOf("Qwen/Qwen3-0.6B"), "qwen");
  assertEquals(router.idOf("default"), "qwen");
  assertEquals(router.idOf(undefined), "qwen");
  assertEquals(router.idOf("qwen:latest"), "qwen");
  assertEquals(router.idOf("m:q8"), "m:q8");
  const err = await rejection(() => router.acquire("llama"), UnknownModel);
  assertEquals(err.ids, ["qwen", "m:q8"]);
  assert(err.message.includes("qwen, m:q8"));
  await router.close();
});

Deno.test("model router: the keep-alive counts from a model's last request, not from its lease", async () => {
  const { router, models } = fixture(["a"], { keepAliveMs: 40 });
  const lease = await router.acquire("a");
  const a = models.get("a")!;
  a.running = 1; // a stream still playing out after the route handed it over
  lease.release();
  await sleep(120);
  assert(!a.closed, "a model with a request in flight is never unloaded");
  a.running = 0;
  await sleep(15);
  assert(!a.closed, "its keep-alive starts when it goes idle");
  await sleep(80);
  assert(a.closed, "then it is unloaded");
  assertEquals(router.list()[0].status, "unloaded");
  assertEquals(router.counts, { loads: 1, unloads: 1, evictions: 0 });
  await router.close();
});

Deno.test("model router: a request's keep-alive (0, forever) becomes the model's", async () => {
  const { router, models } = fixture(["a", "b"], { keepAliveMs: 30 });
  (await router.acquire("a", { keepAliveMs: 0 })).release();
  (await router.acquire("b", { keepAliveMs: Infinity })).release();
  await sleep(60);
  assert(models.get("a")!.closed, "keep_alive 0: unloaded once idle");
  assert(!models.get("b")!.closed, "keep_alive -1: kept");
  assertEquals(router.list().find((m) => m.id === "b")!.expiresAtMs, null);
  await router.unload("b");
  assert(models.get("b")!.closed, "unload() ends it");
  await router.close();
});

Deno.test("model router: past --max-loaded the least recently used idle model is evicted", async () => {
  const { router, models } = fixture(["a", "b", "c"], { maxLoaded: 2 });
  (await router.acquire("a")).release();
  await sleep(2);
  (await router.acquire("b")).release();
  await sleep(2);
  (await router.acquire("a")).release(); // a is now the more recent
  (await router.acquire("c")).release();
  assertEquals(loadedIds(router), ["a", "c"]);
  assert(models.get("b")!.closed);
  assertEquals(router.counts.evictions, 1);
  await router.close();
});

Deno.test("model router: the device budget evicts as --max-loaded does; a model over it is refused", async () => {
  // Each model: 100 bytes of weights on disk, 100 on the device once loaded; budget 250.
  const { router } = fixture(["a", "b", "c"], { deviceBudgetBytes: 250 });
  (await router.acquire("a")).release();
  (await router.acquire("b")).release();
  (await router.acquire("c")).release();
  assertEquals(loadedIds(router), ["b", "c"]);
  const tight = fixture(["a"], { deviceBudgetBytes: 50 });
  const err = await rejection(() => tight.router.acquire("a"), ModelUnavailable);
  assertEquals(err.reason, "no_room");
  await router.close();
  await tight.router.close();
});

Deno.test("model router: a pinned model is loaded at start and never evicted or expired", async () => {
  const { router, models } = fixture(["p", "a", "b"], {
    maxLoaded: 2,
    keepAliveMs: 10,
    pinned: ["p"],
  });
  await router.loadPinned();
  (await router.acquire("a")).release();
  (await router.acquire("b")).release();
  await sleep(40);
  assert(!models.get("p")!.closed);
  assert(models.get("a")!.closed, "the unpinned one went");
  assertEquals(router.list().find((m) => m.id === "p")!.pinned, true);
  // With every loaded model pinned, there is no room, and it says so.
  const full = fixture(["p", "q"], { maxLoaded: 1, pinned: ["p"] });
  await full.router.loadPinned();
  const err = await rejection(() => full.router.acquire("q"), ModelUnavailable);
  assert(err.message.includes("pinned"), err.message);
  await router.close();
  await full.router.close();
});

Deno.test("model router: a busy model is not evicted; the load waits until it is idle", async () => {
  const { router, models } = fixture(["a", "b"], { maxLoaded: 1 });
  const lease = await router.acquire("a");
  const a = models.get("a")!;
  a.running = 1;
  lease.release();
  let loadedB = false;
  const b = router.acquire("b").then((l) => {
    loadedB = true;
    return l;
  });
  await sleep(40);
  assert(!loadedB && !a.closed, "b waits; a's stream is not cut");
  a.running = 0;
  (await b).release();
  assert(loadedB && a.closed);
  assertEquals(loadedIds(router), ["b"]);
  await router.close();
});

Deno.test("model router: a failed load is an error for its requests, and the next one tries again", async () => {
  let fail = true;
  const router = new ModelRouter([entry("a")], {
    open: () => fail ? Promise.reject(new Error("bad weights")) : Promise.resolve(fakeModel()),
    keepAliveMs: Infinity,
    maxLoaded: 1,
    deviceBudgetBytes: null,
    extraDeviceBytes: 0,
    pinned: [],
  });
  const err = await rejection(() => router.acquire("a"), ModelUnavailable);
  assertEquals(err.reason, "failed");
  assertEquals(router.list()[0].lastError, "bad weights");
  fail = false;
  (await router.acquire("a")).release();
  assertEquals(router.list()[0].status, "ready");
  await router.close();
});
