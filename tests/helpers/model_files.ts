// Shared by the model-file tests (config, safetensors, model directories, tiny models, --model
// resolution): a temporary directory, a raw safetensors writer for lying headers, the check that an
// error blames the right file, and a small tiny-model spec.

import { ModelLoadError } from "../../engine/model/errors.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import { assert, assertEquals } from "./testing.ts";

/** Asserts that `fn` throws a ModelLoadError blaming a file ending in `fileSuffix`. */
export function expectLoadError(err: unknown, fileSuffix: string, problem: RegExp): true {
  assert(err instanceof ModelLoadError, `expected ModelLoadError, got ${err}`);
  assert(err.file.endsWith(fileSuffix), `error blames ${err.file}, expected …${fileSuffix}`);
  assert(problem.test(err.problem), `problem "${err.problem}" does not match ${problem}`);
  assertEquals(err.message, `${err.file}: ${err.problem}`);
  return true;
}

export async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "sluice-model-test-" });
}

/** Writes a safetensors file with an arbitrary (possibly lying) header. */
export async function writeRaw(path: string, header: unknown, data: Uint8Array): Promise<void> {
  const json = new TextEncoder().encode(
    typeof header === "string" ? header : JSON.stringify(header),
  );
  const bytes = new Uint8Array(8 + json.length + data.length);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
  bytes.set(json, 8);
  bytes.set(data, 8 + json.length);
  await Deno.writeFile(path, bytes);
}

export const SMALL: TinyModelSpec = {
  hiddenSize: 32,
  intermediateSize: 48,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: false,
  dtype: "F32",
  vocabSize: 300,
  seed: 11,
};
