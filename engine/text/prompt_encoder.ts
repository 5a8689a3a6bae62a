// Where a prompt becomes ids. Most prompts are small and are encoded here at once, with no thread
// hop. A large one (OFF_THREAD_CHARS or more) would hold this thread, the one that serves HTTP,
// for about a millisecond per KiB, so it goes to the tokenizer's own thread (tokenizer_thread.ts)
// and is awaited. Before a large prompt is tokenized, the caller is told a lower bound on its
// count (token_bound.ts), so one that cannot fit the context is refused without the work.
//
// A chat's bound is over its rendering by the model's template (which costs about 0.5 ms per MiB
// here, against a second to tokenize), not over the messages' text: templates may trim messages
// (Llama 3's) or drop parts of them (an earlier turn's reasoning). The rendering is the one with
// special tokens as their text, where the encoded one has stand-ins (hidden_control_tokens.ts),
// each a single token either way.

import { chatOptions, encodePrompt, type Prompt, promptLength } from "./prompt.ts";
import { maxTokenBytes } from "./token_bound.ts";
import type { Tokenizer, TokenizerFiles } from "./tokenizer.ts";
import { TokenizerThread } from "./tokenizer_thread.ts";

/**
 * Prompts of this many UTF-16 code units or more are encoded off the HTTP thread. Encoding costs
 * about 1 ms per KiB (@huggingface/tokenizers, measured on a shared 2-core machine), so a prompt just
 * under it holds this thread for about 8 ms, a sixth of the 50 ms /health p99 goal. Prompts under
 * 8 KiB (some 2k tokens) are the common case, and they skip the hop to the Worker (about 0.6 ms,
 * plus the wait behind other large prompts: the Worker encodes one at a time).
 */
export const OFF_THREAD_CHARS = 8 * 1024;

export interface PromptEncoderOptions {
  /** Default OFF_THREAD_CHARS (tests lower it to send small prompts off the thread). */
  offThreadChars?: number;
}

export interface EncodeOptions {
  /**
   * Called before a large prompt is tokenized with a lower bound on its token count (where the
   * tokenizer has one); throwing refuses the prompt before any tokenizing.
   */
  checkLength?: (atLeast: number) => void;
}

export class PromptEncoder {
  readonly #tokenizer: Tokenizer;
  readonly #thread: TokenizerThread;
  readonly #maxTokenBytes: number | null;
  readonly #offThreadChars: number;

  constructor(tokenizer: Tokenizer, files: TokenizerFiles, options: PromptEncoderOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#maxTokenBytes = maxTokenBytes(files.tokenizerJson, files.tokenizerConfig);
    this.#offThreadChars = options.offThreadChars ?? OFF_THREAD_CHARS;
    // Serialized now, while the model loads, so that starting the Worker later costs this thread
    // a copy of bytes rather than a walk of a vocabulary of 100k+ entries.
    const { dir, config, tokenizerJson, tokenizerConfig, generationConfig } = files;
    const only: TokenizerFiles = {
      dir,
      config: {
        vocabSize: config.vocabSize,
        eosTokenIds: config.eosTokenIds,
        bosTokenId: config.bosTokenId,
      },
      tokenizerJson,
      tokenizerConfig,
      generationConfig,
    };
    this.#thread = new TokenizerThread(new TextEncoder().encode(JSON.stringify(only)));
  }

  /** The most bytes one token covers, or null where no bound on the count holds. */
  get maxTokenBytes(): number | null {
    return this.#maxTokenBytes;
  }

  /** Prompts sent to the tokenizer's thread, and those of them not yet encoded. */
  get offThread(): { sent: number; pending: number } {
    return { sent: this.#thread.sent, pending: this.#thread.pending };
  }

  /** The prompt's ids, as the tokenizer gives them on any thread. */
  async encode(prompt: Prompt, { checkLength }: EncodeOptions = {}): Promise<number[]> {
    if (promptLength(prompt) < this.#offThreadChars) return encodePrompt(this.#tokenizer, prompt);
    if (checkLength && this.#maxTokenBytes !== null) checkLength(this.#atLeast(prompt));
    return await this.#thread.encode(prompt);
  }

  /** Ends the tokenizer's thread (if it was started); prompts still there fail. */
  close(): void {
    this.#thread.close();
  }

  /**
   * A lower bound on the prompt's token count (needs #maxTokenBytes). Its text's length in UTF-16
   * code units stands in for its UTF-8 length, which is never less (each unit is 1 to 3 bytes, a
   * surrogate pair 4): exact for ASCII, and free, where counting a megabyte's bytes took this
   * thread some 5 ms per prompt.
   */
  #atLeast(prompt: Prompt): number {
    const text = "text" in prompt
      ? prompt.text
      : this.#tokenizer.renderChat(prompt.messages, chatOptions(prompt));
    return Math.ceil(text.length / this.#maxTokenBytes!);
  }
}
