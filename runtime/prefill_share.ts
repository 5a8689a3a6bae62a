// How one step's prefill rows are shared between the requests prefilling at once (issue 31).
//
// Given oldest first, a short prompt that arrived while a long one prefilled waited behind all of
// the long one's remaining chunks: on the real server a 60-token stream beside an 1,800-token
// prefill got its first token after 5.4 s, against 88 ms on an idle server. vLLM caps the share of
// a step one long prefill may take while others prefill. Here the oldest prefill shares the rows
// evenly with every prefill that has fewer rows left than it, and what one of them does not need
// goes to the others (max-min fairness): a newcomer shorter than what is left of the long prompt
// runs beside it from its first step, and the long prompt still gets at least an equal share.
// Prefills with as many rows left as the oldest or more take only rows nobody else needs, oldest
// first, as before: sharing between long prompts would only make every one of them finish late.
// Shares move rows between requests and never leave one unused, so a step costs what it did.

import type { Request } from "./request/request.ts";

/**
 * The prefilling requests of `running` (in admission order) that get rows of `room`, with their
 * shares. A constrained request's last row waits for its mask, so it does not ask for it.
 */
export function sharePrefillRows(running: readonly Request[], room: number): [Request, number][] {
  const prefilling = running.filter((r) => r.state === "prefilling");
  const wants = prefilling.map((r) => Math.max(0, r.prefillRowsLeft - (r.maySample ? 0 : 1)));
  const shares = prefillShares(wants, room);
  return prefilling.flatMap((r, i) => shares[i] > 0 ? [[r, shares[i]] as [Request, number]] : []);
}

/**
 * The rows each prefill takes of `room`, given the rows each still wants (`wants`, in admission
 * order: the oldest first).
 */
export function prefillShares(wants: readonly number[], room: number): number[] {
  const shares = wants.map(() => 0);
  let left = room;
  const sharing = wants.flatMap((n, i) => i === 0 || n < wants[0] ? [i] : []);
  // A row at a time, round the sharing prefills in admission order: even shares, the odd rows to
  // the oldest, and a prefill that needs less than its share leaves the rest to the others.
  while (left > 0 && sharing.some((i) => shares[i] < wants[i])) {
    for (const i of sharing) {
      if (left > 0 && shares[i] < wants[i]) {
        shares[i]++;
        left--;
      }
    }
  }
  // Rows left once every sharing prefill has all it wants go to the rest, oldest first.
  wants.forEach((n, i) => {
    const more = Math.min(n - shares[i], left);
    shares[i] += more;
    left -= more;
  });
  return shares;
}
