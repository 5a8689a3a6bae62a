// Text that may be the start of a marker (`<tool_call>`, `</think>`) cannot be shown yet: as with
// stop strings, its end is held back until the next characters decide.

/** Length of the longest end of `text` that is a proper beginning of one of the markers. */
export function partialMarkerLength(text: string, markers: readonly string[]): number {
  let longest = 0;
  for (const marker of markers) {
    for (let n = Math.min(marker.length - 1, text.length); n > longest; n--) {
      if (text.endsWith(marker.slice(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}
