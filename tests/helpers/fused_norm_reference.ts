// float64 reference of the RMSNorm that a matmul fuses into its x loads (gpu/kernels/fused_norm.ts),
// split as the kernel splits it: the gained x (x·g, unscaled) and each row's scale
// 1 / sqrt(mean(x²) + eps), so that rmsnorm(x)·W = scale · Σ (x·g)·w.

export interface NormedRows {
  /** x_k · g_k, [rows, K]. */
  gained: Float64Array;
  /** Per row: 1 / sqrt(Σ x² / K + eps). */
  scale: Float64Array;
}

export function normedRows(
  x: ArrayLike<number>,
  gain: ArrayLike<number>,
  rows: number,
  K: number,
  eps: number,
): NormedRows {
  const gained = new Float64Array(rows * K), scale = new Float64Array(rows);
  for (let m = 0; m < rows; m++) {
    let sq = 0;
    for (let k = 0; k < K; k++) {
      const v = x[m * K + k];
      sq += v * v;
      gained[m * K + k] = v * gain[k];
    }
    scale[m] = 1 / Math.sqrt(sq / K + eps);
  }
  return { gained, scale };
}

/**
 * The relative error of the kernel's f32 scale: Σx² as four chains of K/4 fused adds of positive
 * terms (≤ (K/4 + 3) ulps), the division, eps, sqrt and reciprocal (≤ 4 more), halved by the
 * square root; doubled for margin: (K/4 + 8) · 2^-24.
 */
export function scaleBound(K: number): number {
  return (K / 4 + 8) * 2 ** -24;
}
