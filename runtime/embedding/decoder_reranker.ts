// Relevance from Qwen3-Reranker, a Qwen3 chat model asked, in its documented prompt, whether a
// document meets a query's requirements: the score is p(yes) / (p(yes) + p(no)) at the prompt's
// last position. Each (query, document) pair runs as a last-token embedding request
// (Runtime.pool: batched with everything else, no KV kept); the two logits are that final-normed
// hidden state dotted with the LM head's "yes" and "no" rows, read once from the checkpoint
// (lm_head_rows.ts), and the two-way softmax is the sigmoid of their difference. Only those two
// rows of the head are ever needed, so no vocabulary-wide logits are computed or read back.
//
// The prompt, as the model card writes it (system, user turn, then the assistant's turn opened
// with an empty think block):
//
//   <|im_start|>system\nJudge whether the Document meets the requirements based on the Query and
//   the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n
//   <|im_start|>user\n<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}<|im_end|>\n
//   <|im_start|>assistant\n<think>\n\n</think>\n\n
//
// Control tokens are placed by id (the tokenizer reads their text in input as plain text); an
// over-long pair loses the end of its user text, as the card's truncation does.

import { openModelDir } from "../../engine/formats/open_model.ts";
import type { Tokenizer } from "../../engine/text/tokenizer.ts";
import { InvalidRequest } from "../errors/invalid_request.ts";
import { type PoolingRuntime, tokenId } from "./decoder_embedder.ts";
import type { EmbedOptions, Relevance, Reranker } from "./embedder.ts";
import { readLmHeadRows } from "./lm_head_rows.ts";

/** The card's default instruction. */
export const DEFAULT_RERANK_INSTRUCTION =
  "Given a web search query, retrieve relevant passages that answer the query";

const SYSTEM = "Judge whether the Document meets the requirements based on the Query and the " +
  'Instruct provided. Note that the answer can only be "yes" or "no".';

export interface DecoderRerankerParts {
  runtime: PoolingRuntime;
  tokenizer: Tokenizer;
  /** The LM head's rows of the "yes" and "no" tokens. */
  yesRow: Float64Array;
  noRow: Float64Array;
  instruction?: string;
}

export class DecoderReranker implements Reranker {
  private readonly runtime: PoolingRuntime;
  private readonly tokenizer: Tokenizer;
  private readonly yesRow: Float64Array;
  private readonly noRow: Float64Array;
  private readonly instruction: string;
  /** The prompt's ids before the user text, and after it. */
  private readonly prefix: number[];
  private readonly suffix: number[];

  constructor(parts: DecoderRerankerParts) {
    this.runtime = parts.runtime;
    this.tokenizer = parts.tokenizer;
    this.yesRow = parts.yesRow;
    this.noRow = parts.noRow;
    this.instruction = parts.instruction ?? DEFAULT_RERANK_INSTRUCTION;
    const t = parts.tokenizer;
    this.prefix = encodeWithControls(t, [
      "<|im_start|>",
      `system\n${SYSTEM}`,
      "<|im_end|>",
      "\n",
      "<|im_start|>",
      "user\n",
    ]);
    this.suffix = encodeWithControls(t, [
      "<|im_end|>",
      "\n",
      "<|im_start|>",
      "assistant\n",
      "<think>",
      "\n\n",
      "</think>",
      "\n\n",
    ]);
  }

  /** A reranker for the model at `modelDir` served by `runtime` (its answers: answerTokenIds). */
  static async open(
    modelDir: string,
    runtime: PoolingRuntime,
    tokenizer: Tokenizer,
    instruction?: string,
  ): Promise<DecoderReranker> {
    const files = await openModelDir(modelDir);
    const [yesRow, noRow] = await readLmHeadRows(files, answerTokenIds(tokenizer));
    return new DecoderReranker({ runtime, tokenizer, yesRow, noRow, instruction });
  }

  get maxInputTokens(): number {
    return this.runtime.info.maxContext;
  }

  /** The ids of one pair's prompt (truncated to maxInputTokens when `truncate`). */
  pairIds(query: string, document: string, index: number, truncate: boolean): number[] {
    const user = this.tokenizer.encode(
      `<Instruct>: ${this.instruction}\n<Query>: ${query}\n<Document>: ${document}`,
      { addSpecialTokens: false },
    );
    const room = this.maxInputTokens - this.prefix.length - this.suffix.length;
    if (user.length > room) {
      if (!truncate || room <= 0) {
        const param = `documents[${index}]`;
        throw new InvalidRequest(
          `The query and ${param} make ${
            this.prefix.length + user.length + this.suffix.length
          } tokens; this model reads at most ${this.maxInputTokens}`,
          param,
          "context_length_exceeded",
        );
      }
      user.length = room;
    }
    return [...this.prefix, ...user, ...this.suffix];
  }

  async rerank(query: string, documents: string[], options: EmbedOptions = {}): Promise<Relevance> {
    if (query.length === 0) throw new InvalidRequest("query is empty", "query", "invalid_value");
    documents.forEach((d, i) => {
      if (d.length === 0) {
        throw new InvalidRequest(`documents[${i}] is empty`, `documents[${i}]`, "invalid_value");
      }
    });
    const truncate = options.truncate ?? false;
    const ids = documents.map((d, i) => this.pairIds(query, d, i, truncate));
    const states = await Promise.all(
      ids.map((one) => this.runtime.pool(one, "last", options.signal)),
    );
    const scores = states.map((h) => sigmoid(dot(h, this.yesRow) - dot(h, this.noRow)));
    return { scores, promptTokens: ids.reduce((n, one) => n + one.length, 0) };
  }

  /** Closes the runtime, and with it the engine's every device object. */
  close(): Promise<void> {
    return this.runtime.close();
  }
}

/** The ids of "yes" and "no": each word's token, or the first token of its encoding. */
export function answerTokenIds(tokenizer: Tokenizer): [yes: number, no: number] {
  const answer = (word: string) =>
    tokenId(tokenizer, word) ?? tokenizer.encode(word, { addSpecialTokens: false })[0];
  return [answer("yes"), answer("no")];
}

/**
 * Ids of `pieces`: a piece that is exactly one token of the vocabulary (a control token such as
 * `<|im_start|>`, or `<think>`) is that id; any other is encoded as text.
 */
function encodeWithControls(tokenizer: Tokenizer, pieces: string[]): number[] {
  const tokens = tokenizer.vocabulary().tokens;
  return pieces.flatMap((piece) => {
    const id = /^<.*>$/.test(piece) ? tokens.indexOf(piece) : -1;
    return id >= 0 ? [id] : tokenizer.encode(piece, { addSpecialTokens: false });
  });
}

function dot(h: Float32Array, row: Float64Array): number {
  let s = 0;
  for (let i = 0; i < h.length; i++) s += h[i] * row[i];
  return s;
}

/** p(yes) of a two-way softmax over (yes, no): the sigmoid of the logits' difference. */
function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}
