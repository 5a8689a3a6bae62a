// The GPUs and models the five papers measured on, as the simulation's cost model reads them. Every
// constant says where it comes from: [datasheet] the vendor's published figure, [config] the
// model's published config.json, [paper] the paper's own text, [derived] arithmetic on those (shown),
// [assumed] a choice of ours the papers do not pin down, which a profile test or a sweep exercises.
// ../shared/papers/evaluation-setups.md gathers the papers' setups these follow.

/** A GPU and the link to its host memory. */
export interface GpuProfile {
  name: string;
  memoryGB: number;
  /** Peak memory bandwidth, GB/s. */
  bandwidthGBs: number;
  /** Peak dense FP16/BF16 tensor throughput, TFLOPS. */
  tflops: number;
  /** Host link bandwidth one way, GB/s, as copies of whole KV blocks achieve it. */
  linkGBs: number;
  /** What one copy call costs beyond its bytes (driver dispatch of a cudaMemcpyAsync), µs. */
  copyCallUs: number;
}

/** A decoder-only transformer's shape. */
export interface ModelProfile {
  name: string;
  layers: number;
  hidden: number;
  intermediate: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  /** Bytes per weight and per KV element (bf16 in every paper's setup). */
  bytesPerValue: number;
}

// PCIe: x16 links' per-direction peaks are 15.75 GB/s (3.0) and 31.5 GB/s (4.0) [PCI-SIG spec].
// [assumed] Pinned-memory copies of whole blocks reach about 80% of it: 12.6 and 25 GB/s, the
// "~12–13 GB/s in practice" the setups note gives for 3.0.
const PCIE3_GBS = 12.6;
const PCIE4_GBS = 25;
// [derived] FastSwitch's Table 1 (LLaMA-8B, A10): swapping out 9.3 blocks per operation took
// 1.19 ms per operation, 5.43 blocks per operation 0.63 ms. A group of n contiguous 2 MiB blocks
// is 64 calls (K and V of 32 layers) plus n × 84 µs of bytes at 25 GB/s, which fits those with
// 6.4 and 2.6 µs per call; we take 5 µs (the profile test checks both operations).
const COPY_CALL_US = 5;

export const GPUS = {
  /** OrbitFlow's LLaMA3-8B machine: host over PCIe 3.0 x16 [paper]. 768 GB/s, 111 TFLOPS
   * (222 sparse) [datasheet]. */
  a5000: {
    name: "RTX A5000",
    memoryGB: 24,
    bandwidthGBs: 768,
    tflops: 111,
    linkGBs: PCIE3_GBS,
    copyCallUs: COPY_CALL_US,
  },
  /** OrbitFlow's Fig. 2b and 70B machine, PCIe 4.0 x16 [paper]. 768 GB/s, 154.8 TFLOPS (309.7
   * sparse) [datasheet]. */
  a6000: {
    name: "RTX A6000",
    memoryGB: 48,
    bandwidthGBs: 768,
    tflops: 154.8,
    linkGBs: PCIE4_GBS,
    copyCallUs: COPY_CALL_US,
  },
  /** LayerKV: each pair of L20s shares one PCIe link [paper], so a GPU gets half of 4.0's.
   * 864 GB/s, 119.5 TFLOPS [datasheet]. */
  l20: {
    name: "L20",
    memoryGB: 48,
    bandwidthGBs: 864,
    tflops: 119.5,
    linkGBs: PCIE4_GBS / 2,
    copyCallUs: COPY_CALL_US,
  },
  /** FastSwitch's LLaMA-8B GPU, PCIe 4.0 x16 [paper]. 600 GB/s, 125 TFLOPS [datasheet]. */
  a10: {
    name: "A10",
    memoryGB: 24,
    bandwidthGBs: 600,
    tflops: 125,
    linkGBs: PCIE4_GBS,
    copyCallUs: COPY_CALL_US,
  },
  /** TokenFlow's controlled tests. 1,008 GB/s, 165.2 TFLOPS with FP32 accumulate [datasheet:
   * Ada whitepaper]; PCIe 4.0 x16. */
  rtx4090: {
    name: "RTX 4090",
    memoryGB: 24,
    bandwidthGBs: 1008,
    tflops: 165.2,
    linkGBs: PCIE4_GBS,
    copyCallUs: COPY_CALL_US,
  },
  /** eLLM: A100 80 GB PCIe, PCIe 4.0 x16, no NVLink [paper]. 1,935 GB/s, 312 TFLOPS
   * [datasheet]. */
  a100: {
    name: "A100 80GB PCIe",
    memoryGB: 80,
    bandwidthGBs: 1935,
    tflops: 312,
    linkGBs: PCIE4_GBS,
    copyCallUs: COPY_CALL_US,
  },
  /** The GPU the device tool lends. 4.8 TB/s, 989 TFLOPS [datasheet]; PCIe 5.0 x16 host link
   * (63 GB/s peak) at the same 80%. */
  h200: {
    name: "H200",
    memoryGB: 141,
    bandwidthGBs: 4800,
    tflops: 989,
    linkGBs: 50,
    copyCallUs: COPY_CALL_US,
  },
} as const satisfies Record<string, GpuProfile>;

export const MODELS = {
  /** [config] meta-llama/Meta-Llama-3-8B. */
  llama3_8b: {
    name: "Llama-3-8B",
    layers: 32,
    hidden: 4096,
    intermediate: 14336,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    vocab: 128256,
    bytesPerValue: 2,
  },
  /** [config] meta-llama/Llama-2-7b-hf (MHA). */
  llama2_7b: {
    name: "Llama-2-7B",
    layers: 32,
    hidden: 4096,
    intermediate: 11008,
    heads: 32,
    kvHeads: 32,
    headDim: 128,
    vocab: 32000,
    bytesPerValue: 2,
  },
  /** [config] meta-llama/Llama-2-13b-hf (MHA). */
  llama2_13b: {
    name: "Llama-2-13B",
    layers: 40,
    hidden: 5120,
    intermediate: 13824,
    heads: 40,
    kvHeads: 40,
    headDim: 128,
    vocab: 32000,
    bytesPerValue: 2,
  },
} as const satisfies Record<string, ModelProfile>;

/** What a model reads per layer and per token. */
export function modelSizes(m: ModelProfile) {
  const q = m.heads * m.headDim, kv = m.kvHeads * m.headDim;
  const layerParams = m.hidden * (2 * q + 2 * kv) + 3 * m.hidden * m.intermediate;
  return {
    layerParams,
    layerWeightBytes: layerParams * m.bytesPerValue,
    /** The LM head's weights (untied in all three models). */
    headWeightBytes: m.vocab * m.hidden * m.bytesPerValue,
    /** All weights: layers, embedding and head. */
    weightBytes: (m.layers * layerParams + 2 * m.vocab * m.hidden) * m.bytesPerValue,
    /** One token's K and V in one layer. */
    kvBytesPerTokenLayer: 2 * kv * m.bytesPerValue,
  };
}

/** How close to the datasheet the GPU's kernels run. */
export interface Efficiency {
  /** Share of peak bandwidth a weight-streaming matmul reaches. */
  weights: number;
  /** Share of peak bandwidth attention reaches reading the KV cache of `attentionAt` sequences. */
  attention: number;
  /**
   * Sequences in the step that `attention` was measured at. A paged decode kernel spreads its
   * thread blocks over sequences (and heads), so a few sequences leave SMs idle and many fill them:
   * the share at n sequences is n / (n + n½), n½ fixed by (attentionAt, attention), which tends
   * to the whole bandwidth. Absent: the same share at any batch.
   */
  attentionAt?: number;
  /** Share of peak tensor throughput a prefill reaches. */
  compute: number;
  /** Host time per step beyond the GPU's (scheduling, launches, sampling), ms. */
  stepOverheadMs: number;
}

/**
 * [derived] OrbitFlow's Fig. 2b (LLaMA3-8B on an A6000, batch of 4 at its fixed batch size): one
 * layer's KV transfer takes 1.9× its compute at 2K tokens and 6.1× at 16K. With PCIe 4.0 at
 * 25 GB/s the transfers are 1.34 and 10.7 ms, so a layer computes in 0.71 and 1.76 ms: solving
 * for the two bandwidth shares gives weights ≈ 1.0 and attention ≈ 0.29 (the profile test checks
 * both ratios). That is at 4 sequences; at n the share is n / (n + 9.8) (Efficiency.attentionAt).
 * [paper] eLLM's Fig. 10 bounds it at large batches: vLLM-Recompute's mean TPOT on Llama2-13B /
 * A100, with the KV pool full (its Fig. 2: 50–100% memory), is 63.91 ms, prefill stalls included,
 * so a decode step over a full pool of ~60K tokens takes less. At 0.29 at every batch it would take
 * ~103 ms; at n / (n + 9.8) it takes ~45 ms (the profile test checks both anchors). [assumed]
 * compute 0.6 of peak, a large GEMM's usual share; 2 ms of host time per step, vLLM v0's order of
 * scheduling and launch overhead.
 */
export const VLLM_EFFICIENCY: Efficiency = {
  weights: 1.0,
  attention: 0.29,
  attentionAt: 4,
  compute: 0.6,
  stepOverheadMs: 2,
};

/** One paper's setting: its GPU and model, and the KV budgets its setup leaves. */
export interface SimProfile {
  id: string;
  gpu: GpuProfile;
  model: ModelProfile;
  efficiency: Efficiency;
  /** Device KV tokens: what the weights and the framework leave of the GPU's memory. */
  kvTokens: number;
  /** Host KV tokens (swap space, offloaded layers). */
  hostKvTokens: number;
  /**
   * When a prefetch of an offloaded layer may start (gpu_step_cost.ts): "region" (default) once
   * the last offloaded layer of any request has run, the whole prefetch region reused as one;
   * "per-request" once the blocks it lands in were last read, so each request's copies run on
   * their own stream (OrbitFlow's Algorithm 1), hiding behind every layer since its own last.
   */
  prefetchStart?: "region" | "per-request";
  /** Where the budgets come from. */
  about: string;
}

const GiB = 1024 ** 3;
const tokensIn = (bytes: number, m: ModelProfile) =>
  Math.floor(bytes / (modelSizes(m).kvBytesPerTokenLayer * m.layers));

export const PROFILES: Record<string, SimProfile> = {
  orbitflow: {
    id: "orbitflow",
    gpu: GPUS.a5000,
    model: MODELS.llama3_8b,
    efficiency: VLLM_EFFICIENCY,
    kvTokens: 16_384, // [paper] footnote: ~2 GB left ≈ 16K tokens
    hostKvTokens: tokensIn(64 * GiB, MODELS.llama3_8b), // [assumed] of the 384 GB host
    // [paper] Algorithm 1: one prefetch stream per request, a layer stalling until its blocks are in
    prefetchStart: "per-request",
    about: "A5000 24 GB, LLaMA3-8B, PCIe 3.0; ~2 GB (16K tokens) of KV on the GPU",
  },
  layerkv: {
    id: "layerkv",
    gpu: GPUS.l20,
    model: MODELS.llama2_7b,
    efficiency: VLLM_EFFICIENCY,
    // [derived] 48 GB × 0.9 − 13.5 GB weights − ~1.5 GB activations ≈ 28 GB ≈ 55K tokens
    kvTokens: tokensIn(28 * GiB, MODELS.llama2_7b),
    hostKvTokens: tokensIn(128 * GiB, MODELS.llama2_7b), // [assumed] of the 2 TB host
    about: "L20 48 GB, Llama-2-7B, a PCIe 4.0 link shared by two GPUs; ~28 GB of KV",
  },
  fastswitch: {
    id: "fastswitch",
    gpu: GPUS.a10,
    model: MODELS.llama3_8b,
    efficiency: VLLM_EFFICIENCY,
    // [derived] 24 GB × 0.9 − 16 GB weights − ~0.6 GB activations ≈ 5 GB ≈ 40K tokens
    kvTokens: tokensIn(5 * GiB, MODELS.llama3_8b),
    hostKvTokens: tokensIn(60 * GiB, MODELS.llama3_8b), // [paper] 60 GB swap space per GPU
    about: "A10 24 GB, LLaMA-8B, PCIe 4.0; ~5 GB of KV, 60 GB of swap",
  },
  tokenflow: {
    id: "tokenflow",
    gpu: GPUS.rtx4090,
    model: MODELS.llama3_8b,
    efficiency: VLLM_EFFICIENCY,
    // [derived] 24 GB less 16 GB weights and SGLang's reserve ≈ 5 GB ≈ 40K tokens
    kvTokens: tokensIn(5 * GiB, MODELS.llama3_8b),
    hostKvTokens: tokensIn(64 * GiB, MODELS.llama3_8b), // [assumed]
    about: "RTX 4090 24 GB, Llama3-8B, PCIe 4.0; ~5 GB of KV",
  },
  ellm: {
    id: "ellm",
    gpu: GPUS.a100,
    model: MODELS.llama2_13b,
    efficiency: VLLM_EFFICIENCY,
    // [derived] 80 GB × 0.9 − 26 GB weights ≈ 46 GB ≈ 60K tokens at 800 KiB each
    kvTokens: tokensIn(46 * GiB, MODELS.llama2_13b),
    hostKvTokens: tokensIn(40 * GiB, MODELS.llama2_13b), // [paper] 40 GB host KV for 13B
    about: "A100 80 GB PCIe, Llama2-13B, PCIe 4.0; ~46 GB of KV, 40 GB on the host",
  },
  h200: {
    id: "h200",
    gpu: GPUS.h200,
    model: MODELS.llama3_8b,
    efficiency: VLLM_EFFICIENCY,
    // [assumed] TokenFlow's H200 runs: mem-frac 0.3 ≈ 42 GB, less 16 GB of weights
    kvTokens: tokensIn(26 * GiB, MODELS.llama3_8b),
    hostKvTokens: tokensIn(64 * GiB, MODELS.llama3_8b),
    about: "H200 141 GB, Llama3-8B, PCIe 5.0; ~26 GB of KV (TokenFlow's mem-frac 0.3)",
  },
};
