// `bench llamacpp`: Sluice's decode tokens/s at batch 1 against llama.cpp's CPU backend on the
// very same GGUF files (the SmolLM2-shaped random model as f16, Q8_0, Q4_0; gguf_models.ts), in one
// sitting. llama.cpp runs through the npm package node-llama-cpp, pinned below, installed on first
// use into the bench cache with npm and run under Node (a native addon) as a subprocess
// (llamacpp_node.mjs); its prebuilt CPU binaries come from the registry package, never built or
// downloaded elsewhere. Each round measures both engines back to back, their order alternating
// from round to round, so a machine's drift hits both; ratios are taken within a round.
// measureLlamaCpp returns the numbers, formatReport the report (bench speed uses both).

import { z } from "zod";
import { type Engine, openGpu } from "../engine/engine.ts";
import type { Runtime } from "../runtime/service.ts";
import { parseBenchFlags } from "./common/cli.ts";
import {
  installNodeLlamaCpp,
  LlamaCppProcess,
  NODE_LLAMA_CPP_VERSION,
} from "./common/llamacpp_process.ts";
import { GREEDY, loadDecodeRuntime, measureDecode, prompt } from "./decode_measure.ts";
import { QUANT_KINDS, type QuantKind, smolShapedGguf } from "./gguf_models.ts";

export { NODE_LLAMA_CPP_VERSION };

/** Greedy tokens compared between the engines in the warm-up (a check that both run one model). */
const WARMUP_TOKENS = 8;
/** Sluice's most likely first tokens that llama.cpp's first greedy token is looked up among. */
const TOP_CANDIDATES = 8;

const list = <T extends string>(allowed: readonly T[] | null) =>
  z.string().transform((s, ctx) => {
    const items = [...new Set(s.split(",").map((a) => a.trim()).filter(Boolean))];
    const bad = allowed && items.find((a) => !(allowed as readonly string[]).includes(a));
    if (bad || items.length === 0) {
      ctx.addIssue({ code: "custom", message: `expected a list of ${allowed?.join(", ")}` });
      return z.NEVER;
    }
    return items as T[];
  });

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(10_000).default(64),
  rounds: z.coerce.number().int().min(1).max(20).default(3),
  kinds: list(QUANT_KINDS).default(["f16", "q8_0", "q4_0"]),
  threads: z.string().default("1,2").transform((s, ctx) => {
    const ns = [...new Set(s.split(",").map((a) => Number(a.trim())))];
    if (ns.some((n) => !Number.isInteger(n) || n < 1 || n > 256)) {
      ctx.addIssue({ code: "custom", message: "expected a list of thread counts ≥ 1" });
      return z.NEVER;
    }
    return ns;
  }),
  prompt: z.coerce.number().int().min(0).max(4096).default(128),
});

export const USAGE = `usage: deno task bench llamacpp [--tokens N] [--rounds N] [--kinds KINDS]
                                [--threads LIST] [--prompt N]

Decode tokens/s at batch 1 of Sluice (WebGPU, whatever adapter it finds) against llama.cpp's CPU
backend (node-llama-cpp ${NODE_LLAMA_CPP_VERSION} under Node, GPU off) on the same generated
SmolLM2-shaped GGUF files, round by round in one sitting; reports Sluice ÷ llama.cpp per kind and
llama.cpp thread count, medians and ranges over rounds. Needs node (≥ 20) and npm on PATH; the first
run installs node-llama-cpp from the npm registry into the bench cache.

  --tokens N      decode steps timed per measurement, after the first token (default 64)
  --rounds N      measurements of each engine, kind and thread count (default 3)
  --kinds KINDS   comma-separated: ${QUANT_KINDS.join(", ")} (default f16,q8_0,q4_0)
  --threads LIST  llama.cpp CPU thread counts, comma-separated (default 1,2)
  --prompt N      prompt tokens of the prefill measurement, 0 to skip it (default 128)`;

export async function benchLlamaCpp(args: string[]): Promise<string> {
  return formatReport(await measureLlamaCpp(parseBenchFlags(Flags, args)));
}

export type LlamaCppOptions = z.infer<typeof Flags>;

/** The default options, as `bench llamacpp` with no flags runs. */
export const LLAMACPP_DEFAULTS: LlamaCppOptions = Flags.parse({});

/**
 * Both engines on the same GGUF files, round by round: every figure and the greedy agreement,
 * for formatReport. Throws when node-llama-cpp cannot be installed or run.
 */
export async function measureLlamaCpp(flags: LlamaCppOptions): Promise<ReportInput> {
  const entry = await installNodeLlamaCpp();
  const paths = new Map<QuantKind, string>();
  for (const kind of flags.kinds) paths.set(kind, await smolShapedGguf(kind));

  const llama = await LlamaCppProcess.start(entry);
  try {
    const info = await llama.request<LlamaCppInfo>({ op: "info" });
    if (info.gpu !== false) throw new Error(`llama.cpp reports GPU ${info.gpu}; CPU only expected`);
    const gpu = await openGpu();
    try {
      return await measure(flags, paths, llama, info, gpu);
    } finally {
      gpu.device.destroy();
    }
  } finally {
    await llama.close();
  }
}

export interface LlamaCppInfo {
  gpu: string | false;
  buildType: string;
  release: string;
  systemInfo: string;
  cpuMathCores: number;
  node: string;
}

async function measure(
  flags: LlamaCppOptions,
  paths: Map<QuantKind, string>,
  llama: LlamaCppProcess,
  info: LlamaCppInfo,
  gpu: Awaited<ReturnType<typeof openGpu>>,
): Promise<ReportInput> {
  const { kinds, threads, tokens: steps, rounds } = flags;
  const contextSize = Math.max(flags.prompt, 8 + WARMUP_TOKENS, 8 + steps) + 16;
  const sluice = new Map<QuantKind, { engine: Engine; runtime: Runtime }>();
  let flashAttention = "";
  for (const kind of kinds) {
    const path = paths.get(kind)!;
    let t0 = performance.now();
    const loaded = await llama.request<{ flashAttention: unknown }>(
      { op: "load", kind, path, contextSize, threads },
    );
    flashAttention = String(loaded.flashAttention);
    const llamaS = (performance.now() - t0) / 1000;
    t0 = performance.now();
    sluice.set(kind, await loadDecodeRuntime(gpu, path));
    console.error(
      `${kind}: llama.cpp loaded in ${llamaS.toFixed(1)} s, Sluice in ${
        ((performance.now() - t0) / 1000).toFixed(1)
      } s`,
    );
  }
  const vocab = sluice.get(kinds[0])!.engine.info.vocabSize;
  // measureDecode's batch-1 prompt, so both engines decode from the same ids.
  const decodeIds = prompt(1, 8, vocab);

  // Warm-up: shaders, buffers and caches on both sides, and the greedy tokens compared.
  const agreement = new Map<QuantKind, { sluice: Greedy; llama: Map<number, number[]> }>();
  for (const kind of kinds) {
    const { engine, runtime } = sluice.get(kind)!;
    await measureDecode(runtime, vocab, 1, 2);
    const top = Math.min(TOP_CANDIDATES, engine.info.maxTopLogprobs);
    const ours = await greedyTokens(runtime, decodeIds, WARMUP_TOKENS, top);
    const theirs = new Map<number, number[]>();
    for (const n of threads) {
      const r = await llama.request<{ tokens: number[]; threadsUsed: number }>({
        op: "decode",
        kind,
        threads: n,
        ids: decodeIds,
        steps: WARMUP_TOKENS - 1,
      });
      if (r.threadsUsed !== n) throw new Error(`llama.cpp ran ${r.threadsUsed} threads, not ${n}`);
      theirs.set(n, r.tokens);
    }
    agreement.set(kind, { sluice: ours, llama: theirs });
    if (flags.prompt === 0) continue;
    const ids = prompt(999, flags.prompt, vocab);
    await sluicePrefillMs(runtime, ids);
    for (const n of threads) await llama.request({ op: "prefill", kind, threads: n, ids });
  }

  const results: Measured[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = kinds.map((_, i) => kinds[(i + round) % kinds.length]);
    for (const kind of order) {
      const record = (engine: Measured["engine"], n: number, what: Measured["what"], x: number) => {
        results.push({ round, kind, engine, threads: n, what, tokensPerS: x });
        const who = engine === "sluice" ? engine : `${engine} ${n}t`;
        console.error(`round ${round + 1}: ${kind} ${who} ${what}: ${x.toFixed(2)} tokens/s`);
      };
      const { runtime } = sluice.get(kind)!;
      const prefillIds = prompt(1000 + round, flags.prompt, vocab);
      const runSluice = async () => {
        record("sluice", 0, "decode", (await measureDecode(runtime, vocab, 1, steps)).tokensPerS);
        if (flags.prompt === 0) return;
        const ms = await sluicePrefillMs(runtime, prefillIds);
        record("sluice", 0, "prefill", flags.prompt / (ms / 1000));
      };
      const runLlama = async () => {
        for (const n of threads) {
          const d = await llama.request<{ tokensPerS: number }>(
            { op: "decode", kind, threads: n, ids: decodeIds, steps },
          );
          record("llama.cpp", n, "decode", d.tokensPerS);
          if (flags.prompt === 0) continue;
          const p = await llama.request<{ ms: number }>(
            { op: "prefill", kind, threads: n, ids: prefillIds },
          );
          record("llama.cpp", n, "prefill", flags.prompt / (p.ms / 1000));
        }
      };
      // Alternate which engine goes first, so neither always runs on a warmer or cooler machine.
      if (round % 2 === 0) {
        await runSluice();
        await runLlama();
      } else {
        await runLlama();
        await runSluice();
      }
    }
  }
  for (const { runtime } of sluice.values()) await runtime.close();

  return {
    adapter: sluice.get(kinds[0])!.engine.info.adapter,
    lavapipeThreads: Deno.env.get("LP_NUM_THREADS") ?? null,
    cpus: navigator.hardwareConcurrency,
    llama: info,
    flashAttention,
    kinds,
    threads,
    steps,
    rounds,
    prompt: flags.prompt,
    results,
    agreement: kinds.map((kind) => {
      const a = agreement.get(kind)!;
      return {
        kind,
        byThreads: threads.map((n) => {
          const rank = a.sluice.firstTop.indexOf(a.llama.get(n)![0]);
          return {
            threads: n,
            same: samePrefix(a.sluice.tokens, a.llama.get(n)!),
            firstRank: rank < 0 ? null : rank + 1,
          };
        }),
        of: WARMUP_TOKENS,
        top: a.sluice.firstTop.length,
      };
    }),
  };
}

interface Greedy {
  tokens: number[];
  /** The first token's most likely candidates, most likely first. */
  firstTop: number[];
}

/** `n` greedy tokens of Sluice from `ids` (EOS ignored), and the first one's `top` candidates. */
async function greedyTokens(
  runtime: Runtime,
  ids: number[],
  n: number,
  top: number,
): Promise<Greedy> {
  const h = runtime.submit({ ids, maxTokens: n, sampling: GREEDY, stopIds: [], topLogprobs: top });
  const out: Greedy = { tokens: [], firstTop: [] };
  for await (const t of h.tokens) {
    if (out.tokens.length === 0) out.firstTop = t.top.map(([id]) => id);
    out.tokens.push(t.id);
  }
  return out;
}

/** Time to first token of `ids` on Sluice, in ms: the prefill and one sampled token. */
async function sluicePrefillMs(runtime: Runtime, ids: number[]): Promise<number> {
  const t0 = performance.now();
  const h = runtime.submit({ ids, maxTokens: 1, sampling: GREEDY, stopIds: [] });
  let ms = -1;
  for await (const _ of h.tokens) if (ms < 0) ms = performance.now() - t0;
  return ms;
}

// ---------------------------------------------------------------------------------------------
// The report: pure, so it is tested on its own (tests/bench/llamacpp_report_test.ts).

/** One measurement: tokens/s of one engine on one kind in one round. */
export interface Measured {
  round: number;
  kind: QuantKind;
  engine: "sluice" | "llama.cpp";
  /** llama.cpp's CPU threads; 0 for Sluice. */
  threads: number;
  what: "decode" | "prefill";
  tokensPerS: number;
}

export interface ReportInput {
  adapter: string;
  lavapipeThreads: string | null;
  cpus: number;
  llama: LlamaCppInfo;
  /** node-llama-cpp's flashAttention setting of llama.cpp's contexts. */
  flashAttention: string;
  kinds: QuantKind[];
  threads: number[];
  steps: number;
  rounds: number;
  prompt: number;
  results: Measured[];
  agreement: {
    kind: QuantKind;
    /** same: leading greedy tokens both agree on; firstRank: llama.cpp's first among Sluice's. */
    byThreads: { threads: number; same: number; firstRank: number | null }[];
    of: number;
    /** How many of Sluice's first-token candidates firstRank looks among. */
    top: number;
  }[];
}

/** Median, lowest and highest of a non-empty list. */
export function spread(xs: number[]): { median: number; min: number; max: number } {
  if (xs.length === 0) throw new Error("spread of no values");
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return { median: s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2, min: s[0], max: s.at(-1)! };
}

/** How many leading tokens two greedy runs share. */
export function samePrefix(a: number[], b: number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * Sluice ÷ llama.cpp per round (each round's two figures side by side), for one kind, thread
 * count and measurement; rounds missing either figure are left out.
 */
export function roundRatios(
  results: Measured[],
  kind: QuantKind,
  threads: number,
  what: Measured["what"],
): number[] {
  const pick = (engine: Measured["engine"], n: number) =>
    new Map(
      results.filter((m) =>
        m.kind === kind && m.engine === engine && m.threads === n && m.what === what
      )
        .map((m) => [m.round, m.tokensPerS]),
    );
  const ours = pick("sluice", 0);
  const theirs = pick("llama.cpp", threads);
  return [...ours.keys()].filter((r) => theirs.has(r)).sort((a, b) => a - b)
    .map((r) => ours.get(r)! / theirs.get(r)!);
}

export function formatReport(input: ReportInput): string {
  const { results, kinds, threads } = input;
  const figures = (
    kind: QuantKind,
    engine: Measured["engine"],
    n: number,
    what: Measured["what"],
  ) =>
    results.filter((m) =>
      m.kind === kind && m.engine === engine && m.threads === n && m.what === what
    )
      .sort((a, b) => a.round - b.round).map((m) => m.tokensPerS);
  const range = (xs: number[], digits: number) => {
    const s = spread(xs);
    return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
  };
  const table = (what: Measured["what"]) => {
    const rows: string[] = [];
    for (const kind of kinds) {
      const ours = figures(kind, "sluice", 0, what);
      if (ours.length === 0) continue;
      for (const n of threads) {
        const theirs = figures(kind, "llama.cpp", n, what);
        const ratios = roundRatios(results, kind, n, what);
        if (theirs.length === 0 || ratios.length === 0) continue;
        rows.push(
          `| ${kind} | ${range(ours, 2)} | ${n} | ${range(theirs, 2)} | ${range(ratios, 2)}× |`,
        );
      }
    }
    return rows;
  };
  const decodeRows = table("decode");
  const prefillRows = table("prefill");
  const header = [
    "| kind | Sluice tokens/s | llama.cpp threads | llama.cpp tokens/s | Sluice ÷ llama.cpp |",
    "|---|---|---|---|---|",
  ];
  const goal = (() => {
    const worst = kinds.flatMap((k) =>
      threads.map((n) => ({ k, n, r: roundRatios(results, k, n, "decode") }))
    ).filter((x) => x.r.length > 0).map((x) => ({ ...x, m: spread(x.r).median }));
    if (worst.length === 0) return [];
    const oneThread = worst.filter((x) => x.n === Math.min(...threads));
    const met = oneThread.filter((x) => x.m >= 1).length;
    return [
      `Goal (issue 22): Sluice ≥ 1× llama.cpp's CPU path at batch 1. Against ${
        Math.min(...threads)
      } llama.cpp thread(s): met for ${met} of ${oneThread.length} kinds (${
        oneThread.map((x) => `${x.k} ${x.m.toFixed(2)}×`).join(", ")
      }).`,
      "",
    ];
  })();
  const lp = input.lavapipeThreads === null
    ? "LP_NUM_THREADS unset"
    : `LP_NUM_THREADS=${input.lavapipeThreads}`;
  return [
    `### Sluice against llama.cpp's CPU path (SmolLM2-135M shape, random weights, same GGUF files)`,
    "",
    `- Sluice: WebGPU on \`${input.adapter}\` (${lp}; ${input.cpus} CPUs), batch 1.`,
    `- llama.cpp: CPU backend only (node-llama-cpp reports gpu = ${String(input.llama.gpu)}), ` +
    `release ${input.llama.release}, ${input.llama.buildType} binaries of node-llama-cpp ` +
    `${NODE_LLAMA_CPP_VERSION} under Node ${input.llama.node}; threads ${threads.join(", ")}; ` +
    `flash attention ${input.flashAttention}; ${input.llama.systemInfo}`,
    `- ${input.rounds} round(s); each round measures both engines back to back per kind, the ` +
    `engine that goes first alternating by round. Decode: ${input.steps} greedy tokens after the ` +
    `first from the same 8-token prompt, EOS ignored. Figures are medians (lowest–highest) over ` +
    `rounds; ratios are medians of each round's ratio.`,
    "",
    "Decode, batch 1:",
    "",
    ...header,
    ...decodeRows,
    "",
    ...goal,
    ...(prefillRows.length === 0 ? [] : [
      `Prefill: time to first token of a ${input.prompt}-token prompt (a new prompt each round), as tokens/s:`,
      "",
      ...header,
      ...prefillRows,
      "",
    ]),
    `Same model check, from the warm-up: of the first ${input.agreement[0]?.of ?? 0} greedy ` +
    `tokens, how many both engines agree on before the first difference, and where llama.cpp's ` +
    `first token ranks among Sluice's ${input.agreement[0]?.top ?? 0} most likely first tokens ` +
    `(random weights leave near ties, which rounding differences reorder): ${
      input.agreement.map((a) =>
        `${a.kind} ${
          a.byThreads.map((b) =>
            `${b.same}/${a.of}, #${b.firstRank ?? `>${a.top}`} (${b.threads}t)`
          ).join("; ")
        }`
      ).join(" · ")
    }.`,
  ].join("\n");
}
