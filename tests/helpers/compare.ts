// Numeric comparison against float64 references. NaN or Inf in the result never passes.

export interface ErrorReport {
  /** max |got - want| / max(|want|_inf, floor): relative to the tensor's scale. */
  maxRelError: number;
  worstIndex: number;
}

export function relativeError(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  floor = 1e-6,
): ErrorReport {
  if (got.length !== want.length) {
    throw new Error(`length mismatch: got ${got.length}, want ${want.length}`);
  }
  let scale = floor;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  let maxRelError = 0;
  let worstIndex = -1;
  for (let i = 0; i < got.length; i++) {
    const g = got[i];
    if (!Number.isFinite(g)) return { maxRelError: Infinity, worstIndex: i };
    const err = Math.abs(g - want[i]) / scale;
    if (err > maxRelError) {
      maxRelError = err;
      worstIndex = i;
    }
  }
  return { maxRelError, worstIndex };
}

/**
 * Throws with a readable message when the error exceeds `bound`. `floor` (default 1e-6) is the
 * least scale the error is measured against: a tensor of one or two outputs can land near zero by
 * cancellation, and its rounding error is then set by the size of the terms summed, not the sum.
 */
export function assertClose(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  bound: number,
  what: string,
  floor?: number,
): void {
  const { maxRelError, worstIndex } = relativeError(got, want, floor);
  if (!(maxRelError <= bound)) {
    throw new Error(
      `${what}: relative error ${maxRelError.toExponential(3)} > ${bound} at [${worstIndex}] ` +
        `(got ${got[worstIndex]}, want ${want[worstIndex]})`,
    );
  }
}

/** Fills a buffer with NaN bit patterns so a kernel that skips an output is caught. */
export const POISON_F32 = 0x7fc00bad;

/** Cosine similarity of two vectors; -1 where it is not finite (NaN never passes a bound). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const c = ab / Math.sqrt(aa * bb);
  return Number.isFinite(c) ? c : -1;
}
