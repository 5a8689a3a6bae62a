// Writes one request's output in its endpoint's wire format: the chunks of a stream, or one whole
// response. It holds what every chunk repeats (id, creation time, model) and the text offset of
// the next piece; its kind knows what goes inside a choice.

import type { TokenNames } from "../openai/logprobs.ts";
import { envelope, type FinishReason, type ResponseMeta, usage } from "../openai/responses.ts";
import type { WireFormat } from "./kinds.ts";
import type { TextPiece } from "./text_stream.ts";

/**
 * Sluice's `sluice_timing` chunk field (stream_options.include_timing): when the chunk's tokens
 * were generated (their samples came back and entered the request's token buffer), in ms since
 * the request was received. `generated_ms` is the chunk's newest token's; `tokens_generated_ms`
 * has one entry per token the chunk carries, in order (one, unless text was held back).
 */
export interface SluiceTiming {
  generated_ms: number;
  tokens_generated_ms: number[];
}

export function sluiceTiming(
  tokens: readonly { generatedAt: number }[],
  receivedAt: number,
): SluiceTiming {
  // Rounded down to the microsecond: never later than the truth, and still in order.
  const each = tokens.map((t) => Math.floor(Math.max(0, t.generatedAt - receivedAt) * 1000) / 1000);
  return { generated_ms: Math.max(...each), tokens_generated_ms: each };
}

export class ResponseWriter {
  readonly meta: ResponseMeta;
  /** Characters of text sent so far. */
  private offset = 0;

  constructor(
    private readonly kind: WireFormat,
    model: string,
    private readonly promptTokens: number,
    /** Names tokens in logprob entries; null when the request asked for none. */
    private readonly tokenNames: TokenNames | null,
  ) {
    const id = kind.idPrefix + crypto.randomUUID().replaceAll("-", "");
    this.meta = { id, created: Math.floor(Date.now() / 1000), model };
  }

  /** Chunks that go out before the first token. */
  opening(): object[] {
    const fields = this.kind.openingChoice;
    return fields ? [this.chunk(fields, null)] : [];
  }

  /**
   * The chunk for the next piece of text. With `timingFrom` (when the request was received, on
   * the runtime's clock) a chunk that carries tokens also gets `sluice_timing`.
   */
  piece(p: TextPiece, timingFrom: number | null = null): object {
    const fields = this.kind.chunkChoice({ ...p, offset: this.offset }, this.tokenNames);
    this.offset += p.text.length;
    const chunk = this.chunk(fields, null);
    if (timingFrom === null || p.tokens.length === 0) return chunk;
    return { ...chunk, sluice_timing: sluiceTiming(p.tokens, timingFrom) };
  }

  /** The chunk that ends a complete stream. */
  finish(reason: FinishReason): object {
    return this.chunk(this.kind.finalChoice, reason);
  }

  /** The usage chunk (stream_options.include_usage): no choices. */
  usage(completionTokens: number): object {
    const u = usage(this.promptTokens, completionTokens);
    return envelope(this.meta, this.kind.chunkObject, [], { usage: u });
  }

  /** A whole response: every piece's text and tokens at once. */
  whole(p: TextPiece, reason: FinishReason, completionTokens: number): object {
    const fields = this.kind.wholeChoice({ ...p, offset: 0 }, this.tokenNames);
    return envelope(this.meta, this.kind.object, [{ index: 0, ...fields, finish_reason: reason }], {
      usage: usage(this.promptTokens, completionTokens),
    });
  }

  private chunk(fields: object, finish: FinishReason | null): object {
    return envelope(this.meta, this.kind.chunkObject, [{
      index: 0,
      ...fields,
      finish_reason: finish,
    }]);
  }
}
