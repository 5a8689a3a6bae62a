// One model's grammars: xgrammar's view of the model's vocabulary (built once, on the first
// constrained request), its compiler, the compile cache, and a matcher for each request. Nothing
// here runs, and xgrammar is not even loaded, until a request asks for a grammar.

import type { CompiledGrammar, GrammarCompiler, GrammarMatcher } from "@mlc-ai/web-xgrammar";
import type { Vocabulary } from "../../engine/text/tokenizer.ts";
import { InvalidRequest } from "../errors/invalid_request.ts";
import { CompileCache } from "./compile_cache.ts";
import { compileSpec, type GrammarSpec, specKey } from "./spec.ts";
import { loadXGrammar, type XGrammar, xgrammarError } from "./xgrammar.ts";

/** What grammars are built over: the model's vocabulary, its logits width and its stop ids. */
export interface GrammarModel {
  /** Read once, when the first grammar is compiled. */
  vocabulary: () => Vocabulary;
  /** The logits' width (EngineInfo.vocabSize): ids past the vocabulary are never allowed. */
  vocabSize: number;
  /** The model's EOS ids: where a complete grammar lets generation stop. */
  stopIds: readonly number[];
}

/** A grammar compiled for this model, to hand to submit() (SubmitParams.grammar). */
export class CompiledGrammarHandle {
  /** @param owner the Grammars that compiled it: a handle is good for that runtime only. */
  constructor(readonly spec: GrammarSpec, readonly key: string, readonly owner: Grammars) {}
}

/** How many compiled grammars are kept. */
const DEFAULT_CACHE_SIZE = 64;

/** xgrammar's vocabulary encodings, by the tokenizer's token family. */
const VOCAB_TYPE = {
  "byte-level": "byte_level",
  "byte-fallback": "byte_fallback",
  "whole-characters": "raw",
} as const;

export class Grammars {
  readonly cache: CompileCache<CompiledGrammar>;
  #ready: Promise<{ xgr: XGrammar; compiler: GrammarCompiler }> | null = null;
  #closed = false;

  /** @param model null: this runtime has no vocabulary to constrain with (a refusal, then). */
  constructor(private readonly model: GrammarModel | null, cacheSize = DEFAULT_CACHE_SIZE) {
    this.cache = new CompileCache(cacheSize);
  }

  /** The ids a complete grammar may end on. */
  get stopIds(): readonly number[] {
    return this.model?.stopIds ?? [];
  }

  /**
   * Compiles `spec` (or finds it compiled). A spec that does not compile is an InvalidRequest
   * (param "response_format", code "invalid_grammar"; callers may name their own param).
   */
  async compile(spec: GrammarSpec): Promise<CompiledGrammarHandle> {
    const { compiler } = await this.#compiler();
    const key = specKey(spec);
    try {
      await this.cache.get(key, () => compileSpec(compiler, spec));
    } catch (e) {
      throw new InvalidRequest(
        `The ${spec.type} grammar cannot be used: ${xgrammarError(e)}`,
        "response_format",
        "invalid_grammar",
      );
    }
    return new CompiledGrammarHandle(spec, key, this);
  }

  /** A fresh matcher for `handle`'s grammar (compiled again if the cache has let it go). */
  async matcher(handle: CompiledGrammarHandle): Promise<GrammarMatcher> {
    const { xgr, compiler } = await this.#compiler();
    const entry = this.cache.get(handle.key, () => compileSpec(compiler, handle.spec));
    this.cache.hold(entry);
    try {
      return await xgr.GrammarMatcher.createGrammarMatcher(await entry);
    } finally {
      this.cache.release(entry);
    }
  }

  /** Disposes the compiled grammars and the compiler (matchers are their requests'). */
  async close(): Promise<void> {
    this.#closed = true;
    this.cache.clear();
    const ready = this.#ready;
    this.#ready = null;
    const { compiler } = await ready?.catch(() => null) ?? { compiler: null };
    compiler?.dispose();
  }

  #compiler(): Promise<{ xgr: XGrammar; compiler: GrammarCompiler }> {
    if (this.#closed) throw new Error("the runtime is closed");
    const model = this.model;
    if (model === null) {
      throw new InvalidRequest(
        "This server cannot constrain output: it was opened without the model's vocabulary",
        "response_format",
        "invalid_grammar",
      );
    }
    this.#ready ??= (async () => {
      const xgr = await loadXGrammar();
      const { tokens, family, prependSpace } = model.vocabulary();
      const info = await xgr.TokenizerInfo.createTokenizerInfo(
        tokens,
        VOCAB_TYPE[family],
        prependSpace,
        Math.max(model.vocabSize, tokens.length),
        model.stopIds.length > 0 ? [...model.stopIds] : undefined,
      );
      // The compiler keeps what it needs of `info`; caching is ours (bounded), not xgrammar's.
      const compiler = await xgr.GrammarCompiler.createGrammarCompiler(info, false);
      info.dispose();
      return { xgr, compiler };
    })();
    return this.#ready;
  }
}
