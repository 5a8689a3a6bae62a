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

import { fakeClock } from "../../sim/fake_clock.ts";

/** Installs a fake clock over Date, setTimeout and friends; call `uninstall()` when done. */
export const useFakeTime = fakeClock;
