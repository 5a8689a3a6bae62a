// Reads the header of a GGUF file (llama.cpp's single-file model format, versions 2 and 3): its
// metadata (architecture, hyperparameters, tokenizer) and where each tensor's bytes lie, so a
// loader can stream one tensor at a time from disk, as safetensors.ts does.
//
// The parsing itself is @huggingface/gguf's. It reads local files only on the main thread (its
// allowLocalFile refuses inside a Worker, where the engine opens the model), so it is fed through
// its `fetch` hook instead: a fetch that serves Range requests from the one local file.

import { GGMLQuantizationType, gguf, type MetadataValue } from "@huggingface/gguf";
import { ModelLoadError } from "../model/errors.ts";

/** Metadata values as GGUF stores them (u64/i64 as bigint, arrays as JS arrays). */
export type GgufValue = MetadataValue;

/** The ggml tensor types Sluice loads, by their GGUF type ids. */
export const GGML = {
  F32: GGMLQuantizationType.F32,
  F16: GGMLQuantizationType.F16,
  BF16: GGMLQuantizationType.BF16,
  Q4_0: GGMLQuantizationType.Q4_0,
  Q8_0: GGMLQuantizationType.Q8_0,
  Q4_K: GGMLQuantizationType.Q4_K,
  Q6_K: GGMLQuantizationType.Q6_K,
  Q4_1: GGMLQuantizationType.Q4_1,
  Q5_0: GGMLQuantizationType.Q5_0,
  Q5_1: GGMLQuantizationType.Q5_1,
  Q5_K: GGMLQuantizationType.Q5_K,
  Q3_K: GGMLQuantizationType.Q3_K,
  IQ4_NL: GGMLQuantizationType.IQ4_NL,
  IQ4_XS: GGMLQuantizationType.IQ4_XS,
} as const;

export type GgmlTypeName = keyof typeof GGML;

/** Elements per block and bytes per block of each loadable type (ggml's type traits). */
export const GGML_BLOCKS: Record<GgmlTypeName, { elems: number; bytes: number }> = {
  F32: { elems: 1, bytes: 4 },
  F16: { elems: 1, bytes: 2 },
  BF16: { elems: 1, bytes: 2 },
  Q4_0: { elems: 32, bytes: 18 },
  Q8_0: { elems: 32, bytes: 34 },
  Q4_K: { elems: 256, bytes: 144 },
  Q6_K: { elems: 256, bytes: 210 },
  Q4_1: { elems: 32, bytes: 20 },
  Q5_0: { elems: 32, bytes: 22 },
  Q5_1: { elems: 32, bytes: 24 },
  Q5_K: { elems: 256, bytes: 176 },
  Q3_K: { elems: 256, bytes: 110 },
  IQ4_NL: { elems: 32, bytes: 18 },
  IQ4_XS: { elems: 256, bytes: 136 },
};

export const SUPPORTED_GGML_TYPES = Object.keys(GGML) as GgmlTypeName[];

export interface GgufTensor {
  name: string;
  /** The GGUF type id, and its ggml name ("Q4_K", or "type 99" when even ggml's list lacks it). */
  ggmlType: number;
  typeName: string;
  /** Loadable by Sluice (one of SUPPORTED_GGML_TYPES). */
  supported: boolean;
  /** ggml order: dims[0] is the contiguous one (a matrix's columns), the reverse of PyTorch's. */
  dims: number[];
  /** Absolute path of the file holding the data. */
  file: string;
  /** Absolute byte offset of the first data byte in `file`. */
  dataOffset: number;
  /** Bytes of data (0 for a tensor of an unsupported type: its size is not known here). */
  byteLength: number;
}

export interface GgufFile {
  path: string;
  version: number;
  metadata: Record<string, GgufValue>;
  tensors: Map<string, GgufTensor>;
  /** Where the tensor data section starts (offsets are relative to it in the file). */
  dataStart: number;
  alignment: number;
}

/** The byte length of `elems` elements of a loadable type, or null when it is not whole blocks. */
export function ggmlBytes(type: GgmlTypeName, elems: number): number | null {
  const block = GGML_BLOCKS[type];
  return elems % block.elems === 0 ? (elems / block.elems) * block.bytes : null;
}

export function ggmlTypeName(type: number): string {
  return GGMLQuantizationType[type] ?? `type ${type}`;
}

/** True when `path` starts with GGUF's magic bytes (Ollama's blobs have no file extension). */
export async function isGgufFile(path: string): Promise<boolean> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch {
    return false;
  }
  try {
    const magic = new Uint8Array(4);
    const n = await file.read(magic);
    return n === 4 && new TextDecoder().decode(magic) === "GGUF";
  } finally {
    file.close();
  }
}

/** Parses and validates the header of the GGUF file at `path`. Throws ModelLoadError. */
export async function readGguf(path: string): Promise<GgufFile> {
  let fileSize: number;
  try {
    fileSize = (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new ModelLoadError(path, "missing");
    throw e;
  }
  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    // The address is never fetched: localRangeFetch answers every request from `path`.
    parsed = await gguf("https://local.gguf.invalid/model.gguf", {
      fetch: localRangeFetch(path, fileSize),
    });
  } catch (e) {
    if (e instanceof ModelLoadError) throw e;
    throw new ModelLoadError(path, `not a valid GGUF file (${(e as Error).message})`);
  }

  const { tensor_count: _t, kv_count: _k, version, ...metadata } = parsed.metadata as Record<
    string,
    GgufValue
  >;
  const dataStart = Number(parsed.tensorDataOffset);
  const alignment = Number(metadata["general.alignment"] ?? 32);
  const tensors = new Map<string, GgufTensor>();
  for (const info of parsed.tensorInfos) {
    const fail = (problem: string): never => {
      throw new ModelLoadError(path, `tensor "${info.name}" ${problem}`);
    };
    if (tensors.has(info.name)) fail("appears twice");
    const dims = info.shape.map(Number);
    const typeName = ggmlTypeName(info.dtype);
    const supported = (SUPPORTED_GGML_TYPES as string[]).includes(typeName);
    const offset = Number(info.offset);
    if (offset % alignment !== 0) fail(`starts at offset ${offset}, not aligned to ${alignment}`);
    let byteLength = 0;
    if (supported) {
      const block = GGML_BLOCKS[typeName as GgmlTypeName];
      if (dims[0] % block.elems !== 0) {
        fail(`has ${dims[0]} columns, not a multiple of ${typeName}'s block of ${block.elems}`);
      }
      byteLength = ggmlBytes(typeName as GgmlTypeName, dims.reduce((a, b) => a * b, 1))!;
      if (dataStart + offset + byteLength > fileSize) {
        fail(
          `ends at byte ${dataStart + offset + byteLength} but the file has only ${fileSize} ` +
            `bytes (truncated?)`,
        );
      }
    }
    tensors.set(info.name, {
      name: info.name,
      ggmlType: info.dtype,
      typeName,
      supported,
      dims,
      file: path,
      dataOffset: dataStart + offset,
      byteLength,
    });
  }
  return { path, version: Number(version), metadata, tensors, dataStart, alignment };
}

/** A fetch that answers `Range: bytes=a-b` requests with that slice of one local file. */
function localRangeFetch(path: string, fileSize: number): typeof fetch {
  return async (_input, init) => {
    const range = new Headers(init?.headers).get("range") ?? "";
    const match = /^bytes=(\d+)-(\d+)$/.exec(range);
    if (!match) throw new Error(`unexpected read of ${path} without a byte range`);
    const start = Math.min(Number(match[1]), fileSize);
    const end = Math.min(Number(match[2]) + 1, fileSize);
    const bytes = new Uint8Array(end - start);
    const file = await Deno.open(path, { read: true });
    try {
      await file.seek(start, Deno.SeekMode.Start);
      for (let filled = 0; filled < bytes.length;) {
        const n = await file.read(bytes.subarray(filled));
        if (n === null) break;
        filled += n;
      }
    } finally {
      file.close();
    }
    return new Response(bytes, {
      status: 206,
      headers: { "content-range": `bytes ${start}-${Math.max(start, end - 1)}/${fileSize}` },
    });
  };
}
