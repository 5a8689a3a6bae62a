// Sluice command line: `serve`, `generate`, `bench`. Flags are parsed with zod into one config.

import { parseArgs } from "node:util";
import { z } from "zod";
import { DEFAULT_MODEL } from "./engine/model/hub.ts";
import { StreamDecoder } from "./engine/model/tokenizer.ts";
import { openRuntime } from "./runtime/open.ts";
import { POLICIES, type PolicyName } from "./runtime/policy/index.ts";
import { MAX_READING_RATE, MIN_READING_RATE } from "./runtime/service.ts";

const idList = z.string().regex(/^\d+(,\d+)*$/, "expected comma-separated token ids")
  .transform((s) => s.split(",").map(Number));

const EngineFlags = z.object({
  model: z.string().default(DEFAULT_MODEL),
  "gpu-kv-mb": z.coerce.number().positive().optional(),
  "max-batch": z.coerce.number().int().min(1).max(256).default(32),
  "prefill-chunk": z.coerce.number().int().min(16).max(4096).default(128),
  f32: z.boolean().default(false),
  // reserve: best measured on this adapter (README, "Scheduling"); fcfs is the vLLM baseline.
  sched: z.enum(Object.keys(POLICIES) as [PolicyName, ...PolicyName[]]).default("reserve"),
  "prefix-cache": z.enum(["on", "off"]).default("on"),
  "host-kv-mb": z.coerce.number().min(0).default(0),
  preempt: z.enum(["recompute", "swap", "partial"]).default("recompute"),
  "write-through": z.enum(["on", "off"]).default("off"),
  "swap-reuse": z.enum(["on", "off"]).default("on"),
});

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
});

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
});
export type ServeFlags = z.infer<typeof ServeFlags>;

const STRING_FLAGS = [
  "model",
  "sched",
  "prefix-cache",
  "host-kv-mb",
  "preempt",
  "write-through",
  "swap-reuse",
  "gpu-kv-mb",
  "max-batch",
  "prefill-chunk",
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
];
const BOOLEAN_FLAGS = ["f32", "json", "chat", "help"];

function parseFlags<T extends z.ZodType>(schema: T, args: string[]): z.infer<T> {
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const f of STRING_FLAGS) options[f] = { type: "string" };
  for (const f of BOOLEAN_FLAGS) options[f] = { type: "boolean" };
  const { values } = parseArgs({ args, options, strict: true, allowPositionals: false });
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `--${i.path.join(".") || "flags"}: ${i.message}`)
      .join("\n");
    throw new UsageError(msg);
  }
  return parsed.data;
}

class UsageError extends Error {}

type EngineFlagValues = z.infer<typeof EngineFlags>;

/** The engine and runtime options every command shares, from its flags. */
function runtimeOptions(flags: EngineFlagValues) {
  return {
    gpuKvMb: flags["gpu-kv-mb"],
    maxSlots: flags["max-batch"],
    maxRows: flags["prefill-chunk"],
    forceF32: flags.f32,
    policy: flags.sched,
    prefixCache: flags["prefix-cache"] === "on",
    hostKvMb: flags["host-kv-mb"],
    preempt: flags.preempt,
    writeThrough: flags["write-through"] === "on",
    swapReuse: flags["swap-reuse"] === "on",
  };
}

async function generate(args: string[]): Promise<void> {
  const flags = parseFlags(GenerateFlags, args);
  const { runtime, tokenizer: tok } = await openRuntime(flags.model, {
    ...runtimeOptions(flags),
    maxQueue: 1,
    maxTokensLimit: Number.MAX_SAFE_INTEGER,
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

const USAGE = `usage:
  sluice generate --model DIR|demo|org/name (--prompt TEXT [--chat] | --prompt-ids 1,2,3)
                  [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
                  [--top-logprobs K] [--json] [--gpu-kv-mb MB] [--f32]
  sluice serve    [--host H] [--port P] [--model ...] [--api-key K] [--max-queue N]
                  [--reading-rate R] [--slo-ttft-ms T] [--slo-tbt-ms T] [--gpu-kv-mb MB]
                  [--sched fcfs|reserve] [--prefix-cache on|off] [--host-kv-mb MB]
                  [--preempt recompute|swap|partial] [--write-through on|off] [--swap-reuse on|off]
                  [--allowed-hosts H1,H2|*] [--cors-origins URL1,URL2|*]  (see README)
  sluice bench    kernels|decode|serve`;

if (import.meta.main) {
  const [command, ...rest] = Deno.args;
  try {
    if (command === "generate") await generate(rest);
    else if (command === "serve") {
      const { serve } = await import("./server/serve.ts");
      const flags = parseFlags(ServeFlags, rest);
      await serve(flags, () =>
        openRuntime(flags.model, {
          ...runtimeOptions(flags),
          maxQueue: flags["max-queue"],
          maxTokensLimit: flags["max-tokens-limit"],
          defaultReadingRate: flags["reading-rate"],
          defaultSlo: { ttftMs: flags["slo-ttft-ms"], tbtMs: flags["slo-tbt-ms"] },
        }));
    } else {
      console.error(USAGE);
      Deno.exit(command === undefined || command === "--help" ? 0 : 2);
    }
  } catch (err) {
    if (err instanceof UsageError || (err instanceof TypeError && "code" in err)) {
      console.error(`sluice: ${err.message}\n${USAGE}`);
      Deno.exit(2);
    }
    console.error(`sluice: ${err instanceof Error ? err.message : err}`);
    Deno.exit(1);
  }
}
