// Sluice command line: `serve`, `generate`, `bench`. Flags are parsed with zod into one config.
// Every command answers --help with its usage and nothing else (the modules that load models or
// open the GPU are imported only once a command runs); a bad flag gets one line naming it and the
// usage, exit 2. Other failures (a model that cannot be had or loaded) exit 1 with the message.

import { parseArgs } from "node:util";
import { z } from "zod";
import { DEFAULT_MODEL } from "./engine/sources/default_model.ts";
import { ensureRuntimeDir } from "./engine/util/runtime_dir.ts";
import { type PolicyName, presetProblems, PRESETS } from "./runtime/policy/index.ts";
import { MAX_READING_RATE, MIN_READING_RATE } from "./runtime/service.ts";
import { DEFAULT_DECODE_STEPS } from "./runtime/decode_group.ts";

const idList = z.string().regex(/^\d+(,\d+)*$/, "expected comma-separated token ids")
  .transform((s) => s.split(",").map(Number));

const EngineFlags = z.object({
  // Absent: the default hub model, or the demo model when it cannot be fetched (default_model.ts).
  model: z.string().min(1).optional(),
  "gpu-kv-mb": z.coerce.number().positive().optional(),
  "max-batch": z.coerce.number().int().min(1).max(256).default(32),
  "prefill-chunk": z.coerce.number().int().min(16).max(4096).default(128),
  // Multi-step decode (runtime/decode_group.ts): most decode steps per submission; 1 = one each.
  "decode-steps": z.coerce.number().int().min(1).max(64).default(DEFAULT_DECODE_STEPS),
  f32: z.boolean().default(false),
  "kv-dtype": z.enum(["f16", "f32", "q8_0"]).optional(),
  // Float weights in storage buffers or textures; auto: timed at first start, cached per adapter.
  "matmul-kernel": z.enum(["auto", "storage", "texture"]).default("auto"),
  // The defaults below (tokenflow, a host tier, recompute auto, write-through) are the combination
  // that measured best in the serving report (docs/benchmarks/policies.md); fcfs is the vLLM baseline.
  sched: z.enum(Object.keys(PRESETS) as [PolicyName, ...PolicyName[]]).default("tokenflow"),
  // TokenFlow's μ and Δt (runtime/policy/tokenflow.ts); absent: its defaults, 2 and 0.5 s.
  "tokenflow-safety": z.coerce.number().min(1).optional(),
  "tokenflow-interval-s": z.coerce.number().positive().optional(),
  // TokenFlow's rules that trade first tokens for smoothness, each measured in the matrix; absent:
  // the policy's defaults (keep-up off, overload admit, late by-slack, hold-back idle).
  "tokenflow-keep-up": z.enum(["on", "off"]).optional(),
  "tokenflow-overload": z.enum(["admit", "hold"]).optional(),
  "tokenflow-late": z.enum(["by-slack", "behind"]).optional(),
  "tokenflow-hold-back": z.enum(["idle", "always"]).optional(),
  priority: z.enum(["on", "off"]).default("on"),
  "prefix-cache": z.enum(["on", "off"]).default("on"),
  // Host memory is taken only as KV lands there.
  "host-kv-mb": z.coerce.number().min(0).default(256),
  // Absent: --recompute auto chooses per request; given: it is the fixed choice.
  preempt: z.enum(["recompute", "swap", "partial"]).optional(),
  recompute: z.enum(["off", "auto"]).optional(),
  // eLLM's token-wise caching of running requests; --preempt partial is its weaker baseline.
  "token-cache": z.enum(["on", "off"]).default("off"),
  // Absent: on when there is a host tier; given without one, refused (they would do nothing).
  "write-through": z.enum(["on", "off"]).optional(),
  "swap-reuse": z.enum(["on", "off"]).optional(),
  offload: z.enum(["none", "uniform", "orbit"]).default("none"),
  "offload-distance": z.coerce.number().int().min(1).optional(),
  "prefetch-blocks": z.coerce.number().int().min(1).optional(),
  "orbit-window-max": z.coerce.number().int().min(1).optional(),
  // Off by default: it measured worse than slo's admission alone (docs/benchmarks/policies.md).
  "layerwise-prefill": z.enum(["on", "off"]).default("off"),
});

/**
 * Flags that only make sense together (runtime/policy/index.ts says which), checked on each
 * command's final schema (zod cannot extend an object that has refinements), before anything loads.
 */
function checkPreset(f: EngineFlagValues, ctx: z.RefinementCtx): void {
  const options = runtimeOptions(f).runtime;
  const hostTier = f["host-kv-mb"] > 0;
  for (const p of presetProblems(f.sched, options, { hostTier })) {
    ctx.addIssue({ code: "custom", path: [p.flag], message: p.message });
  }
  // The host tier's own flags do nothing without it.
  for (const flag of ["write-through", "swap-reuse"] as const) {
    if (!hostTier && f[flag] !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: [flag],
        message: "needs a host KV tier: pass --host-kv-mb MB",
      });
    }
  }
}

const GenerateFlags = EngineFlags.extend({
  prompt: z.string().optional(),
  "prompt-ids": idList.optional(),
  chat: z.boolean().default(false),
  "max-tokens": z.coerce.number().int().min(0).default(64),
  temperature: z.coerce.number().min(0).max(2).default(0),
  "top-k": z.coerce.number().int().min(0).default(0),
  "top-p": z.coerce.number().gt(0).max(1).default(1),
  seed: z.coerce.number().int().min(0).optional(),
  "top-logprobs": z.coerce.number().int().min(0).max(20).default(0),
  json: z.boolean().default(false),
}).refine((f) => (f.prompt === undefined) !== (f["prompt-ids"] === undefined), {
  message: "pass exactly one of --prompt or --prompt-ids",
}).superRefine(checkPreset);

const env = (name: string) => Deno.env.get(name) || undefined;
const commaList = z.string().transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean));

const ServeFlags = EngineFlags.extend({
  host: z.string().default(env("SLUICE_HOST") ?? "127.0.0.1"),
  port: z.coerce.number().int().min(0).max(65535).default(Number(env("SLUICE_PORT") ?? 8080)),
  "api-key": z.string().min(1).optional().transform((v) => v ?? env("SLUICE_API_KEY")),
  "max-queue": z.coerce.number().int().min(0).default(64),
  "max-body-kb": z.coerce.number().int().min(1).default(1024),
  "max-tokens-limit": z.coerce.number().int().min(1).default(4096),
  "reading-rate": z.coerce.number().min(MIN_READING_RATE).max(MAX_READING_RATE).optional(),
  "slo-ttft-ms": z.coerce.number().positive().optional(),
  "slo-tbt-ms": z.coerce.number().positive().optional(),
  "shutdown-grace-s": z.coerce.number().min(0).default(10),
  "allowed-hosts": commaList.optional(),
  "cors-origins": commaList.optional(),
  // Absent: as many as the descriptor limit leaves room for (server/connections/).
  "max-connections": z.coerce.number().int().min(1).optional(),
  "header-timeout-s": z.coerce.number().positive().default(10),
  "keepalive-timeout-s": z.coerce.number().positive().default(5),
  "metrics-auth": z.enum(["on", "off"]).default("off"),
  // A comment line on a silent stream, before a proxy's idle timeout (commonly 60 s) cuts it.
  "sse-keepalive-s": z.coerce.number().positive().max(3600).default(5),
  // llama.cpp's: "auto" answers <think> text as reasoning_content; "none" leaves it in the text.
  "reasoning-format": z.enum(["auto", "none"]).default("auto"),
}).superRefine(checkPreset);
export type ServeFlags = z.infer<typeof ServeFlags>;

const STRING_FLAGS = [
  "model",
  "sched",
  "tokenflow-safety",
  "tokenflow-interval-s",
  "tokenflow-keep-up",
  "tokenflow-overload",
  "tokenflow-late",
  "tokenflow-hold-back",
  "priority",
  "prefix-cache",
  "host-kv-mb",
  "preempt",
  "recompute",
  "token-cache",
  "write-through",
  "swap-reuse",
  "offload",
  "offload-distance",
  "prefetch-blocks",
  "orbit-window-max",
  "layerwise-prefill",
  "gpu-kv-mb",
  "kv-dtype",
  "matmul-kernel",
  "max-batch",
  "prefill-chunk",
  "decode-steps",
  "prompt",
  "prompt-ids",
  "max-tokens",
  "temperature",
  "top-k",
  "top-p",
  "seed",
  "top-logprobs",
  "host",
  "port",
  "api-key",
  "max-queue",
  "max-body-kb",
  "max-tokens-limit",
  "reading-rate",
  "slo-ttft-ms",
  "slo-tbt-ms",
  "shutdown-grace-s",
  "allowed-hosts",
  "cors-origins",
  "max-connections",
  "header-timeout-s",
  "keepalive-timeout-s",
  "metrics-auth",
  "sse-keepalive-s",
  "reasoning-format",
];
const BOOLEAN_FLAGS = ["f32", "json", "chat"];

/** A flag the command does not know, or a value it cannot take: exit 2 with the usage. */
class UsageError extends Error {}

function parseFlags<T extends z.ZodType>(schema: T, args: string[]): z.infer<T> {
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const f of STRING_FLAGS) options[f] = { type: "string" };
  for (const f of BOOLEAN_FLAGS) options[f] = { type: "boolean" };
  let values;
  try {
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  // A flag another command takes is still unknown here.
  const known = schema instanceof z.ZodObject ? Object.keys(schema.shape) : null;
  const stray = known && Object.keys(values).find((k) => !known.includes(k));
  if (stray) throw new UsageError(`unknown flag --${stray} for this command`);
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    throw new UsageError(
      parsed.error.issues.map((i) => (i.path.length ? `--${i.path.join(".")}: ` : "") + i.message)
        .join("; "),
    );
  }
  return parsed.data;
}

type EngineFlagValues = z.infer<typeof EngineFlags>;

/** An on|off flag as a boolean; absent stays absent (the option's default). */
const onOff = (v: "on" | "off" | undefined) => (v === undefined ? undefined : v === "on");

/** --recompute as given; absent, "auto" unless a fixed --preempt was given. */
function recomputeOf(flags: EngineFlagValues): "off" | "auto" {
  return flags.recompute ?? (flags.preempt === undefined ? "auto" : "off");
}

/** The engine and runtime options every command shares, from its flags. */
function runtimeOptions(flags: EngineFlagValues) {
  return {
    engine: {
      gpuKvMb: flags["gpu-kv-mb"],
      maxSlots: flags["max-batch"],
      maxRows: flags["prefill-chunk"],
      maxDecodeSteps: flags["decode-steps"],
      forceF32: flags.f32,
      kvDtype: flags["kv-dtype"],
      matmulKernel: flags["matmul-kernel"],
      hostKvMb: flags["host-kv-mb"],
      // Its choice reads the cost model, profiled at load (by default only with a host tier).
      profileCosts: recomputeOf(flags) === "auto" || undefined,
    },
    runtime: {
      policy: flags.sched,
      decodeSteps: flags["decode-steps"],
      priority: flags.priority === "on",
      prefixCache: flags["prefix-cache"] === "on",
      preempt: flags.preempt,
      recompute: recomputeOf(flags),
      tokenCache: flags["token-cache"] === "on",
      writeThrough: (flags["write-through"] ?? "on") === "on",
      swapReuse: (flags["swap-reuse"] ?? "on") === "on",
      offload: flags.offload,
      offloadDistance: flags["offload-distance"],
      prefetchBlocks: flags["prefetch-blocks"],
      orbitWindowMax: flags["orbit-window-max"],
      layerwisePrefill: flags["layerwise-prefill"] === "on", // slo or tokenflow, a host tier (checked)
      tokenflowSafety: flags["tokenflow-safety"],
      tokenflowIntervalS: flags["tokenflow-interval-s"],
      tokenflowKeepUp: onOff(flags["tokenflow-keep-up"]),
      tokenflowOverload: flags["tokenflow-overload"],
      tokenflowLate: flags["tokenflow-late"],
      tokenflowHoldBack: flags["tokenflow-hold-back"],
    },
  };
}

/** Prints to stderr: logs never mix with a command's output on stdout. */
const log = (msg: string) => console.error(msg);

async function generate(args: string[]): Promise<void> {
  const flags = parseFlags(GenerateFlags, args);
  const { chooseModel } = await import("./engine/sources/default_model.ts");
  const { openRuntime } = await import("./runtime/open.ts");
  const { StreamDecoder } = await import("./engine/text/tokenizer.ts");
  const model = await chooseModel(flags.model, log);
  const options = runtimeOptions(flags);
  const { runtime, tokenizer: tok } = await openRuntime(model.dir, {
    engine: options.engine,
    runtime: { ...options.runtime, maxQueue: 1, maxTokensLimit: Number.MAX_SAFE_INTEGER },
    inProcess: true,
  });
  try {
    const ids = flags["prompt-ids"] ??
      (flags.chat
        ? tok.encodeChat([{ role: "user", content: flags.prompt! }])
        : tok.encode(flags.prompt!));
    const handle = runtime.submit({
      ids,
      maxTokens: flags["max-tokens"],
      sampling: {
        temperature: flags.temperature,
        topK: flags["top-k"],
        topP: flags["top-p"],
        seed: flags.seed ?? ((Math.random() * 2 ** 31) >>> 0),
      },
      topLogprobs: flags["top-logprobs"],
    });
    const tokens: number[] = [];
    const top: [number, number][][] = [];
    const decoder = new StreamDecoder(tok);
    const out = new TextEncoder();
    for await (const ev of handle.tokens) {
      tokens.push(ev.id);
      top.push(ev.top);
      if (!flags.json) await Deno.stdout.write(out.encode(decoder.push(ev.id)));
    }
    const finish = await handle.done;
    if (flags.json) {
      console.log(JSON.stringify({ tokens, top_logprobs: top, finish_reason: finish.reason }));
    } else {
      await Deno.stdout.write(out.encode(decoder.flush() + "\n"));
      console.error(`[${finish.completionTokens} tokens, finish: ${finish.reason}]`);
    }
  } finally {
    await runtime.close();
  }
}

async function serveCommand(args: string[]): Promise<void> {
  const flags = parseFlags(ServeFlags, args);
  const { chooseModel } = await import("./engine/sources/default_model.ts");
  const { serve } = await import("./server/serve.ts");
  const { openRuntime } = await import("./runtime/open.ts");
  // Resolved (downloaded, or given way to the demo model) before the port opens: the id clients
  // see must be the model's that is served.
  const model = await chooseModel(flags.model, log);
  const options = runtimeOptions(flags);
  await serve({ ...flags, model: model.id }, () =>
    openRuntime(model.dir, {
      engine: options.engine,
      runtime: {
        ...options.runtime,
        maxQueue: flags["max-queue"],
        maxTokensLimit: flags["max-tokens-limit"],
        defaultReadingRate: flags["reading-rate"],
        defaultSlo: { ttftMs: flags["slo-ttft-ms"], tbtMs: flags["slo-tbt-ms"] },
      },
    }));
}

async function benchCommand(args: string[]): Promise<void> {
  const { runBench } = await import("./bench/main.ts");
  Deno.exit(await runBench(args));
}

// ---- usage: keep each flag's line beside its schema entry above ----

const MODEL_FLAGS = `model:
  --model M              a local model directory, a .gguf file, a Hugging Face id (org/name:
                         from the Hugging Face cache if there, else downloaded once into
                         ~/.cache/sluice/hub; $HF_ENDPOINT for a mirror; org/name:Q4_K_M or
                         org/name:FILE.gguf picks a cached GGUF), ollama:NAME[:TAG] (Ollama's
                         store), or "demo" (a small random model, no download). Default:
                         ${DEFAULT_MODEL}, or the demo model, with a notice, when it
                         cannot be downloaded.
  --f32                  keep weights and KV in f32 even where the adapter has shader-f16
  --kv-dtype f16|f32|q8_0  KV cache dtype (default: as the weights); q8_0 keeps K and V as
                         int8 in groups of 32 with an f16 scale each, about 1.9x the tokens of
                         f16 in the same --gpu-kv-mb (head dim a multiple of 32)
  --matmul-kernel auto|storage|texture  where weight matrices live (float or GGUF blocks)
                         and so which matmul reads them (default auto: both timed at first
                         start on the model's shapes and formats, the winner cached per
                         adapter in ~/.cache/sluice/kernels)`;

const ENGINE_FLAGS = `engine and scheduling:
  --gpu-kv-mb MB         device KV cache budget (default: what the adapter's limits allow)
  --max-batch N          most requests running at once (default 32)
  --prefill-chunk N      token rows per step (default 128)
  --decode-steps N       most decode steps run in one submission when no request needs the host
                         in between (no arrival, grammar, pause or copy due); a group's time is
                         bounded (~200 ms) so cancels and arrivals wait little. 1: one step per
                         submission (default ${DEFAULT_DECODE_STEPS})
  --sched reserve|fcfs|slo|tokenflow   scheduling policy (default tokenflow: pause and resume
                         requests by their readers' buffers); slo (LayerKV): admit a prefill only
                         while every decoding request keeps its TBT SLO through it
  --tokenflow-safety MU  tokenflow: how many times the predicted cost of pausing and resuming a
                         request its buffer must cover before it is paused (μ ≥ 1; default 2)
  --tokenflow-interval-s S   tokenflow: how often its decisions take effect, seconds (Δt;
                         default 0.5)
  --tokenflow-keep-up on|off   tokenflow: stop admitting at the largest batch that keeps up with
                         its fastest reader (default off: it delays first tokens)
  --tokenflow-overload admit|hold   tokenflow: when readers ask more than the adapter makes, admit
                         new requests as memory allows, or hold them (default admit)
  --tokenflow-late by-slack|behind   tokenflow: a new request past its TTFT SLO is admitted before
                         paused requests (by-slack: it stalls already), or after them (default
                         by-slack)
  --tokenflow-hold-back idle|always   tokenflow: hold requests far ahead of their readers back only
                         while none waits to be admitted, or always (default idle)
  --priority on|off      order and preempt by each request's \`priority\` (lower first, as vLLM),
                         aged one level per second of waiting so none starves (default on; off
                         ignores it)
  --prefix-cache on|off  share KV of identical prompt prefixes (default on)
  --host-kv-mb MB        host KV tier for paused requests, taken as used (default 256; 0: none)
  --preempt recompute|swap|partial   a fixed choice of what a preempted request's KV becomes
                         (default: --recompute auto chooses)
  --recompute off|auto   auto: per preempted request, swap its KV to the host tier, drop only its
                         oldest blocks or drop it all, whichever the cost model (profiled at load)
                         predicts cheapest, its buffered playout counted; replaces --preempt
                         (default auto unless --preempt is given)
  --token-cache on|off   eLLM: under memory pressure, running requests keep only their newest
                         tokens' KV and recompute the oldest in each step they decode, the
                         uncached share chosen every step against the batch size (default off)
  --write-through on|off copy full KV blocks to the host tier as they fill (default on; needs
                         --host-kv-mb)
  --swap-reuse on|off    keep host copies after a swap-in (default on; needs --host-kv-mb)
  --offload none|uniform|orbit   keep some layers' KV on the host tier, copied into a prefetch
                         region just before each layer runs (needs --host-kv-mb): uniform, every
                         request at --offload-distance; orbit, a planner picks each request's
                         distance to fit the device budget at the least step time (default none)
  --offload-distance N   uniform: every N-th layer's KV on the host (default 2)
  --prefetch-blocks N    prefetch region, blocks per arena (default: one layer's share of the pool)
  --orbit-window-max N   orbit: the longest decode window the planner may choose for a plan, in
                         steps (Δ_max; it picks the window itself, from 16 up; default 128)
  --layerwise-prefill on|off   slo or tokenflow, with --host-kv-mb (LayerKV): every prefill is
                         given a layer split by the cost model, the free blocks and a forecast of
                         the running requests' growth: the layers whose KV stays on the device,
                         the rest offloaded to the host tier as its prefill writes them (through
                         the prefetch region even with --offload none); a queued prompt starts
                         without waiting for a whole request's blocks (default off: measured
                         worse before the split rule here: docs/benchmarks/policies.md)`;

const SERVE_USAGE = `usage: deno task serve [flags]          (main.ts serve)

An OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/models, /health,
/metrics. The port opens once the model is found (or downloaded); /health says "loading" (503) until
the weights are on the GPU and every kernel a request can need is compiled, then "ready". A model
that cannot be loaded ends the process (exit 1).

${MODEL_FLAGS}

http:
  --host H               listen address (default 127.0.0.1; $SLUICE_HOST)
  --port P               listen port (default 8080; $SLUICE_PORT)
  --api-key K            require "Authorization: Bearer K" on /v1/*, /tokenize and /state
                         ($SLUICE_API_KEY)
  --sse-keepalive-s S    a stream silent this long (queued, prefilling, paused) sends an SSE
                         comment line, so proxies do not cut it (default 5)
  --reasoning-format auto|none
                         auto: text a model writes in <think>...</think> is answered as
                         reasoning_content; none: it stays in the text (default auto; a request's
                         reasoning_format overrides it)
  --metrics-auth on|off  require the API key on /metrics too (default off)
  --allowed-hosts H,...  Host header values to answer besides the bind address ("*": any)
  --cors-origins O,...   web origins that may call the API (default none; "*": any)
  --max-body-kb N        request body limit (default 1024)
  --shutdown-grace-s S   on SIGINT/SIGTERM, let streams finish this long (default 10)
  --max-connections N    connections at once; more get 503 (default: what the file
                         descriptor limit allows, which is raised to its hard limit at start)
  --header-timeout-s S   a connection must send a whole request head within S of opening or
                         of its last response (default 10; a partial head then gets 408)
  --keepalive-timeout-s S   an idle keep-alive connection is closed after S (default 5)

requests:
  --max-queue N          requests waiting for admission before 429 (default 64)
  --max-tokens-limit N   largest max_tokens accepted (default 4096)
  --reading-rate R       default reading rate, tokens/s (default: unpaced)
  --slo-ttft-ms T, --slo-tbt-ms T   default SLO targets

${ENGINE_FLAGS}

  -h, --help             this text`;

const GENERATE_USAGE =
  `usage: deno task generate (--prompt TEXT [--chat] | --prompt-ids 1,2,3) [flags]
                                        (main.ts generate)

Runs one prompt and prints the reply as it is generated (or, with --json, the ids and top logprobs).

prompt and sampling:
  --prompt TEXT          the prompt as text (--chat: as a user message in the chat template)
  --prompt-ids 1,2,3     the prompt as token ids
  --max-tokens N         most tokens to generate (default 64)
  --temperature T        0 (default) is greedy
  --top-k K, --top-p P   sampling filters (default: off)
  --seed S               sampling seed (default: random)
  --top-logprobs K       K likeliest ids per step, 0-20 (default 0)
  --json                 print {"tokens":[...],"top_logprobs":[...],"finish_reason":"..."}

${MODEL_FLAGS}

${ENGINE_FLAGS}

  -h, --help             this text`;

const USAGE = `usage: deno task <command> [flags]     (main.ts <command>)

commands:
  serve      an OpenAI-compatible HTTP server with streaming
  generate   one prompt in the terminal
  bench      benchmarks: kernels, decode, kv, serve, responsiveness, startup

"<command> --help" lists a command's flags.`;

/** Each command's flags and usage (tests check that every flag is documented). */
export const COMMAND_FLAGS = {
  serve: { schema: ServeFlags, usage: SERVE_USAGE },
  generate: { schema: GenerateFlags, usage: GENERATE_USAGE },
};

const COMMANDS: Record<string, { usage: string; run: (args: string[]) => Promise<void> }> = {
  serve: { usage: SERVE_USAGE, run: serveCommand },
  generate: { usage: GENERATE_USAGE, run: generate },
  bench: { usage: "", run: benchCommand },
};

/** --help or -h anywhere before a "--" terminator. */
function wantsHelp(args: string[]): boolean {
  const end = args.indexOf("--");
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === "--help" || a === "-h");
}

if (import.meta.main) {
  const [name, ...rest] = Deno.args;
  const command = name === undefined ? undefined : COMMANDS[name];
  if (!command) {
    const help = name === undefined || name === "--help" || name === "-h" || name === "help";
    if (help) console.log(USAGE);
    else console.error(`sluice: unknown command "${name}"\n\n${USAGE}`);
    Deno.exit(help ? 0 : 2);
  }
  // bench has its own usage and help (bench/main.ts).
  if (name !== "bench" && wantsHelp(rest)) {
    console.log(command.usage);
    Deno.exit(0);
  }
  // Before anything opens the GPU: Mesa's complaint about a missing runtime dir is noise.
  ensureRuntimeDir();
  try {
    await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      // One line: node's parseArgs explains some errors over several.
      console.error(`sluice ${name}: ${err.message.replace(/\s*\n\s*/g, " ")}\n\n${command.usage}`);
      Deno.exit(2);
    }
    console.error(`sluice: ${err instanceof Error ? err.message : err}`);
    Deno.exit(1);
  }
}
