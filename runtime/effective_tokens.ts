// TokenFlow's effective throughput, counted by the server (the `sluice_effective_tokens_total`
// metric): a token is worth 1 when it enters a buffer holding at most 10% of the request's output
// length L, linearly less down to 0 at 20% and beyond. The buffer is the request's token buffer
// (runtime/token_buffer.ts) at the moment the token was deposited, the token itself not counted;
// L is known only once the request has ended, so each request is counted at its end.

/** TokenFlow's weight of a token that found `buffered` tokens ahead of it, in a request of L. */
export function tokenWeight(buffered: number, outputLen: number): number {
  if (outputLen <= 0) return 0;
  // (0.2L - b) / (0.1L) written as (2L - 10b) / L to stay exact in floating point.
  return Math.min(1, Math.max(0, (2 * outputLen - 10 * buffered) / outputLen));
}

/**
 * Sum of the weights of a request's tokens, from the buffer occupancy each found when deposited
 * (`occupancies`, in order) and the tokens it generated (`outputLen`, default: one per deposit).
 */
export function effectiveTokens(
  occupancies: readonly number[],
  outputLen = occupancies.length,
): number {
  let sum = 0;
  for (const b of occupancies) sum += tokenWeight(b, outputLen);
  return sum;
}
