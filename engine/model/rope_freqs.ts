// RoPE inverse frequencies, one per pair of rotated dimensions (headDim/2 of them), following
// transformers' ROPE_INIT_FUNCTIONS for "default", "linear" and "llama3", and llama.cpp's
// per-frequency factors (what GGUF files hold instead of llama3's parameters). Computed in float64
// (the Python code uses float32); the formulas are the same, the values differ by float32 rounding.

import type { LlamaConfig } from "./config.ts";

export function ropeInvFreq(cfg: LlamaConfig): Float64Array {
  const half = cfg.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / cfg.ropeTheta ** ((2 * i) / cfg.headDim);

  const scaling = cfg.ropeScaling;
  if (scaling === null) return inv;
  if (scaling.type === "freq_factors") {
    for (let i = 0; i < half; i++) inv[i] /= scaling.factors[i];
    return inv;
  }
  if (scaling.type === "linear") {
    // Linear scaling divides positions by the factor; dividing the frequencies is the same thing.
    for (let i = 0; i < half; i++) inv[i] /= scaling.factor;
    return inv;
  }

  // llama3: long wavelengths (low frequencies) are slowed down by `factor`, short ones are kept,
  // and the band in between is interpolated smoothly in 1/wavelength.
  const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldCtx } = scaling;
  const lowFreqWavelen = oldCtx / lowFreqFactor;
  const highFreqWavelen = oldCtx / highFreqFactor;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / inv[i];
    if (wavelen > lowFreqWavelen) {
      inv[i] = inv[i] / factor;
    } else if (wavelen >= highFreqWavelen) {
      const smooth = (oldCtx / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      inv[i] = (1 - smooth) * (inv[i] / factor) + smooth * inv[i];
    }
  }
  return inv;
}
