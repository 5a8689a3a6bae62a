// What the runtime is opened with (main.ts's flags, or a test's choice): the scheduling preset's
// options (policy/preset.ts, checked there), the memory tiers' switches, and the limits and
// defaults every request is validated against.

import type { Vocabulary } from "../engine/text/tokenizer.ts";
import type { AutoOption } from "./policy/economics.ts";
import type { PolicyName } from "./policy/index.ts";
import type { PresetOptions } from "./policy/preset.ts";
import type { RequestSlo } from "./request/request.ts";
import type { SpeculativeMode } from "./speculative/speculation.ts";

/** The runtime's options: its preset's (policy/preset.ts), and its own. */
export interface RuntimeOptions extends PresetOptions {
  /**
   * Scheduling preset (`--sched`); "auto": the one the engine's cost model favours, with the
   * options that go with it (policy/economics.ts), chosen when the runtime is assembled.
   */
  policy: PolicyName | "auto";
  /** Options the user set, which "auto" leaves as they are (the command line's given flags). */
  given?: readonly AutoOption[];
  /**
   * Share cached KV blocks between requests with the same leading tokens (`--prefix-cache`). With
   * a host tier, blocks the device evicts move there and come back on a hit.
   */
  prefixCache?: boolean;
  /**
   * Use the engine's host KV tier (default true); false leaves it unused, as `--sched auto` does on
   * a GPU's economics (policy/economics.ts).
   */
  hostTier?: boolean;
  /** Mirror new full KV blocks to the host tier as they are made (`--write-through`). */
  writeThrough?: boolean;
  /** Keep host copies valid after a swap-in, so swapping out again moves only new KV. */
  swapReuse?: boolean;
  /** Most requests waiting for admission; a request that would be one more is refused. */
  maxQueue: number;
  /** Largest max_tokens a request may ask for. */
  maxTokensLimit: number;
  /** Reading rate for requests that give none (tokens/s); 0 or undefined = unpaced. */
  defaultReadingRate?: number;
  /** SLO targets for requests that give none. */
  defaultSlo?: RequestSlo;
  /**
   * Multi-step decode (`--decode-steps`): most decode steps one submission may run (1 or absent:
   * one step each), needing an engine loaded with as many (EngineOptions.maxDecodeSteps).
   */
  decodeSteps?: number;
  /** The most time one such group may take (ms; default decode_group.ts's DEFAULT_GROUP_MS). */
  decodeGroupMs?: number;
  /** Speculative decoding (`--speculative`; runtime/speculative/): off (default) or ngram. */
  speculative?: SpeculativeMode;
  /** Drafts per speculating step (`--num-speculative-tokens`; default 4). */
  speculativeTokens?: number;
  /** Token ids that end generation unless a request gives its own. */
  eosIds: readonly number[];
  /** The model's vocabulary, read when the first grammar is compiled (none: no grammars). */
  vocabulary?: () => Vocabulary;
}
