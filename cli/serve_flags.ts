// serve's own sections of the flag table (flags.ts): the HTTP side, read by server/serve.ts under
// these names, and the limits and defaults requests are held to.

import { z } from "zod";
import { MAX_READING_RATE, MIN_READING_RATE } from "../runtime/service.ts";
import { keepAliveMs } from "../runtime/model_router.ts";
import { flag, section } from "./flag_row.ts";
import { onOff } from "./flags.ts";

const commaList = z.string().transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean));
const env = (name: string) => Deno.env.get(name) || undefined;

/** Which models serve offers and how long they stay loaded: read by main.ts's serve command. */
export const MODELS = section("models", {
  "models-dir": flag({
    schema: z.string().min(1).optional(),
    usage: [
      "--models-dir DIR",
      "serve every model directory and .gguf file directly under DIR too",
      "(ids: their names), loaded when a request names one",
    ],
  }),
  "discover-models": flag({
    schema: z.enum(["on", "off"]).default("on"),
    usage: [
      "--discover-models on|off",
      "also offer the models in the Hugging Face cache (org/name) and",
      "Ollama's store (name:tag) (default on; listing loads nothing)",
    ],
  }),
  "keep-alive": flag({
    schema: z.string().default("5m").transform((text, ctx) => {
      const ms = keepAliveMs(text);
      if (ms === null) {
        ctx.addIssue({ code: "custom", message: 'a duration such as "5m" or "300s", or -1' });
        return z.NEVER;
      }
      return ms;
    }),
    usage: [
      "--keep-alive D",
      "unload a model idle this long (default 5m; 0: when idle; -1: never);",
      "a request's keep_alive (Ollama's API) overrides it for its model",
    ],
  }),
  "max-loaded": flag({
    schema: z.coerce.number().int().min(1).default(3),
    usage: [
      "--max-loaded N",
      "models loaded at once (default 3); a load past it evicts the least",
      "recently used idle model, never a pinned or busy one",
    ],
  }),
  "models-memory-mb": flag({
    schema: z.coerce.number().positive().optional(),
    usage: [
      "--models-memory-mb MB",
      "device memory all loaded models may hold (weights and KV); a load",
      "past it evicts as --max-loaded does (default: no budget)",
    ],
  }),
  pin: flag({
    schema: commaList.optional(),
    usage: ["--pin ID,...", "models loaded at start and never unloaded"],
  }),
});

/** serve's HTTP side: read by server/serve.ts, by these names. */
export const HTTP = section("http", {
  host: flag({
    schema: z.string().default(env("SLUICE_HOST") ?? "127.0.0.1"),
    usage: ["--host H", "listen address (default 127.0.0.1; $SLUICE_HOST)"],
  }),
  port: flag({
    schema: z.coerce.number().int().min(0).max(65535).default(Number(env("SLUICE_PORT") ?? 8080)),
    usage: ["--port P", "listen port (default 8080; $SLUICE_PORT)"],
  }),
  "api-key": flag({
    schema: z.string().min(1).optional().transform((v) => v ?? env("SLUICE_API_KEY")),
    usage: [
      "--api-key K",
      'require "Authorization: Bearer K" on /v1/*, /tokenize and /state',
      "($SLUICE_API_KEY)",
    ],
  }),
  // A comment line on a silent stream, before a proxy's idle timeout (commonly 60 s) cuts it.
  "sse-keepalive-s": flag({
    schema: z.coerce.number().positive().max(3600).default(5),
    usage: [
      "--sse-keepalive-s S",
      "a stream silent this long (queued, prefilling, paused) sends an SSE",
      "comment line, so proxies do not cut it (default 5)",
    ],
  }),
  // llama.cpp's: "auto" answers <think> text as reasoning_content; "none" leaves it in the text.
  "reasoning-format": flag({
    schema: z.enum(["auto", "none"]).default("auto"),
    usage: [
      "--reasoning-format auto|none",
      "auto: text a model writes in <think>...</think> is answered as",
      "reasoning_content; none: it stays in the text (default auto; a request's",
      "reasoning_format overrides it)",
    ],
  }),
  "metrics-auth": flag({
    schema: onOff.default("off"),
    usage: ["--metrics-auth on|off", "require the API key on /metrics too (default off)"],
  }),
  "allowed-hosts": flag({
    schema: commaList.optional(),
    usage: [
      "--allowed-hosts H,...",
      'Host header values to answer besides the bind address ("*": any)',
    ],
  }),
  "cors-origins": flag({
    schema: commaList.optional(),
    usage: [
      "--cors-origins O,...",
      'web origins that may call the API (default none; "*": any)',
    ],
  }),
  "max-body-kb": flag({
    schema: z.coerce.number().int().min(1).default(1024),
    usage: ["--max-body-kb N", "request body limit (default 1024)"],
  }),
  "shutdown-grace-s": flag({
    schema: z.coerce.number().min(0).default(10),
    usage: [
      "--shutdown-grace-s S",
      "on SIGINT/SIGTERM, let streams finish this long (default 10)",
    ],
  }),
  // Absent: as many as the descriptor limit leaves room for (server/connections/).
  "max-connections": flag({
    schema: z.coerce.number().int().min(1).optional(),
    usage: [
      "--max-connections N",
      "connections at once; more get 503 (default: what the file",
      "descriptor limit allows, which is raised to its hard limit at start)",
    ],
  }),
  "header-timeout-s": flag({
    schema: z.coerce.number().positive().default(10),
    usage: [
      "--header-timeout-s S",
      "a connection must send a whole request head within S of opening or",
      "of its last response (default 10; a partial head then gets 408)",
    ],
  }),
  "keepalive-timeout-s": flag({
    schema: z.coerce.number().positive().default(5),
    usage: [
      "--keepalive-timeout-s S",
      "an idle keep-alive connection is closed after S (default 5)",
    ],
  }),
});

/** serve's limits and defaults for requests. */
export const REQUESTS = section("requests", {
  "max-queue": flag({
    schema: z.coerce.number().int().min(0).default(64),
    usage: ["--max-queue N", "requests waiting for admission before 429 (default 64)"],
    runtime: "maxQueue",
  }),
  "max-tokens-limit": flag({
    schema: z.coerce.number().int().min(1).default(4096),
    usage: ["--max-tokens-limit N", "largest max_tokens accepted (default 4096)"],
    runtime: "maxTokensLimit",
  }),
  "reading-rate": flag({
    schema: z.coerce.number().min(MIN_READING_RATE).max(MAX_READING_RATE).optional(),
    usage: ["--reading-rate R", "default reading rate, tokens/s (default: unpaced)"],
    runtime: "defaultReadingRate",
  }),
  // Both targets make one option, defaultSlo (commands.ts).
  "slo-ttft-ms": flag({
    schema: z.coerce.number().positive().optional(),
    usage: ["--slo-ttft-ms T, --slo-tbt-ms T", "default SLO targets"],
  }),
  "slo-tbt-ms": flag({ schema: z.coerce.number().positive().optional() }),
});
