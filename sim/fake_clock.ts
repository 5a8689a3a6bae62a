// The fake clock every simulation and runtime test runs on: Date, timers and performance, so the
// runtime's own clock reads (performance.now) move only when the caller ticks.

import FakeTimers from "@sinonjs/fake-timers";

/** Installs a fake clock over Date, timers and performance until `uninstall()`. */
export function fakeClock(now = 0) {
  return FakeTimers.install({
    now,
    toFake: ["Date", "setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"],
  });
}
