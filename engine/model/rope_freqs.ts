// RoPE inverse frequencies, one per pair of rotated dimensions (rotaryDim/2 of them: headDim/2
// unless the rotary is partial), following transformers' ROPE_INIT_FUNCTIONS for "default",
// "linear", "llama3" and "longrope", and llama.cpp's per-frequency factors (what GGUF files hold
// instead of llama3's parameters). Computed in float64 (the Python code uses float32); the
// formulas are the same, the values differ by float32 rounding.
//
// LongRoPE's short or long factors: transformers picks them per forward call by the sequence's
// length so far, so a request that grows past the switch point keeps keys turned by the short
// factors beside queries turned by the long ones. Sluice picks once per loaded model, as llama.cpp
// does: the long factors when the context it serves (EngineInfo.maxContext) exceeds
// original_max_position_embeddings, else the short ones. Every request then sees one set of
// frequencies however it was scheduled, and a request crossing the switch point is nothing special.

import type { LlamaConfig } from "./config.ts";

type RopeConfig = Pick<
  LlamaConfig,
  "ropeTheta" | "ropeScaling" | "rotaryDim" | "maxPositionEmbeddings"
>;

/**
 * The inverse frequencies of a model serving `context` positions (which decides LongRoPE's
 * factors; the other scalings ignore it), by default all it was configured for.
 */
export function ropeInvFreq(cfg: RopeConfig, context = cfg.maxPositionEmbeddings): Float64Array {
  const half = cfg.rotaryDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / cfg.ropeTheta ** ((2 * i) / cfg.rotaryDim);

  const scaling = cfg.ropeScaling;
  if (scaling === null) return inv;
  if (scaling.type === "longrope") {
    const factors = longRopeFactors(scaling, context);
    for (let i = 0; i < half; i++) inv[i] /= factors[i];
    return inv;
  }
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

/** LongRoPE's factors for a model serving `context` positions (the header says why). */
export function longRopeFactors(
  scaling: Extract<LlamaConfig["ropeScaling"], { type: "longrope" }>,
  context: number,
): number[] {
  return context > scaling.originalMaxPositionEmbeddings ? scaling.longFactor : scaling.shortFactor;
}

/** What cos and sin are multiplied by: LongRoPE's attention factor, else 1. */
export function ropeAttentionScale(cfg: Pick<LlamaConfig, "ropeScaling">): number {
  return cfg.ropeScaling?.type === "longrope" ? cfg.ropeScaling.attentionFactor : 1;
}
