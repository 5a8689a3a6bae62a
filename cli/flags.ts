// The flag table: every flag of `serve` and `generate`, once, in sections as --help lists them;
// here the sections both commands take (what a model is opened with), serve_flags.ts and
// generate_flags.ts the rest. A row holds the flag's name, its zod schema with its default, its
// --help lines, and the engine or runtime option it sets (converted where the option takes
// something else). Each command's schema, parseArgs spec, usage and options are derived from the
// rows (flag_row.ts); the rules between flags are commands.ts's. Adding a flag is one row plus the
// code that uses it.

import { z } from "zod";
import { DEFAULT_MODEL } from "../engine/sources/default_model.ts";
import { DEFAULT_DECODE_STEPS } from "../runtime/decode_group.ts";
import { type PolicyName, PRESETS } from "../runtime/policy/index.ts";
import { DEFAULT_SPECULATIVE_TOKENS } from "../runtime/speculative/speculation.ts";
import { flag, section, to } from "./flag_row.ts";

export const onOff = z.enum(["on", "off"]);
/** On|off as a boolean. */
const isOn = (v: "on" | "off") => v === "on";
/** On|off as a boolean; absent stays absent (the option's default). */
const onOffOrDefault = (v: "on" | "off" | undefined) => (v === undefined ? undefined : v === "on");
/** On|off as a boolean; absent, on. */
const notOff = (v: "on" | "off" | undefined) => v !== "off";
/** --host-kv-mb's default. */
export const DEFAULT_HOST_KV_MB = 256;

export const MODEL = section("model", {
  // Absent: the default hub model, or the demo model when it cannot be fetched (default_model.ts).
  model: flag({
    schema: z.array(z.string().min(1)).optional(),
    usage: [
      "--model M",
      "serve: give it several times for several models, NAME=M to name",
      "one; the first is the default.",
      "a local model directory, a .gguf file, a Hugging Face id (org/name:",
      "from the Hugging Face cache if there, else downloaded once into",
      "~/.cache/sluice/hub; $HF_ENDPOINT for a mirror; org/name:Q4_K_M or",
      "org/name:FILE.gguf picks a cached GGUF), ollama:NAME[:TAG] (Ollama's",
      'store), or "demo" (a small random model, no download). Default:',
      `${DEFAULT_MODEL}, or the demo model, with a notice, when it`,
      "cannot be downloaded.",
    ],
  }),
  f32: flag({
    schema: z.boolean().default(false),
    usage: ["--f32", "keep weights and KV in f32 even where the adapter has shader-f16"],
    engine: "forceF32",
  }),
  "kv-dtype": flag({
    schema: z.enum(["f16", "f32", "q8_0"]).optional(),
    usage: [
      "--kv-dtype f16|f32|q8_0",
      "KV cache dtype (default: as the weights); q8_0 keeps K and V as",
      "int8 in groups of 32 with an f16 scale each, about 1.9x the tokens of",
      "f16 in the same --gpu-kv-mb (head dim a multiple of 32)",
    ],
    engine: "kvDtype",
  }),
  // Float weights in storage buffers or textures; auto: timed at first start, cached per adapter.
  "matmul-kernel": flag({
    schema: z.enum(["auto", "storage", "texture"]).default("auto"),
    usage: [
      "--matmul-kernel auto|storage|texture",
      "where weight matrices live (float or GGUF blocks)",
      "and so which matmul reads them (default auto: both timed at first",
      "start on the model's shapes and formats, the winner cached per",
      "adapter in ~/.cache/sluice/kernels)",
    ],
    engine: "matmulKernel",
  }),
  // GGUF blocks by the float kernels or by integer dot products; auto: timed, cached per adapter.
  "quant-kernels": flag({
    schema: z.enum(["auto", "float", "int"]).default("auto"),
    usage: [
      "--quant-kernels auto|float|int",
      "how GGUF-quantized matrices are multiplied: float (dequantize",
      "and fma) or int (x to int8 blocks, dot4I8Packed; needs WGSL's",
      "packed_4x8_integer_dot_product). Default auto: both timed at",
      "first start where the runtime has it, the winner cached",
    ],
    engine: "quantKernels",
  }),
});

export const ENGINE = section("engine and scheduling", {
  "gpu-kv-mb": flag({
    schema: z.coerce.number().positive().optional(),
    usage: [
      "--gpu-kv-mb MB",
      "device KV cache budget (default: what the adapter's limits allow)",
    ],
    engine: "gpuKvMb",
  }),
  "max-batch": flag({
    schema: z.coerce.number().int().min(1).max(256).default(32),
    usage: ["--max-batch N", "most requests running at once (default 32)"],
    engine: "maxSlots",
  }),
  "prefill-chunk": flag({
    schema: z.coerce.number().int().min(16).max(4096).default(128),
    usage: ["--prefill-chunk N", "token rows per step (default 128)"],
    engine: "maxRows",
  }),
  // Multi-step decode (runtime/decode_group.ts): the engine is loaded for as many as it runs.
  "decode-steps": flag({
    schema: z.coerce.number().int().min(1).max(64).default(DEFAULT_DECODE_STEPS),
    usage: [
      "--decode-steps N",
      "most decode steps run in one submission when no request needs the host",
      "in between (no arrival, grammar, pause or copy due); a group's time is",
      "bounded (~200 ms) so cancels and arrivals wait little. 1: one step per",
      `submission (default ${DEFAULT_DECODE_STEPS})`,
    ],
    engine: "maxDecodeSteps",
    runtime: "decodeSteps",
  }),
  // Speculative decoding (runtime/speculative/): drafts verified as extra rows of a decode step.
  speculative: flag({
    schema: z.enum(["off", "ngram"]).default("off"),
    usage: [
      "--speculative off|ngram",
      "speculative decoding: ngram drafts a request's next tokens from its own",
      "prompt and output (prompt lookup); the model checks them as extra rows",
      "of one step. Greedy and seeded output is unchanged; constrained requests",
      "and requests with penalties do not speculate (default off)",
    ],
    runtime: "speculative",
  }),
  "num-speculative-tokens": flag({
    schema: z.coerce.number().int().min(1).max(16).default(DEFAULT_SPECULATIVE_TOKENS),
    usage: [
      "--num-speculative-tokens K",
      `most drafts per speculating step (default ${DEFAULT_SPECULATIVE_TOKENS})`,
    ],
    runtime: "speculativeTokens",
  }),
  // The defaults below (tokenflow, a host tier, recompute auto, write-through) are the combination
  // that measured best on this machine's adapter (docs/benchmarks/policies.md); on a GPU's
  // economics auto takes fcfs with vLLM's settings instead (runtime/policy/economics.ts).
  sched: flag({
    schema: z.enum(["auto", ...Object.keys(PRESETS)] as ["auto", ...PolicyName[]]).default("auto"),
    usage: [
      "--sched auto|reserve|fcfs|slo|layerkv|tokenflow",
      "scheduling policy (default auto: chosen at load from the profiled",
      "cost model, tokenflow where a step's rows cost what they cost, fcfs",
      "with vLLM V1's settings where a 32-row step costs under 2x one row);",
      "tokenflow: pause and resume requests by their readers' buffers;",
      "slo: admit a prefill only",
      "while every decoding request keeps its TBT SLO through it; layerkv:",
      "LayerKV's rule, while it fits every decode's TPOT slack (Eq. 1-2)",
    ],
    runtime: "policy",
  }),
  // TokenFlow's μ and Δt (runtime/policy/tokenflow.ts); absent: its defaults, 2 and 0.5 s.
  "tokenflow-safety": flag({
    schema: z.coerce.number().min(1).optional(),
    usage: [
      "--tokenflow-safety MU",
      "tokenflow: how many times the predicted cost of pausing and resuming a",
      "request its buffer must cover before it is paused (μ ≥ 1; default 2)",
    ],
    runtime: "tokenflowSafety",
  }),
  "tokenflow-interval-s": flag({
    schema: z.coerce.number().positive().optional(),
    usage: [
      "--tokenflow-interval-s S",
      "tokenflow: how often its decisions take effect, seconds (Δt;",
      "default 0.5)",
    ],
    runtime: "tokenflowIntervalS",
  }),
  // TokenFlow's rules that trade first tokens for smoothness, each measured in the matrix; absent:
  // the policy's defaults (keep-up off, overload admit, late by-slack, hold-back idle).
  "tokenflow-keep-up": flag({
    schema: onOff.optional(),
    usage: [
      "--tokenflow-keep-up on|off",
      "tokenflow: stop admitting at the largest batch that keeps up with",
      "its fastest reader (default off: it delays first tokens)",
    ],
    runtime: to("tokenflowKeepUp", onOffOrDefault),
  }),
  "tokenflow-overload": flag({
    schema: z.enum(["admit", "hold"]).optional(),
    usage: [
      "--tokenflow-overload admit|hold",
      "tokenflow: when readers ask more than the adapter makes, admit",
      "new requests as memory allows, or hold them (default admit)",
    ],
    runtime: "tokenflowOverload",
  }),
  "tokenflow-late": flag({
    schema: z.enum(["by-slack", "behind"]).optional(),
    usage: [
      "--tokenflow-late by-slack|behind",
      "tokenflow: a new request past its TTFT SLO is admitted before",
      "paused requests (by-slack: it stalls already), or after them (default",
      "by-slack)",
    ],
    runtime: "tokenflowLate",
  }),
  "tokenflow-hold-back": flag({
    schema: z.enum(["idle", "always"]).optional(),
    usage: [
      "--tokenflow-hold-back idle|always",
      "tokenflow: hold requests far ahead of their readers back only",
      "while none waits to be admitted, or always (default idle)",
    ],
    runtime: "tokenflowHoldBack",
  }),
  priority: flag({
    schema: onOff.default("on"),
    usage: [
      "--priority on|off",
      "order and preempt by each request's `priority` (lower first, as vLLM),",
      "aged one level per second of waiting so none starves (default on; off",
      "ignores it)",
    ],
    runtime: to("priority", isOn),
  }),
  "prefix-cache": flag({
    schema: onOff.default("on"),
    usage: ["--prefix-cache on|off", "share KV of identical prompt prefixes (default on)"],
    runtime: to("prefixCache", isOn),
  }),
  // Host memory is taken only as KV lands there.
  // Absent: 256, and --sched auto may leave it unused (runtime/policy/economics.ts); given, it stays.
  "host-kv-mb": flag({
    schema: z.coerce.number().min(0).optional(),
    usage: [
      "--host-kv-mb MB",
      "host KV tier for paused requests, taken as used (default 256; 0: none)",
    ],
    engine: to("hostKvMb", (mb: number | undefined) => mb ?? DEFAULT_HOST_KV_MB),
  }),
  // Absent: --recompute auto chooses per request; given: it is the fixed choice.
  preempt: flag({
    schema: z.enum(["recompute", "swap", "partial"]).optional(),
    usage: [
      "--preempt recompute|swap|partial",
      "a fixed choice of what a preempted request's KV becomes",
      "(default: --recompute auto chooses)",
    ],
    runtime: "preempt",
  }),
  // Absent, "auto" unless a fixed --preempt is given (commands.ts reads both).
  recompute: flag({
    schema: z.enum(["off", "auto"]).optional(),
    usage: [
      "--recompute off|auto",
      "auto: per preempted request, swap its KV to the host tier, drop only its",
      "oldest blocks or drop it all, whichever the cost model (profiled at load)",
      "predicts cheapest, its buffered playout counted; replaces --preempt",
      "(default auto unless --preempt is given)",
    ],
    runtime: "recompute",
  }),
  // eLLM's token-wise caching of running requests; --preempt partial is its weaker baseline.
  "token-cache": flag({
    schema: onOff.default("off"),
    usage: [
      "--token-cache on|off",
      "eLLM: under memory pressure, running requests keep only their newest",
      "tokens' KV and recompute the oldest in each step they decode, the",
      "uncached share chosen every step against the batch size (default off)",
    ],
    runtime: to("tokenCache", isOn),
  }),
  // Absent: on when there is a host tier; given without one, refused (they would do nothing).
  "write-through": flag({
    schema: onOff.optional(),
    usage: [
      "--write-through on|off",
      "copy full KV blocks to the host tier as they fill (default on; needs",
      "--host-kv-mb)",
    ],
    runtime: to("writeThrough", notOff),
  }),
  "swap-reuse": flag({
    schema: onOff.optional(),
    usage: [
      "--swap-reuse on|off",
      "keep host copies after a swap-in (default on; needs --host-kv-mb)",
    ],
    runtime: to("swapReuse", notOff),
  }),
  offload: flag({
    schema: z.enum(["none", "uniform", "orbit"]).default("none"),
    usage: [
      "--offload none|uniform|orbit",
      "keep some layers' KV on the host tier, copied into a prefetch",
      "region just before each layer runs (needs --host-kv-mb): uniform, every",
      "request at --offload-distance; orbit, a planner picks each request's",
      "distance to fit the device budget at the least step time (default none)",
    ],
    runtime: "offload",
  }),
  "offload-distance": flag({
    schema: z.coerce.number().int().min(1).optional(),
    usage: ["--offload-distance N", "uniform: every N-th layer's KV on the host (default 2)"],
    runtime: "offloadDistance",
  }),
  "prefetch-blocks": flag({
    schema: z.coerce.number().int().min(1).optional(),
    usage: [
      "--prefetch-blocks N",
      "prefetch region, blocks per arena (default: one layer's share of the pool)",
    ],
    runtime: "prefetchBlocks",
  }),
  "orbit-window-max": flag({
    schema: z.coerce.number().int().min(1).optional(),
    usage: [
      "--orbit-window-max N",
      "orbit: the longest decode window the planner may choose for a plan, in",
      "steps (Δ_max; it picks the window itself, from 16 up; default 128)",
    ],
    runtime: "orbitWindowMax",
  }),
  "orbit-plan": flag({
    schema: z.enum(["request", "batch"]).optional(),
    usage: [
      "--orbit-plan request|batch",
      "orbit: one offload distance per request (default) or one for the whole",
      "batch (OrbitFlow Fig. 14a's Batch-Uniform baseline)",
    ],
    runtime: "orbitPlan",
  }),
  "orbit-pause": flag({
    schema: onOff.optional(),
    usage: [
      "--orbit-pause on|off",
      "orbit: pause a request when no plan fits the batch (Pause-Resume;",
      "default on); off keeps the last plan and lets preemption take memory",
    ],
    runtime: to("orbitPause", onOffOrDefault),
  }),
  // Off by default: it measured worse than slo's admission alone (docs/benchmarks/policies.md).
  // Only slo, layerkv and tokenflow take it, with a host tier (checked).
  "layerwise-prefill": flag({
    schema: onOff.default("off"),
    usage: [
      "--layerwise-prefill on|off",
      "slo, layerkv or tokenflow, with --host-kv-mb (LayerKV): every prefill",
      "keeps on the device the fewest layers whose copies to the host tier hide",
      "under its compute, the rest offloaded as its prefill writes them (through",
      "the prefetch region even with --offload none); when a forecast of the",
      "running requests' growth runs short, the newest ones' kept layers go to",
      "the host too; a queued prompt starts without waiting for a whole",
      "request's blocks (default off: docs/benchmarks/policies.md)",
    ],
    runtime: to("layerwisePrefill", isOn),
  }),
});
