// The Llama forward pass as a list of bound kernels, in the order the model computes (as llama2.c's
// forward()): embed, then per layer attention and MLP around the residual stream, then, on the
// sampled rows only, the LM head, the sampling controls (for rows that have any) and the GPU
// sampler. The other families are this pass with per-layer options: Qwen2's q, k, v biases, Qwen3's
// q and k norms, Mistral's and Phi-3's sliding window, SmolLM3's layers without RoPE, Phi-3's
// partial rotary and LongRoPE's attention factor, and Gemma 3's: a scaled embedding, norms after
// attention and after the MLP as well as before, GeGLU, its score scale, and local layers (a window
// and RoPE frequencies of their own) between global ones.
//
// This file only binds the list; pass.ts runs it, one command buffer per step. The list is plain
// data, so a benchmark may wrap or filter it (bench/common/forward_bench.ts) and hand it back to
// the engine: the engine keeps no other way to change what a step encodes.

import type { Gpu } from "../gpu/device.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import { bindBiasAct } from "../gpu/kernels/bias_act.ts";
import { bindBiasAdd } from "../gpu/kernels/bias_add.ts";
import { bindQkNorm } from "../gpu/kernels/qk_norm.ts";
import { bindKvWrite } from "../gpu/kernels/kv_write.ts";
import { bindAttention } from "../gpu/kernels/attention.ts";
import { bindGatherRows } from "../gpu/kernels/gather.ts";
import { bindResidualNorm } from "../gpu/kernels/residual_norm.ts";
import { bindSampler } from "../gpu/kernels/sample.ts";
import { bindGreedySampler } from "../gpu/kernels/sample_greedy.ts";
import type { DeviceKv } from "../kv/device_kv.ts";
import { layerWindows, type LlamaConfig } from "../model/config.ts";
import { ropeAttentionScale } from "../model/rope_freqs.ts";
import type { ModelWeights } from "../weights/model_weights.ts";
import { embeddingParts, gluParts, matmulParts } from "./matrix_kernels.ts";
import type { ForwardLimits } from "./step.ts";
import type { StepBuffers } from "./step_buffers.ts";
import type { SamplingControls } from "./sampling_controls.ts";

/** One step's kernels, in the order a step encodes them. */
export interface ForwardKernels {
  /** The embedding: runs on every row. */
  readonly head: readonly BoundKernel[];
  /** Each layer's kernels: a step may copy KV between layers. */
  readonly layers: readonly (readonly BoundKernel[])[];
  /** On the sample rows only: their gather and the LM head. */
  readonly tail: readonly BoundKernel[];
  /** Bias, penalties and masks before the sampler (nothing for rows without any). */
  readonly adjust: BoundKernel;
  /**
   * The sampler a step takes: `plain`, `top` when it asks for top logprobs, `greedy` (an argmax
   * over many workgroups, the same records) when every sample row is greedy and none is asked.
   */
  readonly samplers: {
    readonly plain: BoundKernel;
    readonly top: BoundKernel;
    readonly greedy: BoundKernel;
  };
  /** After the sampler: each penalized row's sampled id joins its counts. */
  readonly count: BoundKernel;
}

/** The list as bound, with what its kernels own. */
export interface BoundForward {
  kernels: ForwardKernels;
  destroy(): void;
}

export function bindForward(
  gpu: Gpu,
  cfg: LlamaConfig,
  weights: ModelWeights,
  kv: DeviceKv,
  io: StepBuffers,
  controls: SamplingControls,
  limits: ForwardLimits,
): BoundForward {
  const D = cfg.hiddenSize, hd = cfg.headDim, Hq = cfg.numHeads, Hkv = cfg.numKvHeads;
  const eps = cfg.rmsNormEps;
  const layout = kv.layout;
  const heads = { numHeads: Hq, numKvHeads: Hkv, headDim: hd };
  const attnShape = {
    numHeads: Hq,
    numKvHeads: Hkv,
    headDim: hd,
    blockSize: layout.blockSize,
    maxSlots: layout.maxSlots,
    maxBlocksPerSeq: layout.maxBlocksPerSeq,
  };

  // Embedding: hidden = the row's token's embedding (a decode row's token is its slot's nextIds),
  // times embedScale (Gemma: √hidden; else 1).
  const head = embeddingParts(gpu, weights.embed, {
    tokens: io.tokens,
    rowSlot: io.rowSlot,
    nextIds: io.nextIds,
    y: io.hidden,
    D,
    scale: cfg.embedScale,
  });

  // The integer-dot kernels' scratch where they were chosen: quantized matrices read x from it.
  const intX = io.quantizedX ?? undefined;
  const ropeScale = ropeAttentionScale(cfg);
  // A branch's projection added to hidden, or, with a norm after it (Gemma 3), stored in branch
  // and then normed into hidden (a norm needs the whole row the matrix's parts write).
  const intoResidual = (
    outNorm: GPUBuffer | undefined,
    project: (y: GPUBuffer, mode: "store" | "add") => BoundKernel[],
  ): BoundKernel[] =>
    outNorm
      ? [
        ...project(io.branch, "store"),
        bindResidualNorm(gpu, { x: io.branch, y: io.hidden, w: outNorm, D, eps }),
      ]
      : project(io.hidden, "add");
  const windows = layerWindows(cfg);
  const layers = weights.layers.map((w, layer) => {
    // Gemma 3's local layers: a window, and RoPE of their own base; global ones all positions.
    const local = cfg.localLayers?.layers[layer] ? cfg.localLayers : null;
    const cache = {
      k: kv.kOf(layer),
      v: kv.vOf(layer),
      blockTable: kv.blockTable,
      rowSlot: io.rowSlot,
      rowPos: io.rowPos,
      invFreq: local ? io.invFreqLocal : io.invFreq,
      layer,
      // RoPE on the first rotaryDim values of each head (all but Phi-4-mini's: every value), none
      // on SmolLM3's no-RoPE layers; LongRoPE scales what it turns.
      rotaryDim: cfg.ropeLayers[layer] ? cfg.rotaryDim : 0,
      ropeScale,
    };
    return [
      // q, k and v of every head in one matmul, the attention norm fused into its x loads:
      // qkv = (rmsnorm(hidden) · inputNorm) · Wqkvᵀ.
      ...matmulParts(gpu, w.qkv, io.hidden, io.qkv, "store", "weights", {
        gain: w.inputNorm,
        eps,
      }, intX),
      // Qwen2: qkv += the q, k and v biases.
      ...(w.qkvBias
        ? [bindBiasAdd(gpu, { x: io.qkv, b: w.qkvBias, width: (Hq + 2 * Hkv) * hd })]
        : []),
      // Qwen3, Gemma 3: each q and k head = rmsnorm(head) · qNorm (kNorm), in place.
      ...(w.qkNorm ? [bindQkNorm(gpu, { qkv: io.qkv, w: w.qkNorm, ...heads, eps })] : []),
      // The rows' k, rotated by their positions (RoPE), and v into their slots' paged KV cache.
      bindKvWrite(gpu, { qkv: io.qkv, ...cache, ...attnShape }),
      // Causal attention of each row's q heads, rotated as they are loaded (RoPE), over its
      // slot's cache (grouped-query), over the last slidingWindow positions only where the model
      // has a window (Mistral, Phi-3; Gemma 3's local layers): attn.
      bindAttention(gpu, {
        qkv: io.qkv,
        out: io.attn,
        ...cache,
        ...attnShape,
        window: windows[layer],
        scoreScale: cfg.attentionScale,
        softcap: cfg.attnSoftcap,
      }),
      // Output projection into the residual stream: hidden += attn · Woᵀ; with Gemma 3's norm
      // after attention, hidden += rmsnorm(attn · Woᵀ) · attnOutNorm.
      ...intoResidual(
        w.attnOutNorm,
        (y, mode) => matmulParts(gpu, w.o, io.attn, y, mode, "weights", undefined, intX),
      ),
      // SwiGLU (GeGLU for Gemma), the MLP norm fused into its x loads: with normed =
      // rmsnorm(hidden) · mlpNorm, mlp = act(normed · Wgateᵀ) * (normed · Wupᵀ).
      ...gluParts(gpu, w.gateUp, io.hidden, io.mlp, { gain: w.mlpNorm, eps }, cfg.activation, intX),
      // Down projection into the residual stream: hidden += mlp · Wdownᵀ; with Gemma 3's norm
      // after the MLP, hidden += rmsnorm(mlp · Wdownᵀ) · mlpOutNorm.
      ...intoResidual(
        w.mlpOutNorm,
        (y, mode) => matmulParts(gpu, w.down, io.mlp, y, mode, "weights", undefined, intX),
      ),
    ];
  });

  // Tail: runs on sample rows only.
  const tail = [
    // The sampled rows' hidden states, gathered into consecutive rows.
    bindGatherRows(gpu, { x: io.hidden, rowIndex: io.sampleRow, y: io.sampleHidden, D }),
    // LM head (the embedding when tied), the final norm fused into its x loads:
    // logits = (rmsnorm(sampleHidden) · finalNorm) · Wlmᵀ.
    ...matmulParts(gpu, weights.lmHead, io.sampleHidden, io.logits, "store", "lmHead", {
      gain: weights.finalNorm,
      eps,
    }, intX),
    // Gemma 2: logits = cap·tanh(logits / cap), before anything reads them.
    ...(cfg.finalSoftcap > 0
      ? [bindBiasAct(gpu, {
        x: io.logits,
        b: null,
        width: cfg.vocabSize,
        act: "softcap",
        cap: cfg.finalSoftcap,
        kind: "lmHead",
      })]
      : []),
  ];

  // The sampler: each sample's next id into nextIds (the next step's input) and its record
  // (id, logprob, and top-K logprobs when asked) into records, for the readback.
  const samplerArgs = {
    logits: io.logits,
    V: cfg.vocabSize,
    sampleSlot: io.sampleSlot,
    samplePos: io.samplePos,
    params: io.samplingParams,
    nextIds: io.nextIds,
  };
  const greedy = bindGreedySampler(gpu, {
    ...samplerArgs,
    maxRows: limits.maxSlots,
    out: io.recordsPlain,
  });
  const samplers = {
    plain: bindSampler(gpu, { ...samplerArgs, out: io.recordsPlain, topLogprobs: 0 }),
    top: bindSampler(gpu, {
      ...samplerArgs,
      out: io.recordsTop,
      topLogprobs: limits.maxTopLogprobs,
    }),
    greedy,
  };

  return {
    kernels: { head, layers, tail, adjust: controls.adjust, samplers, count: controls.count },
    destroy: () => greedy.destroy(),
  };
}
