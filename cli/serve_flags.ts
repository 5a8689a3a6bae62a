// serve's own sections of the flag table (flags.ts): the HTTP side, read by server/serve.ts under
// these names, and the limits and defaults requests are held to.

import { z } from "zod";
import { MAX_READING_RATE, MIN_READING_RATE } from "../runtime/service.ts";
import { flag, section } from "./flag_row.ts";
import { onOff } from "./flags.ts";

const commaList = z.string().transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean));
const env = (name: string) => Deno.env.get(name) || undefined;

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
