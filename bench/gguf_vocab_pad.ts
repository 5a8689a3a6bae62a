// Pads a GGUF file's vocabulary to the model's embedding rows, as llama.cpp's converter does, so
// llama.cpp loads the generated bench models. Sluice's converter writes only the tokenizer's own
// tokens (512 for the generated tokenizer) while the embedding has vocab_size rows (49,152), and
// llama.cpp refuses a token_embd whose row count is not the token count. convert_hf_to_gguf.py fills
// the missing ids with "[PAD<id>]" tokens of type unused; this does the same to a written file: a
// new header (metadata edited by @huggingface/gguf, tensor infos kept) before the same tensor data.

import { buildGgufHeader, gguf, type GGUFTypedMetadata } from "@huggingface/gguf";

/** llama.cpp's LLAMA_TOKEN_TYPE_UNUSED. */
const TOKEN_TYPE_UNUSED = 5;

/** The ids a padded vocabulary adds: "[PAD<id>]" tokens of type unused from `have` to `want`. */
export function padTokens(
  tokens: string[],
  types: number[],
  want: number,
): { tokens: string[]; types: number[] } {
  if (types.length !== tokens.length) {
    throw new Error(`${tokens.length} tokens but ${types.length} token types`);
  }
  if (tokens.length > want) throw new Error(`${tokens.length} tokens, more than ${want} rows`);
  const ids = Array.from({ length: want - tokens.length }, (_, i) => tokens.length + i);
  return {
    tokens: [...tokens, ...ids.map((id) => `[PAD${id}]`)],
    types: [...types, ...ids.map(() => TOKEN_TYPE_UNUSED)],
  };
}

/**
 * Rewrites the GGUF file at `source` to `dest` with its vocabulary padded to token_embd's row
 * count. Returns the number of tokens added (0: `dest` is a plain copy).
 */
export async function padGgufVocab(source: string, dest: string): Promise<number> {
  const parsed = await gguf(source, { typedMetadata: true, allowLocalFile: true });
  const md = parsed.typedMetadata;
  const embd = parsed.tensorInfos.find((t) => t.name === "token_embd.weight");
  const tokens = md["tokenizer.ggml.tokens"];
  const types = md["tokenizer.ggml.token_type"];
  if (!embd || !tokens || !types) {
    throw new Error(`${source}: no token_embd.weight or no tokenizer.ggml.tokens/token_type`);
  }
  if (md["tokenizer.ggml.scores"]) {
    // Only gpt2 vocabularies are generated here; a scored one would need its scores padded too.
    throw new Error(`${source}: padding a vocabulary with scores is not supported`);
  }
  const have = tokens.value as string[];
  const padded = padTokens(have, (types.value as number[]).map(Number), Number(embd.shape[1]));
  using file = await Deno.open(source, { read: true });
  using out = await Deno.open(dest, { write: true, create: true, truncate: true });
  if (padded.tokens.length > have.length) {
    // buildGgufHeader copies the tensor infos from the original header's bytes.
    const [, infoEnd] = parsed.tensorInfoByteRange;
    const header = await buildGgufHeader(
      new Blob([await readExactly(file, infoEnd)]),
      {
        ...md,
        "tokenizer.ggml.tokens": { ...tokens, value: padded.tokens },
        "tokenizer.ggml.token_type": { ...types, value: padded.types },
      } as GGUFTypedMetadata,
      {
        littleEndian: parsed.littleEndian,
        tensorInfoByteRange: parsed.tensorInfoByteRange,
        alignment: Number(md["general.alignment"]?.value ?? 32),
      },
    );
    await writeAll(out, new Uint8Array(await header.arrayBuffer()));
    await file.seek(Number(parsed.tensorDataOffset), Deno.SeekMode.Start);
  }
  const chunk = new Uint8Array(1 << 22);
  for (let n = await file.read(chunk); n !== null; n = await file.read(chunk)) {
    await writeAll(out, chunk.subarray(0, n));
  }
  return padded.tokens.length - have.length;
}

async function readExactly(file: Deno.FsFile, n: number): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = new Uint8Array(n);
  await file.seek(0, Deno.SeekMode.Start);
  for (let at = 0; at < n;) {
    const got = await file.read(bytes.subarray(at));
    if (got === null) throw new Error(`file ends at byte ${at} of a ${n}-byte header`);
    at += got;
  }
  return bytes;
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
}
