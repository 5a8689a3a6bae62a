// Whether a byte string ends in the middle of a UTF-8 character: the only reason a streaming
// detokenizer may hold text back. It answers as the WHATWG decoder (TextDecoder, which the
// tokenizers use) would: bytes that can still become a valid character wait; bytes that never can
// (a stray continuation byte, an impossible lead, a lead followed by a wrong byte) are already
// decoded to U+FFFD, and waiting for them would only stall the stream.

/**
 * Length (0–3) of the incomplete character at the end of `bytes`: a lead byte and the
 * continuation bytes after it, fewer than the lead needs and each in its allowed range.
 */
export function incompleteUtf8Tail(bytes: ArrayLike<number>): number {
  const n = bytes.length;
  for (let back = 1; back <= Math.min(3, n); back++) {
    const lead = bytes[n - back];
    if (lead >= 0x80 && lead <= 0xbf) continue; // a continuation byte: its lead is further back
    if (back >= sequenceLength(lead)) return 0; // ASCII, not a lead, complete, or overlong run
    for (let k = 1; k < back; k++) {
      const [lo, hi] = k === 1 ? secondByteRange(lead) : [0x80, 0xbf];
      const b = bytes[n - back + k];
      if (b < lo || b > hi) return 0;
    }
    return back;
  }
  return 0; // three continuation bytes: stray, or the end of a complete 4-byte character
}

/** Bytes in the character a lead byte starts; 0 for bytes that never start one. */
function sequenceLength(lead: number): number {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/** The second byte's range (excludes overlong forms, surrogates and code points past U+10FFFF). */
function secondByteRange(lead: number): [number, number] {
  if (lead === 0xe0) return [0xa0, 0xbf];
  if (lead === 0xed) return [0x80, 0x9f];
  if (lead === 0xf0) return [0x90, 0xbf];
  if (lead === 0xf4) return [0x80, 0x8f];
  return [0x80, 0xbf];
}
