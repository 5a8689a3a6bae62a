// `deno task bench model-shape`: a small model family at its real widths with random weights,
// written as a llama.cpp Q4_K_M GGUF file, served by `main.ts serve` as any --model is, and asked
// for one streamed chat. Families (`--family`):
//   phi4-mini    Phi-4-mini (hidden 3072, 24 heads, 8 KV heads, intermediate 8192, vocabulary
//                200,064, tied, partial rotary 0.75, LongRoPE; fused attn_qkv and ffn_up,
//                rope_factors tensors), 4 of its 32 layers
//   smollm3      SmolLM3-3B (hidden 2048, 16 heads, 4 KV heads, intermediate 11008, vocabulary
//                128,256), 4 of 36 layers, the fourth without RoPE
//   gemma3-270m  Gemma 3 270M whole (hidden 640, 18 layers, 4 heads, 1 KV head, head_dim 256,
//                intermediate 2048, vocabulary 262,144 tied: its embedding is past the adapter's
//                128 MiB binding, split by rows; 15 local layers, window 512)
// Reports the load, time to first token, decode tokens/s and the server process's peak resident
// memory (VmHWM). No download is possible here, so the weights are random and the tokenizer is
// the tiny byte-level BPE with a ChatML template (its vocabulary padded to the family's, as real
// checkpoints pad theirs): the figures are the architecture's cost at this shape, not the model's
// replies.

import { z } from "zod";
import {
  convertToGguf,
  recipeType,
  type TinyModelSpec,
  writeTinyModel,
} from "../engine/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { benchCacheDir } from "./common/smol_model.ts";
import { splitFlags } from "./serve/flags.ts";
import { loopbackRequest } from "./serve/http.ts";
import type { LoopbackTarget } from "./serve/loopback.ts";
import { startServer } from "./serve/server_process.ts";

/** Phi-4-mini-instruct's config, 4 layers. The 48 LongRoPE factors are stand-ins. */
const PHI4_MINI: TinyModelSpec = {
  architecture: "phi3",
  hiddenSize: 3072,
  intermediateSize: 8192,
  numLayers: 4,
  numHeads: 24,
  numKvHeads: 8,
  vocabSize: 200_064,
  tied: true,
  dtype: "BF16",
  partialRotaryFactor: 0.75,
  maxPositionEmbeddings: 131_072,
  originalMaxPositionEmbeddings: 4096,
  slidingWindow: 262_144,
  ropeScaling: {
    type: "longrope",
    shortFactor: Array.from({ length: 48 }, (_, i) => 1 + i / 96),
    longFactor: Array.from({ length: 48 }, (_, i) => 1 + i),
    originalMaxPositionEmbeddings: 4096,
    attentionFactor: 0,
  },
  seed: 34,
};

/** SmolLM3-3B's config, 4 layers (layer 3 without RoPE). */
const SMOLLM3: TinyModelSpec = {
  architecture: "smollm3",
  hiddenSize: 2048,
  intermediateSize: 11008,
  numLayers: 4,
  numHeads: 16,
  numKvHeads: 4,
  vocabSize: 128_256,
  tied: true,
  dtype: "BF16",
  ropeTheta: 5_000_000,
  maxPositionEmbeddings: 65_536,
  noRopeLayerInterval: 4,
  seed: 34,
};

/** Gemma 3 270M's config, every layer (five local of each six, window 512). */
const GEMMA3_270M: TinyModelSpec = {
  architecture: "gemma3",
  hiddenSize: 640,
  intermediateSize: 2048,
  numLayers: 18,
  numHeads: 4,
  numKvHeads: 1,
  headDim: 256,
  vocabSize: 262_144,
  tied: true,
  dtype: "BF16",
  slidingWindow: 512,
  slidingWindowPattern: 6,
  localRopeTheta: 10_000,
  ropeTheta: 1_000_000,
  queryPreAttnScalar: 256,
  maxPositionEmbeddings: 32_768,
  seed: 34,
};

const FAMILIES = {
  "phi4-mini": PHI4_MINI,
  smollm3: SMOLLM3,
  "gemma3-270m": GEMMA3_270M,
} as const;
type Family = keyof typeof FAMILIES;

const Flags = z.object({
  family: z.enum(Object.keys(FAMILIES) as [Family, ...Family[]]).default("phi4-mini"),
  tokens: z.coerce.number().int().min(2).max(512).default(16),
  flags: z.string().default(""),
  "timeout-s": z.coerce.number().positive().max(7200).default(1800),
});

export const USAGE = `usage: deno task bench model-shape [flags]

A family's real widths (random weights) as a Q4_K_M GGUF file (written once under the bench cache,
up to ~0.7 GB; its BF16 source is removed after), served by main.ts serve, one streamed chat: load
time, time to first token, decode tokens/s, the server's peak RSS.

  --family F      phi4-mini (default; 4 of its 32 layers), smollm3 (SmolLM3-3B's widths, 4 of 36
                  layers) or gemma3-270m (Gemma 3 270M, all 18 layers)
  --tokens N      tokens the chat generates (default 16)
  --flags "..."   more serve flags
  --timeout-s S   give up after S seconds (default 1800)
`;

export async function benchModelShape(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  const model = await shapeGguf(f.family);
  const t0 = performance.now();
  const server = await startServer({
    command: [Deno.execPath(), "run", "-A", "main.ts", "serve"],
    model,
    // Two chats of one prompt are timed apart: the second must prefill as the first did.
    flags: ["--prefix-cache", "off", ...splitFlags(f.flags)],
    startTimeoutMs: f["timeout-s"] * 1000,
    stopGraceMs: 15_000,
  });
  try {
    const readyMs = performance.now() - t0;
    const deadline = t0 + f["timeout-s"] * 1000;
    console.error(`ready in ${(readyMs / 1000).toFixed(1)} s; chats of 1 and ${f.tokens} tokens`);
    // The first chat pays for what start-up left to first use (pipelines compiled at its shapes:
    // a minute for Gemma 3 270M's 262k vocabulary here), so it is timed apart. Tokens reach the
    // client in bursts (a decode group's steps share one readback), so decode speed is the
    // difference of two whole chats: N tokens against 1, the same prefill in each.
    const first = await streamChat(server.target, 1, deadline);
    const one = await streamChat(server.target, 1, deadline);
    const chat = await streamChat(server.target, f.tokens, deadline);
    chat.oneTokenMs = one.totalMs;
    chat.firstChatMs = first.totalMs;
    const peakRss = await peakRssOf(server.pid);
    const device = server.logTail().match(/sluice: model .*/)?.[0] ?? "(no load line)";
    return report(f.family, f.tokens, readyMs, chat, peakRss, device, model);
  } finally {
    await server.stop();
  }
}

/** The family's model file, written on first use. */
async function shapeGguf(family: Family): Promise<string> {
  const shape = FAMILIES[family];
  const path = `${benchCacheDir()}/bench-${family}-${shape.numLayers}l-q4_k_m-v1.gguf`;
  try {
    await Deno.stat(path);
    return path;
  } catch { /* write it */ }
  const source = `${path}.source-${Deno.pid}`;
  console.error(
    `writing ${family}'s shape (${shape.numLayers} layers) as BF16 safetensors to ${source} ...`,
  );
  await writeTinyModel(source, shape);
  console.error(`converting to Q4_K_M GGUF ${path} ...`);
  const recipe = { numLayers: shape.numLayers, gqa: shape.numHeads / shape.numKvHeads, tied: true };
  const tmp = `${path}.tmp-${Deno.pid}`;
  await convertToGguf(source, tmp, {
    typeOf: (name, dims) => recipeType("q4_k_m", recipe, name, dims),
  });
  await Deno.rename(tmp, path);
  await Deno.remove(source, { recursive: true });
  return path;
}

interface Chat {
  firstTokenMs: number;
  totalMs: number;
  chunks: number;
  /** The same chat's time for one token (prefill and the first sample). */
  oneTokenMs?: number;
  /** The server's first chat of one token, which pays for work start-up left to first use. */
  firstChatMs?: number;
}

/** One streamed chat of `tokens` tokens (ignore_eos): first content chunk, end, chunks seen. */
async function streamChat(
  target: LoopbackTarget,
  tokens: number,
  deadline: number,
): Promise<Chat> {
  const t0 = performance.now();
  const res = await loopbackRequest(target, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "default",
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Tell me about lighthouses." },
      ],
      max_tokens: tokens,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(Math.max(1, deadline - t0)),
  });
  if (res.status !== 200) throw new Error(`chat: HTTP ${res.status}`);
  let firstTokenMs: number | null = null;
  const dec = new TextDecoder();
  let text = "";
  for await (const bytes of res.body) {
    text += dec.decode(bytes, { stream: true });
    if (firstTokenMs === null && /"content":"[^"]/.test(text)) {
      firstTokenMs = performance.now() - t0;
    }
  }
  const totalMs = performance.now() - t0;
  if (!text.includes("[DONE]")) throw new Error(`chat did not finish:\n${text.slice(-500)}`);
  const completion = Number(text.match(/"completion_tokens":(\d+)/)?.[1] ?? tokens);
  return { firstTokenMs: firstTokenMs ?? totalMs, totalMs, chunks: completion };
}

/** A process's peak resident set (VmHWM), in MiB; null where /proc does not say. */
async function peakRssOf(pid: number): Promise<number | null> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const kb = Number(status.match(/VmHWM:\s+(\d+) kB/)?.[1]);
    return Number.isFinite(kb) ? kb / 1024 : null;
  } catch {
    return null;
  }
}

function report(
  family: Family,
  tokens: number,
  readyMs: number,
  chat: Chat,
  peakRss: number | null,
  device: string,
  model: string,
): string {
  const decodeS = (chat.totalMs - (chat.oneTokenMs ?? chat.firstTokenMs)) / 1000;
  const tps = decodeS > 0 ? (chat.chunks - 1) / decodeS : NaN;
  const load = Deno.loadavg().map((v) => v.toFixed(2)).join(", ");
  const size = (Deno.statSync(model).size / 2 ** 30).toFixed(2);
  return [
    `# ${family}'s shape (${FAMILIES[family].numLayers} layers, random weights), Q4_K_M GGUF, ` +
    "one chat",
    "",
    `Measured ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC; load average ` +
    `${load}; ${navigator.hardwareConcurrency} CPUs. ${device}. File: ${size} GiB.`,
    "",
    "| ready (s) | first chat, 1 token (s) | chat of 1 token (s) | chat of N tokens (s) | N | " +
    "decode tokens/s | server peak RSS (MiB) |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    `| ${(readyMs / 1000).toFixed(1)} | ${((chat.firstChatMs ?? NaN) / 1000).toFixed(2)} | ` +
    `${((chat.oneTokenMs ?? NaN) / 1000).toFixed(2)} | ` +
    `${(chat.totalMs / 1000).toFixed(2)} | ${chat.chunks} of ${tokens} | ${tps.toFixed(2)} | ` +
    `${peakRss?.toFixed(0) ?? "–"} |`,
    "",
    "Decode tokens/s: (N − 1) over the time a chat of N tokens takes beyond the same chat of one " +
    "token (prefix cache off, so both prefill), both after a first chat timed apart. " +
    "Peak RSS: the server process's VmHWM, weights, KV pool and shader cache included (on a " +
    "software adapter the device's memory is the process's).",
    "",
  ].join("\n");
}
