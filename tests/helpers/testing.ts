// The one place tests get their assertion and fake-time tools from. JSR is unreachable here, so
// this wraps node:assert and @sinonjs/fake-timers; moving to jsr:@std/testing changes only this file.

export {
  deepEqual as assertEquals,
  equal as assertStrictEquals,
  match as assertMatch,
  notEqual as assertNotEquals,
  ok as assert,
  rejects as assertRejects,
  throws as assertThrows,
} from "node:assert/strict";

import FakeTimers from "@sinonjs/fake-timers";

/** Installs a fake clock over Date, setTimeout and friends; call `uninstall()` when done. */
export function useFakeTime(now = 0) {
  return FakeTimers.install({
    now,
    toFake: ["Date", "setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"],
  });
}
