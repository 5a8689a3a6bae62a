// The reader model (TokenFlow's client playout, video-style): the reader sees the first token when
// it arrives and then reads one token every 1/r seconds; when the next token has not arrived yet
// the reader waits (a stall, "rebuffer") and the reading clock restarts at its arrival:
//
//   display_0 = arrival_0,   display_j = max(arrival_j, display_{j-1} + 1/r)
//   stall_j   = max(0, arrival_j - (display_{j-1} + 1/r))        (the start-up wait is TTFT, not a stall)
//   buffer    = tokens arrived but not yet displayed
//
// All times are in milliseconds on one clock; rates in tokens per second.

/** Online form used by the client: feed arrivals in order, get each token's display time. */
export class Reader {
  private last = -Infinity;
  private readonly interval: number;
  constructor(readingRate: number) {
    if (!(readingRate > 0)) throw new Error(`reading rate must be > 0, got ${readingRate}`);
    this.interval = 1000 / readingRate;
  }

  arrive(arrivalMs: number): number {
    const display = this.last === -Infinity
      ? arrivalMs
      : Math.max(arrivalMs, this.last + this.interval);
    this.last = display;
    return display;
  }
}

export function displayTimes(arrivalsMs: readonly number[], readingRate: number): number[] {
  const r = new Reader(readingRate);
  return arrivalsMs.map((a) => r.arrive(a));
}

/** Each token's stall: how long the reader waited for it beyond its due time (0 for token 0,
 * whose wait is the TTFT). */
export function stallsMs(
  arrivalsMs: readonly number[],
  displayMs: readonly number[],
  readingRate: number,
): number[] {
  const interval = 1000 / readingRate;
  return arrivalsMs.map((a, j) => (j === 0 ? 0 : Math.max(0, a - (displayMs[j - 1] + interval))));
}

/** Total time the reader sat in front of an empty buffer after the first token. */
export function stallMs(
  arrivalsMs: readonly number[],
  displayMs: readonly number[],
  readingRate: number,
): number {
  return stallsMs(arrivalsMs, displayMs, readingRate).reduce((s, x) => s + x, 0);
}

/**
 * B_j: tokens already in the buffer when token j arrives, i.e. earlier tokens not yet displayed at
 * arrival_j. Convention: token j itself is not counted, and a token displayed at exactly arrival_j
 * has been read (it is not in the buffer).
 */
export function bufferAtArrivals(
  arrivalsMs: readonly number[],
  displayMs: readonly number[],
): number[] {
  // display is non-decreasing, so the unread earlier tokens are a suffix of 0..j-1: walk a pointer.
  const out: number[] = [];
  let firstUnread = 0;
  for (let j = 0; j < arrivalsMs.length; j++) {
    while (firstUnread < j && displayMs[firstUnread] <= arrivalsMs[j]) firstUnread++;
    out.push(j - firstUnread);
  }
  return out;
}

/**
 * Buffer occupancy as a step function: [t, tokens] points, each the value from t until the next
 * point. Starts at (arrival_0, ·) and ends at 0 when the last token is displayed.
 */
export function bufferSeries(
  arrivalsMs: readonly number[],
  displayMs: readonly number[],
): [number, number][] {
  const events: [number, number][] = [];
  for (const a of arrivalsMs) events.push([a, +1]);
  for (const d of displayMs) events.push([d, -1]);
  events.sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  let level = 0;
  for (let i = 0; i < events.length;) {
    const t = events[i][0];
    while (i < events.length && events[i][0] === t) level += events[i++][1];
    out.push([t, level]);
  }
  return out;
}
