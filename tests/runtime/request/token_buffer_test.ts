// The token-deposit pacer on fake time: exact release timestamps, stall accounting, end/abort,
// and a seeded randomized check against a direct model of the release rule.

import {
  MAX_READING_RATE,
  MIN_READING_RATE,
  type PacerClock,
  TokenPacer,
} from "../../../runtime/request/token_buffer.ts";
import { assert, assertEquals, assertThrows, useFakeTime } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";

type FakeClock = ReturnType<typeof useFakeTime>;

/** Starts a consumer that logs each token with the clock time it was released at. */
function consume<T>(pacer: TokenPacer<T>, now: () => number = () => performance.now()) {
  const log: { item: T; at: number }[] = [];
  let endedAt: number | null = null;
  const done = (async () => {
    for await (const item of pacer) log.push({ item, at: now() });
    endedAt = now();
  })();
  return { log, done, endedAt: () => endedAt };
}

/** Runs `body` with fake Date/timers/performance installed at t=0, always uninstalling. */
async function onFakeTime(body: (clock: FakeClock) => Promise<void>) {
  const clock = useFakeTime(0);
  try {
    await body(clock);
  } finally {
    clock.uninstall();
  }
}

/** Advances fake time to absolute `t`, running due timers and the promise jobs they cause. */
async function tickTo(clock: FakeClock, t: number) {
  await clock.tickAsync(t - clock.now);
}

const times = (log: { at: number }[]) => log.map((e) => e.at);

Deno.test("pacer: steady release at the declared rate, exact timestamps", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    const c = consume(pacer);
    for (let i = 0; i < 5; i++) pacer.deposit(i);
    await clock.tickAsync(0);
    assertEquals(times(c.log), [0]);
    assertEquals(pacer.occupancy(), { tokens: 4, seconds: 0.4 });
    await tickTo(clock, 99);
    assertEquals(times(c.log), [0]);
    await tickTo(clock, 100);
    assertEquals(times(c.log), [0, 100]);
    assertEquals(pacer.occupancy(), { tokens: 3, seconds: 0.3 });
    await tickTo(clock, 1000);
    assertEquals(times(c.log), [0, 100, 200, 300, 400]);
    assertEquals(c.log.map((e) => e.item), [0, 1, 2, 3, 4]);
    assertEquals(pacer.occupancy(), { tokens: 0, seconds: 0 });
    pacer.end();
    await c.done;
    assertEquals(clock.countTimers(), 0);
  });
});

Deno.test("pacer: a fractional interval stays on its grid (no drift from ms timers)", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 3 }); // 333.33 ms
    const c = consume(pacer);
    for (let i = 0; i < 10; i++) pacer.deposit(i);
    pacer.end();
    await tickTo(clock, 5000);
    await c.done;
    // Release i happens at the first whole ms at or after i * 1000/3.
    assertEquals(times(c.log), [0, 334, 667, 1000, 1334, 1667, 2000, 2334, 2667, 3000]);
    assertEquals(pacer.stats().stallMs, 0);
  });
});

Deno.test("pacer: a burst of 50 then nothing drains at pace, stalls only once empty", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 20 }); // 50 ms
    const c = consume(pacer);
    for (let i = 0; i < 50; i++) pacer.deposit(i);
    await clock.tickAsync(0);
    assertEquals(pacer.occupancy(), { tokens: 49, seconds: 49 / 20 });
    await tickTo(clock, 1000);
    assertEquals(c.log.length, 21); // releases at 0, 50, ..., 1000
    assertEquals(pacer.occupancy().tokens, 29);
    assertEquals(pacer.stats().stallMs, 0);
    await tickTo(clock, 2450);
    assertEquals(c.log.length, 50);
    assertEquals(times(c.log), Array.from({ length: 50 }, (_, i) => i * 50));
    // The 51st release was due at 2500; the producer never came back.
    await tickTo(clock, 2500);
    assertEquals(pacer.stats().stalls, 0);
    await tickTo(clock, 2800);
    assertEquals(pacer.stats().stallMs, 300);
    assertEquals(pacer.stats().stalls, 1);
    assertEquals(clock.countTimers(), 0); // nothing to release: no timer while empty
    await tickTo(clock, 3000);
    pacer.end();
    await c.done;
    const stats = pacer.stats();
    assertEquals(stats, {
      released: 50,
      deposited: 50,
      stallMs: 500,
      stalls: 1,
      firstDepositAt: 0,
      firstReleaseAt: 0,
      lastReleaseAt: 2450,
    });
    await tickTo(clock, 9000); // ended: no more stall time accrues
    assertEquals(pacer.stats().stallMs, 500);
  });
});

Deno.test("pacer: exact stall — 3 at t=0, rate 10/s, next deposit at t=1000", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<string>({ rate: 10 });
    const c = consume(pacer);
    pacer.deposit("a");
    pacer.deposit("b");
    pacer.deposit("c");
    await tickTo(clock, 300);
    assertEquals(times(c.log), [0, 100, 200]);
    assertEquals(pacer.stats().stallMs, 0); // due at 300, not yet overdue
    await tickTo(clock, 650);
    assertEquals(pacer.stats().stallMs, 350); // stall in progress is visible
    assertEquals(pacer.stats().stalls, 1);
    await tickTo(clock, 1000);
    pacer.deposit("d");
    pacer.deposit("e");
    await clock.tickAsync(0);
    assertEquals(times(c.log), [0, 100, 200, 1000]);
    // The cadence restarts from the stall, it does not burst to catch up.
    await tickTo(clock, 1100);
    assertEquals(times(c.log), [0, 100, 200, 1000, 1100]);
    pacer.end();
    await c.done;
    assertEquals(c.log.map((e) => e.item).join(""), "abcde");
    const stats = pacer.stats();
    assertEquals(stats.stallMs, 700);
    assertEquals(stats.stalls, 1);
    assertEquals(stats.firstReleaseAt, 0);
    assertEquals(stats.lastReleaseAt, 1100);
  });
});

Deno.test("pacer: a paused producer is hidden by its buffer until the buffer runs out", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 }); // reads 100 ms per token
    const c = consume(pacer);
    // The engine generates at 50 tok/s for one second (50 tokens), then is paused for 5 s.
    let next = 0;
    for (let t = 0; t < 1000; t += 20) {
      await tickTo(clock, t);
      pacer.deposit(next++);
    }
    await tickTo(clock, 4950);
    assertEquals(c.log.length, 50); // releases 0..4900, every 100 ms, no gap
    assertEquals(times(c.log), Array.from({ length: 50 }, (_, i) => i * 100));
    assertEquals(pacer.stats().stallMs, 0);
    await tickTo(clock, 5500);
    assertEquals(pacer.stats().stallMs, 500);
    await tickTo(clock, 6000);
    for (let i = 0; i < 10; i++) pacer.deposit(next++);
    pacer.end();
    await tickTo(clock, 8000);
    await c.done;
    assertEquals(times(c.log).slice(50), Array.from({ length: 10 }, (_, i) => 6000 + i * 100));
    assertEquals(c.log.map((e) => e.item), Array.from({ length: 60 }, (_, i) => i));
    assertEquals(pacer.stats().stallMs, 1000);
    assertEquals(pacer.stats().stalls, 1);
    assertEquals(c.endedAt(), 6900);
    assertEquals(clock.countTimers(), 0);
  });
});

Deno.test("pacer: time before the first token is TTFT, not a stall", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    const c = consume(pacer);
    await tickTo(clock, 2000);
    assertEquals(pacer.stats().stallMs, 0);
    pacer.deposit(1);
    pacer.deposit(2);
    await tickTo(clock, 2100);
    assertEquals(times(c.log), [2000, 2100]);
    pacer.end();
    await c.done;
    assertEquals(pacer.stats().stallMs, 0);
    assertEquals(pacer.stats().firstReleaseAt, 2000);
  });
});

Deno.test("pacer: unpaced releases everything at once and never stalls", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({});
    assert(!pacer.paced);
    const c = consume(pacer);
    for (let i = 0; i < 5; i++) pacer.deposit(i);
    await clock.tickAsync(0);
    assertEquals(times(c.log), [0, 0, 0, 0, 0]);
    assertEquals(clock.countTimers(), 0);
    await tickTo(clock, 700);
    pacer.deposit(5);
    pacer.deposit(6);
    await clock.tickAsync(0);
    assertEquals(times(c.log).slice(5), [700, 700]);
    // With nobody reading, tokens wait; unpaced occupancy reports 0 s (always urgent).
    const idle = new TokenPacer<number>({ rate: 0 });
    idle.deposit(1);
    idle.deposit(2);
    assertEquals(idle.occupancy(), { tokens: 2, seconds: 0 });
    idle.abort();
    await tickTo(clock, 1500);
    pacer.end();
    await c.done;
    assertEquals(c.log.map((e) => e.item), [0, 1, 2, 3, 4, 5, 6]);
    assertEquals(pacer.stats().stallMs, 0);
    assertEquals(pacer.stats().stalls, 0);
    assertEquals(clock.countTimers(), 0);
  });
});

Deno.test("pacer: end() drains at pace, then finishes; end() on empty ends at once", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    const c = consume(pacer);
    pacer.deposit(1);
    pacer.deposit(2);
    pacer.deposit(3);
    pacer.end();
    pacer.end(); // idempotent
    assertThrows(() => pacer.deposit(4), /after end/);
    await tickTo(clock, 150);
    assertEquals(c.endedAt(), null);
    assert(!pacer.finished);
    await tickTo(clock, 200);
    await c.done;
    assertEquals(times(c.log), [0, 100, 200]);
    assertEquals(c.endedAt(), 200);
    assert(pacer.finished);
    assertEquals(clock.countTimers(), 0);

    const empty = new TokenPacer<number>({ rate: 10 });
    const e = consume(empty);
    await tickTo(clock, 300);
    empty.end();
    await e.done;
    assertEquals(e.endedAt(), 300);
    assertEquals(e.log, []);
    assertEquals(empty.stats().stallMs, 0);
  });
});

Deno.test("pacer: end() after the buffer ran dry books the stall up to end()", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    const c = consume(pacer);
    pacer.deposit(1);
    await tickTo(clock, 250);
    pacer.end(); // release 2 was due at 100: the reader waited 150 ms for nothing
    await c.done;
    assertEquals(pacer.stats().stallMs, 150);
    assertEquals(pacer.stats().stalls, 1);
  });
});

Deno.test("pacer: abort() ends at once, drops the buffer, leaves no timers", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    const c = consume(pacer);
    for (let i = 0; i < 10; i++) pacer.deposit(i);
    await tickTo(clock, 150);
    assertEquals(c.log.length, 2);
    assertEquals(clock.countTimers(), 1); // the release due at 200
    pacer.abort();
    await c.done;
    assertEquals(c.endedAt(), 150);
    assertEquals(clock.countTimers(), 0);
    assertEquals(pacer.occupancy(), { tokens: 0, seconds: 0 });
    pacer.deposit(99); // a readback racing the cancel is dropped, not an error
    pacer.end();
    pacer.abort();
    const stats = pacer.stats();
    assertEquals(stats.released, 2);
    assertEquals(stats.deposited, 10);
    assertEquals(stats.stallMs, 0);
    assert(pacer.finished);
  });
});

Deno.test("pacer: leaving the loop early aborts the pacer", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    for (let i = 0; i < 5; i++) pacer.deposit(i);
    const seen: number[] = [];
    const loop = (async () => {
      for await (const item of pacer) {
        seen.push(item);
        if (item === 1) break;
      }
    })();
    await tickTo(clock, 100);
    await loop;
    assertEquals(seen, [0, 1]);
    assert(pacer.finished);
    assertEquals(pacer.occupancy().tokens, 0);
    assertEquals(clock.countTimers(), 0);
    assertThrows(() => pacer[Symbol.asyncIterator](), /single consumer/);
  });
});

Deno.test("pacer: a slow consumer delays releases; untaken tokens stay in occupancy", async () => {
  await onFakeTime(async (clock) => {
    const pacer = new TokenPacer<number>({ rate: 10 });
    for (let i = 0; i < 4; i++) pacer.deposit(i);
    pacer.end();
    const at: number[] = [];
    const loop = (async () => {
      for await (const _ of pacer) {
        at.push(clock.now);
        await new Promise((r) => setTimeout(r, 250)); // a congested socket
      }
    })();
    await tickTo(clock, 300);
    assertEquals(pacer.occupancy().tokens, 2);
    await tickTo(clock, 2000);
    await loop;
    // Pulls at 0, 250, 500, 750 are each later than the 100 ms cadence: no burst, no stall.
    assertEquals(at, [0, 250, 500, 750]);
    assertEquals(pacer.stats().stallMs, 0);
  });
});

Deno.test("pacer: works with an injected clock and no global fakes", async () => {
  // A minimal manual clock: timers fire only when the test advances time.
  let now = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  let nextId = 1;
  const clock: PacerClock = {
    now: () => now,
    setTimeout: (fn, ms) => {
      timers.set(nextId, { at: now + ms, fn });
      return nextId++;
    },
    clearTimeout: (h) => void timers.delete(h as number),
  };
  const flush = () => new Promise<void>((r) => queueMicrotask(r)).then(() => Promise.resolve());
  async function advanceTo(t: number) {
    for (;;) {
      await flush();
      const due = [...timers.entries()].filter(([, v]) =>
        v.at <= t
      ).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      timers.delete(due[0]);
      now = due[1].at;
      due[1].fn();
      await flush();
    }
    now = t;
    await flush();
  }

  const pacer = new TokenPacer<number>({ rate: 10, clock });
  const c = consume(pacer, clock.now);
  pacer.deposit(0);
  pacer.deposit(1);
  pacer.deposit(2);
  await advanceTo(1000);
  pacer.deposit(3);
  pacer.end();
  await advanceTo(2000);
  await c.done;
  assertEquals(times(c.log), [0, 100, 200, 1000]);
  assertEquals(pacer.stats().stallMs, 700);
  assertEquals(timers.size, 0);
});

Deno.test("pacer: rejects a negative, non-finite or out-of-range rate", () => {
  assertThrows(() => new TokenPacer({ rate: -1 }), RangeError);
  assertThrows(() => new TokenPacer({ rate: NaN }), RangeError);
  assertThrows(() => new TokenPacer({ rate: Infinity }), RangeError);
  // A tiny rate would ask for a timer longer than timers allow (it fires at once and spins).
  assertThrows(() => new TokenPacer({ rate: 1e-7 }), RangeError);
  assertThrows(() => new TokenPacer({ rate: MIN_READING_RATE / 2 }), RangeError);
  assertThrows(() => new TokenPacer({ rate: MAX_READING_RATE * 2 }), RangeError);
  assertEquals(new TokenPacer({ rate: MIN_READING_RATE }).rate, MIN_READING_RATE);
  assertEquals(new TokenPacer({ rate: MAX_READING_RATE }).rate, MAX_READING_RATE);
  assertEquals(new TokenPacer({ rate: 0 }).paced, false);
});

/** The release rule computed directly: what a prompt consumer must see. */
function modelReleases(
  deposits: number[],
  rate: number,
  endAt: number,
): { at: number[]; stallMs: number; stalls: number } {
  const interval = rate > 0 ? 1000 / rate : 0;
  const at: number[] = [];
  let scheduled = -Infinity;
  let stallMs = 0;
  let stalls = 0;
  for (let i = 0; i < deposits.length; i++) {
    const due = scheduled + interval;
    if (rate > 0 && i > 0 && deposits[i] > due) {
      stallMs += deposits[i] - due;
      stalls++;
    }
    scheduled = Math.max(due, deposits[i]);
    at.push(Math.ceil(scheduled)); // fake timers fire on whole ms
  }
  const due = scheduled + interval;
  if (rate > 0 && deposits.length > 0 && endAt > due) {
    stallMs += endAt - due;
    stalls++;
  }
  return { at, stallMs, stalls };
}

Deno.test("pacer: randomized deposit schedules match the model (no loss, dup, reorder)", async () => {
  const seed = testSeed();
  const next = rng(seed);
  try {
    await onFakeTime(async (clock) => {
      for (let trial = 0; trial < 40; trial++) {
        const start = clock.now;
        const rate = next() < 0.15 ? 0 : 1 + Math.floor(next() * 40);
        const pacer = new TokenPacer<number>({ rate });
        const c = consume(pacer);
        // Bursts of 1..20 tokens separated by 0..600 ms (some long pauses).
        const deposits: number[] = [];
        let t = start + Math.floor(next() * 50);
        const bursts = 1 + Math.floor(next() * 12);
        for (let b = 0; b < bursts; b++) {
          await tickTo(clock, t);
          // Occupancy between bursts: everything deposited minus what the model released by now.
          const releasedByNow = modelReleases(deposits, rate, t).at.filter((x) => x <= t).length;
          const tokens = deposits.length - releasedByNow;
          assertEquals(pacer.occupancy(), { tokens, seconds: rate > 0 ? tokens / rate : 0 });
          const n = 1 + Math.floor(next() * 20);
          for (let k = 0; k < n; k++) {
            pacer.deposit(deposits.length);
            deposits.push(t);
          }
          t += Math.floor(next() * (next() < 0.2 ? 3000 : 600));
        }
        await tickTo(clock, t);
        const endAt = clock.now;
        const aborting = next() < 0.2;
        const what = `trial ${trial}, rate ${rate}, ${deposits.length} tokens`;
        if (aborting) pacer.abort();
        else pacer.end();
        const drainMs = rate > 0 ? Math.ceil((deposits.length + 1) * 1000 / rate) : 0;
        await tickTo(clock, t + drainMs + 1000);
        assert(c.endedAt() !== null, `${what}: the stream did not end`);
        await c.done;

        const items = c.log.map((e) => e.item);
        const model = modelReleases(deposits, rate, endAt);
        if (aborting) {
          // A prefix, in order, exactly as the model releases it up to the abort.
          const upTo = model.at.filter((x) => x <= endAt).length;
          assertEquals(items.length, upTo, what);
          assertEquals(items, deposits.slice(0, items.length).map((_, i) => i), what);
          assertEquals(times(c.log), model.at.slice(0, items.length), what);
        } else {
          assertEquals(items, deposits.map((_, i) => i), what);
          assertEquals(times(c.log), model.at, what);
          const stats = pacer.stats();
          assert(Math.abs(stats.stallMs - model.stallMs) < 1e-6, `${what}: stall`);
          assertEquals(stats.stalls, model.stalls, what);
          assertEquals(stats.released, deposits.length, what);
        }
        assertEquals(clock.countTimers(), 0, what);
      }
    });
  } catch (e) {
    console.error(`pacer randomized test failed with seed ${seed} (SLUICE_TEST_SEED=${seed})`);
    throw e;
  }
});
