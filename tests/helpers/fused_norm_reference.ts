// float64 reference of the RMSNorm that a matmul fuses into its x loads (gpu/kernels/fused_norm.ts),
// split as the kernel splits it: the gained x (x·g, unscaled) and each row's scale
// 1 / sqrt(mean(x²) + eps), so that rmsnorm(x)·W = scale · Σ (x·g)·w; and each mode's wanted
// outputs and bounds from those dot products (modeOutputs), shared by the float and quantized tests.

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

/** One output's float64 dot product (already scaled by its row's 1/rms) and its error bound. */
export interface ScaledDot {
  sum: number;
  tol: number;
}

/**
 * Each output's wanted value and tolerance for the matmul's mode, from `dot(m, n)` (row m, weight
 * row n; glu: gate rows n, up rows N + n): store the dot, add it to y0, or silu(gate)·up with the
 * product's propagated bound; plus f32 rounding of the result.
 */
export function modeOutputs(
  rows: number,
  N: number,
  mode: "store" | "add" | "glu",
  y0: Float32Array,
  dot: (m: number, n: number) => ScaledDot,
): { want: Float64Array; tol: Float64Array } {
  const want = new Float64Array(rows * N), tol = new Float64Array(rows * N);
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) {
      const i = m * N + n, g = dot(m, n);
      if (mode === "glu") {
        const u = dot(m, N + n), s = g.sum / (1 + Math.exp(-g.sum));
        want[i] = s * u.sum;
        tol[i] = 1.1 * g.tol * (Math.abs(u.sum) + u.tol) + (Math.abs(s) + 1.1 * g.tol) * u.tol +
          2 ** -20 * Math.abs(want[i]);
      } else {
        want[i] = g.sum + (mode === "add" ? y0[i] : 0);
        tol[i] = g.tol + 2 ** -23 * Math.abs(want[i]);
      }
    }
  }
  return { want, tol };
}
