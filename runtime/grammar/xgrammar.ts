// Loads xgrammar (@mlc-ai/web-xgrammar, its WebAssembly build) once, when the first constrained
// request needs it: a server that never constrains output never pays for the module.
//
// Two quirks of the package are handled here and nowhere else:
// - It ships a UMD bundle inside a package marked "type": "module". Under Deno the bundle takes its
//   Node path, which reads the globals `require` and `__filename` that an ES module does not have,
//   and leaves its exports on `globalThis.xgrammar` rather than on the import. Its WebAssembly
//   instance is made on first use, through the same path. So the two globals are lent for the
//   import and that first use, then taken back (nothing reads them later).
// - A grammar or schema it cannot compile aborts the C++ call: the exception says only
//   "Aborted()", and the reason is printed to the module's error stream, which it binds to
//   console.error when it is instantiated. So that stream is bound, at instantiation, to a function
//   that keeps the last "[FATAL]" line, for xgrammarError() to report instead of "Aborted()".

import { createRequire } from "node:module";
import type * as Xgrammar from "@mlc-ai/web-xgrammar";

export type XGrammar = typeof Xgrammar;

/** Where the bundle is told it lives (see load). */
const BUNDLE_PATH = "/web-xgrammar/index.js";

let loading: Promise<XGrammar> | null = null;
/** The reason of the last aborted call, as the module printed it. */
let lastFatal: string | null = null;

/** xgrammar's classes (TokenizerInfo, GrammarCompiler, GrammarMatcher, …), loaded on first call. */
export function loadXGrammar(): Promise<XGrammar> {
  loading ??= load();
  return loading;
}

/** What went wrong in a failed xgrammar call: the module's reason when it aborted. */
export function xgrammarError(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  if (!message.startsWith("Aborted(") || lastFatal === null) return message;
  const reason = lastFatal;
  lastFatal = null;
  return reason;
}

async function load(): Promise<XGrammar> {
  const g = globalThis as Record<string, unknown>;
  const lent = { require: g.require === undefined, __filename: g.__filename === undefined };
  // The bundle only requires Node's built-ins (url, fs, path, crypto) and takes its own directory
  // from __filename, which it never reads from (its WebAssembly is inline): any absolute path
  // serves, and one outside the sources keeps a compiled binary free of source paths.
  if (lent.require) g.require = createRequire(BUNDLE_PATH);
  if (lent.__filename) g.__filename = BUNDLE_PATH;
  const consoleError = console.error;
  console.error = (...args: unknown[]) => {
    const line = args.map(String).join(" ");
    // "[FATAL] /path/to/file.cc:123: Check failed: (cond) is false: reason" → "reason".
    const fatal = /^\[FATAL\] [^:]*:\d+: (?:Check failed: .*? is false: )?(.*)$/s.exec(line);
    if (fatal) lastFatal = fatal[1].trim();
    else if (line !== "Aborted()") consoleError(...args);
  };
  try {
    await import("@mlc-ai/web-xgrammar");
    const xgr = g.xgrammar as XGrammar | undefined;
    if (!xgr?.GrammarMatcher) throw new Error("@mlc-ai/web-xgrammar did not load");
    (await xgr.Grammar.builtinJSONGrammar()).dispose(); // instantiates the WebAssembly module
    return xgr;
  } finally {
    console.error = consoleError;
    if (lent.require) delete g.require;
    if (lent.__filename) delete g.__filename;
  }
}
