// The RMSNorm a matmul may fuse into its x loads (matmul.ts, matmul_quant.ts): y = rmsnorm(x) · Wᵀ
// in one dispatch instead of a norm writing a normed copy of x and a matmul reading it back.
//
// Each lane multiplies the x values it loads by the norm's gain and sums their squares in
// a fixed order (four interleaved sums along the row); the epilogue scales each output by 1 / sqrt(Σx² / K + eps). matmul.wgsl
// declares the gain's binding in a `// #if NORM` block (with a stand-in after `// #else` that reads
// nothing), so a float matmul without a norm keeps its bind group as it was; matmul_quant.wgsl
// reads a uniform flag instead, so that its slow-to-compile tiles serve both.

import type { BufferArg } from "../kernel.ts";

/** The norm before a matmul: normed x = x / sqrt(mean(x²) + eps) · gain. */
export interface MatmulNorm {
  /** W [K]: the norm's weight vector. */
  gain: BufferArg;
  eps: number;
}

/** Throws on a negative or NaN eps. */
export function checkNorm(kernel: string, norm: MatmulNorm | undefined): void {
  if (norm && !(norm.eps >= 0)) throw new RangeError(`${kernel}: bad norm eps ${norm.eps}`);
}

/**
 * `src` with its `// #if NORM` … `// #else` … `// #endif` blocks resolved: the first part kept
 * where `norm`, the second (optional) part otherwise.
 */
export function normSource(src: string, norm: boolean): string {
  const out: string[] = [];
  let state: "outside" | "if" | "else" = "outside";
  for (const line of src.split("\n")) {
    const tag = line.trim();
    if (tag === "// #if NORM" && state === "outside") state = "if";
    else if (tag === "// #else" && state === "if") state = "else";
    else if (tag === "// #endif" && state !== "outside") state = "outside";
    else if (state === "outside" || (state === "if") === norm) out.push(line);
  }
  if (state !== "outside") throw new Error("shader: unterminated `// #if NORM` block");
  return out.join("\n");
}
