// One simulated user: sends a streaming completion to the loopback server, reads the SSE stream as
// fast as it arrives (as a browser would), and plays the tokens out to a reader at the request's
// reading rate. Records every token's arrival and display time, and its generation time when the
// server reports it (Sluice's `stream_options.include_timing`); never retries.

import { loopbackRequest, readText } from "./http.ts";
import type { LoopbackTarget } from "./loopback.ts";
import { Reader } from "./playout.ts";
import type { Outcome, RequestRecord } from "./record.ts";
import { SseParser } from "./sse.ts";
import type { MaterializedPrompt, WorkloadRequest } from "./workload.ts";

export interface ClientOptions {
  model: string;
  /** Hard bound on this request, from send to the end of the stream. */
  timeoutMs: number;
  /** The whole run's deadline (or any outside stop). */
  signal?: AbortSignal;
  /** The run's clock origin, in the units of `now`. */
  runStartMs: number;
  now?: () => number;
  /** Called as each token is recorded (live progress; tests use it to pace a scripted server). */
  onToken?: (index: number, arrivalMs: number, displayMs: number) => void;
}

class Hangup extends Error {}

/**
 * Tokens carried by one completion chunk. A per-token array, when the server sends one (a
 * `token_ids` extension, or OpenAI logprobs), is the exact count. Otherwise the chunk is taken as
 * one token: the server sends one chunk per token, and a chunk whose text is empty still carries
 * a token (a partial UTF-8 sequence) unless it is the bare finish chunk. Counts that disagree with
 * the final usage are reported (see metrics.ts), not patched.
 */
export function tokensInChunk(chunk: any): number {
  const choice = chunk?.choices?.[0];
  if (!choice) return 0;
  if (Array.isArray(choice.token_ids)) return choice.token_ids.length;
  if (Array.isArray(choice.logprobs?.tokens)) return choice.logprobs.tokens.length;
  if (Array.isArray(choice.logprobs?.content)) return choice.logprobs.content.length;
  const text = typeof choice.text === "string" ? choice.text : (choice.delta?.content ?? "");
  return text !== "" || choice.finish_reason == null ? 1 : 0;
}

/**
 * When each of a chunk's `count` tokens was generated, in ms since the server received the
 * request, from Sluice's `sluice_timing` field (`tokens_generated_ms` per token, else
 * `generated_ms` for all); null when the chunk has none (another server, or timing not asked).
 */
export function generatedInChunk(chunk: any, count: number): number[] | null {
  const t = chunk?.sluice_timing;
  const each = t?.tokens_generated_ms;
  if (
    Array.isArray(each) && each.length === count &&
    each.every((x: unknown) => typeof x === "number" && Number.isFinite(x))
  ) {
    return each;
  }
  const one = t?.generated_ms;
  return typeof one === "number" && Number.isFinite(one) ? new Array(count).fill(one) : null;
}

export function completionBody(model: string, w: WorkloadRequest, p: MaterializedPrompt): string {
  return JSON.stringify({
    model,
    prompt: p.prompt,
    max_tokens: p.maxTokens,
    stream: true,
    temperature: 0,
    ignore_eos: true,
    // include_timing is Sluice's: when each token was generated (other servers ignore it).
    stream_options: { include_usage: true, include_timing: true },
    reading_rate: w.readingRate,
    slo_ttft_ms: w.sloTtftMs,
    slo_tbt_ms: w.sloTbtMs,
  });
}

export async function runClient(
  target: LoopbackTarget,
  w: WorkloadRequest,
  p: MaterializedPrompt,
  o: ClientOptions,
): Promise<RequestRecord> {
  const now = o.now ?? (() => performance.now());
  const sent = now();
  const arrivalsMs: number[] = [];
  const displayMs: number[] = [];
  /** The server's generation times, while every token so far came with one. */
  let generatedMs: number[] | null = [];
  const reader = new Reader(w.readingRate);
  const rec: RequestRecord = {
    id: w.id,
    outcome: "failed",
    sentAtMs: sent - o.runStartMs,
    endAtMs: 0,
    arrivalsMs,
    displayMs,
    readingRate: w.readingRate,
    sloTtftMs: w.sloTtftMs,
    sloTbtMs: w.sloTbtMs,
    maxTokens: p.maxTokens,
    ...(Array.isArray(p.prompt) ? { promptTokens: p.prompt.length } : {}),
  };
  const timeout = AbortSignal.timeout(o.timeoutMs);
  const hangup = new AbortController();
  const signal = AbortSignal.any([timeout, hangup.signal, ...(o.signal ? [o.signal] : [])]);
  const finish = (outcome: Outcome, extra: Partial<RequestRecord> = {}) => {
    Object.assign(rec, { outcome, endAtMs: now() - o.runStartMs }, extra);
    if (generatedMs && generatedMs.length > 0) rec.generatedMs = generatedMs;
    return rec;
  };
  const hangUp = () => hangup.abort(new Hangup("reader hung up"));
  try {
    const res = await loopbackRequest(target, {
      method: "POST",
      path: "/v1/completions",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: completionBody(o.model, w, p),
      signal,
    });
    rec.httpStatus = res.status;
    if (res.status !== 200) {
      const text = await readText(res, 64 * 1024).catch(() => "");
      if (res.status === 429) {
        const ra = Number(res.headers.get("retry-after"));
        return finish("refused", Number.isFinite(ra) ? { retryAfterS: ra } : {});
      }
      return finish("failed", { error: `HTTP ${res.status}: ${errorMessage(text)}` });
    }
    if (w.cancelAfterTokens === 0) hangUp();
    const parser = new SseParser();
    let done = false;
    const onEvent = (data: string, at: number) => {
      if (data === "[DONE]") {
        done = true;
        return;
      }
      let chunk: any;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new Error(`unparseable SSE data: ${data.slice(0, 120)}`);
      }
      if (chunk?.error) throw new Error(`error chunk: ${errorMessage(JSON.stringify(chunk))}`);
      const fr = chunk?.choices?.[0]?.finish_reason;
      if (fr) rec.finishReason = fr;
      if (typeof chunk?.usage?.completion_tokens === "number") {
        rec.usageCompletionTokens = chunk.usage.completion_tokens;
      }
      if (typeof chunk?.usage?.prompt_tokens === "number") {
        rec.promptTokens = chunk.usage.prompt_tokens;
      }
      // After hanging up the reader sees nothing more, even tokens that came in the same read.
      const count = tokensInChunk(chunk);
      const generated = count > 0 ? generatedInChunk(chunk, count) : null;
      if (count > 0 && !generated) generatedMs = null; // one token without: use none of them
      for (let k = 0; k < count && !hangup.signal.aborted; k++) {
        generatedMs?.push(generated![k]);
        arrivalsMs.push(at);
        displayMs.push(reader.arrive(at));
        o.onToken?.(arrivalsMs.length - 1, at, displayMs[displayMs.length - 1]);
        if (w.cancelAfterTokens !== undefined && arrivalsMs.length >= w.cancelAfterTokens) hangUp();
      }
    };
    for await (const bytes of res.body) {
      const at = now() - sent;
      for (const data of parser.push(bytes)) if (!hangup.signal.aborted) onEvent(data, at);
      if (done || hangup.signal.aborted) break;
    }
    if (hangup.signal.aborted) {
      res.close();
      return finish("cancelled");
    }
    if (!done) {
      for (const data of parser.end()) onEvent(data, now() - sent);
      if (!done) return finish("failed", { error: "stream ended without [DONE]" });
    }
    return finish("ok");
  } catch (e) {
    if (hangup.signal.aborted) return finish("cancelled");
    if (signal.aborted) {
      return finish("timeout", { error: timeout.aborted ? "per-request timeout" : "run deadline" });
    }
    return finish("failed", { error: e instanceof Error ? e.message : String(e) });
  }
}

/** The message of an OpenAI error envelope, or the raw text shortened. */
function errorMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    if (typeof j?.error?.message === "string") return j.error.message;
  } catch { /* not JSON */ }
  return text.slice(0, 200);
}
