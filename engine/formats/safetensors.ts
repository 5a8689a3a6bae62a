// Reads and writes the safetensors format: an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw data. Reading parses only the
// header and hands out byte ranges, so a loader can stream one tensor at a time from disk.

import { ModelLoadError } from "../model/errors.ts";
import { f16BitsToF32, f32ToF16Bits } from "../quant/half.ts";

/** The dtypes the engine can load. */
export type StDtype = "F32" | "F16" | "BF16";

export interface TensorInfo {
  name: string;
  dtype: StDtype;
  shape: number[];
  /** Absolute path of the file holding the data. */
  file: string;
  /** Absolute byte offset of the first data byte in `file`. */
  dataOffset: number;
  byteLength: number;
}

/** A tensor in a dtype the engine does not load; kept so callers can say which one it was. */
export interface UnsupportedTensor {
  name: string;
  dtype: string;
  shape: number[];
  file: string;
}

export interface SafetensorsContents {
  tensors: Map<string, TensorInfo>;
  unsupported: Map<string, UnsupportedTensor>;
  metadata: Record<string, string>;
}

export const SUPPORTED_DTYPES: readonly StDtype[] = ["F32", "F16", "BF16"];

// Every dtype of the safetensors spec, so sizes and offsets are validated even for tensors the
// engine will not load.
const DTYPE_BYTES: Record<string, number> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
};

// The reference implementation refuses headers above 100 MB; a larger length means a corrupt file.
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export function dtypeBytes(dtype: StDtype): number {
  return DTYPE_BYTES[dtype];
}

export function isSupportedDtype(dtype: string): dtype is StDtype {
  return (SUPPORTED_DTYPES as readonly string[]).includes(dtype);
}

/** Product of the dimensions (1 for a scalar). */
export function numElements(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Reads and validates the header of `path`. Every tensor must be F32, F16 or BF16; use
 * readSafetensorsContents to tolerate tensors of other dtypes.
 */
export async function readSafetensorsHeader(path: string): Promise<Map<string, TensorInfo>> {
  const { tensors, unsupported } = await readSafetensorsContents(path);
  for (const t of unsupported.values()) {
    throw new ModelLoadError(path, unsupportedDtypeProblem(t));
  }
  return tensors;
}

export function unsupportedDtypeProblem(t: { name: string; dtype: string }): string {
  return `tensor "${t.name}" has dtype ${t.dtype}, which is not supported (supported: ${
    SUPPORTED_DTYPES.join(", ")
  })`;
}

/** Reads and validates the header of `path`, sorting tensors into loadable and not. */
export async function readSafetensorsContents(path: string): Promise<SafetensorsContents> {
  const fail = (problem: string): never => {
    throw new ModelLoadError(path, problem);
  };
  const { header, dataStart, fileSize } = await readRawHeader(path);
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    fail("header is not a JSON object");
  }

  const tensors = new Map<string, TensorInfo>();
  const unsupported = new Map<string, UnsupportedTensor>();
  const ranges: { name: string; begin: number; end: number }[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof entry === "object" && entry !== null) metadata = entry as Record<string, string>;
      continue;
    }
    const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (typeof e !== "object" || e === null) fail(`tensor "${name}": entry is not an object`);
    const { dtype, shape, data_offsets: offsets } = e!;
    if (typeof dtype !== "string" || !(dtype in DTYPE_BYTES)) {
      fail(`tensor "${name}" has unknown dtype ${JSON.stringify(dtype)}`);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor "${name}": shape ${JSON.stringify(shape)} is not a list of sizes`);
    }
    if (
      !Array.isArray(offsets) || offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1]
    ) {
      fail(`tensor "${name}": data_offsets ${JSON.stringify(offsets)} is not a [begin, end] pair`);
    }
    const [begin, end] = offsets as [number, number];
    const dims = shape as number[];
    const want = numElements(dims) * DTYPE_BYTES[dtype as string];
    if (end - begin !== want) {
      fail(
        `tensor "${name}": data_offsets span ${end - begin} bytes but ${dtype} shape ` +
          `[${dims.join(", ")}] needs ${want}`,
      );
    }
    if (dataStart + end > fileSize) {
      fail(
        `tensor "${name}" ends at byte ${dataStart + end} but the file has only ${fileSize} ` +
          `bytes (truncated?)`,
      );
    }
    ranges.push({ name, begin, end });
    if (isSupportedDtype(dtype as string)) {
      tensors.set(name, {
        name,
        dtype: dtype as StDtype,
        shape: dims,
        file: path,
        dataOffset: dataStart + begin,
        byteLength: want,
      });
    } else {
      unsupported.set(name, { name, dtype: dtype as string, shape: dims, file: path });
    }
  }

  // Non-empty ranges sorted by start must each begin at or after the furthest end seen so far.
  ranges.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let furthest: { name: string; begin: number; end: number } | null = null;
  for (const cur of ranges) {
    if (cur.end === cur.begin) continue;
    if (furthest && cur.begin < furthest.end) {
      fail(
        `tensors "${furthest.name}" [${furthest.begin}, ${furthest.end}) and "${cur.name}" ` +
          `[${cur.begin}, ${cur.end}) overlap`,
      );
    }
    if (!furthest || cur.end > furthest.end) furthest = cur;
  }
  return { tensors, unsupported, metadata };
}

/** The parsed JSON header, where the data section starts, and the file size. */
async function readRawHeader(
  path: string,
): Promise<{ header: unknown; dataStart: number; fileSize: number }> {
  const fail = (problem: string): never => {
    throw new ModelLoadError(path, problem);
  };
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) fail("missing");
    throw e;
  }
  try {
    const fileSize = (await file.stat()).size;
    if (fileSize < 8) fail(`file is ${fileSize} bytes, too short for a safetensors header`);
    const lenBytes = new Uint8Array(8);
    await readExactly(file, lenBytes, path, "header length");
    const headerLen = new DataView(lenBytes.buffer).getBigUint64(0, true);
    if (headerLen > BigInt(fileSize - 8)) {
      fail(`header length ${headerLen} runs past the end of the ${fileSize}-byte file`);
    }
    if (headerLen > BigInt(MAX_HEADER_BYTES)) {
      fail(`header length ${headerLen} is implausibly large`);
    }
    const headerBytes = new Uint8Array(Number(headerLen));
    await readExactly(file, headerBytes, path, "header");
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(headerBytes));
    } catch (e) {
      fail(`header is not valid JSON (${(e as Error).message})`);
    }
    return { header, dataStart: 8 + headerBytes.length, fileSize };
  } finally {
    file.close();
  }
}

/** Copies the bytes of one tensor from disk into `dst` (exactly info.byteLength long). */
export async function readTensorInto(info: TensorInfo, dst: Uint8Array): Promise<void> {
  if (dst.length !== info.byteLength) {
    throw new RangeError(
      `readTensorInto(${info.name}): destination has ${dst.length} bytes, tensor has ${info.byteLength}`,
    );
  }
  const file = await Deno.open(info.file, { read: true });
  try {
    await file.seek(info.dataOffset, Deno.SeekMode.Start);
    await readExactly(file, dst, info.file, `tensor "${info.name}"`);
  } finally {
    file.close();
  }
}

async function readExactly(
  file: Deno.FsFile,
  dst: Uint8Array,
  path: string,
  what: string,
): Promise<void> {
  let filled = 0;
  while (filled < dst.length) {
    const n = await file.read(dst.subarray(filled));
    if (n === null) {
      throw new ModelLoadError(path, `unexpected end of file while reading ${what} (truncated?)`);
    }
    filled += n;
  }
}

/** Reads one tensor and widens it to float64 (for references and tests, not the GPU path). */
export async function readTensorF64(info: TensorInfo): Promise<Float64Array> {
  const bytes = new Uint8Array(info.byteLength);
  await readTensorInto(info, bytes);
  return decodeTensor(bytes, info.dtype);
}

/** Little-endian tensor bytes to float64 values. */
export function decodeTensor(bytes: Uint8Array, dtype: StDtype): Float64Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.length / dtypeBytes(dtype);
  const out = new Float64Array(n);
  if (dtype === "F32") {
    for (let i = 0; i < n; i++) out[i] = view.getFloat32(4 * i, true);
  } else if (dtype === "F16") {
    for (let i = 0; i < n; i++) out[i] = f16BitsToF32(view.getUint16(2 * i, true));
  } else {
    for (let i = 0; i < n; i++) out[i] = bf16BitsToNumber(view.getUint16(2 * i, true));
  }
  return out;
}

/** Values to little-endian tensor bytes, rounding to nearest-even in the target dtype. */
export function encodeTensor(values: ArrayLike<number>, dtype: StDtype): Uint8Array {
  const bytes = new Uint8Array(values.length * dtypeBytes(dtype));
  const view = new DataView(bytes.buffer);
  if (dtype === "F32") {
    for (let i = 0; i < values.length; i++) view.setFloat32(4 * i, values[i], true);
  } else if (dtype === "F16") {
    for (let i = 0; i < values.length; i++) view.setUint16(2 * i, f32ToF16Bits(values[i]), true);
  } else {
    for (let i = 0; i < values.length; i++) view.setUint16(2 * i, f32ToBf16Bits(values[i]), true);
  }
  return bytes;
}

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** bfloat16 is the top half of a float32; round the dropped half to nearest-even. */
export function f32ToBf16Bits(value: number): number {
  scratchF32[0] = value;
  const x = scratchU32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) & 0x8000) | 0x7fc0; // NaN stays NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

function bf16BitsToNumber(bits: number): number {
  scratchU32[0] = bits << 16;
  return scratchF32[0];
}

export interface TensorToWrite {
  name: string;
  dtype: StDtype;
  shape: number[];
  data: Uint8Array;
}

/** Writes a safetensors file; data is laid out in the given order, the header padded to 8 bytes. */
export async function writeSafetensors(
  path: string,
  tensors: TensorToWrite[],
  metadata?: Record<string, string>,
): Promise<void> {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of tensors) {
    const want = numElements(t.shape) * dtypeBytes(t.dtype);
    if (t.data.length !== want) {
      throw new RangeError(
        `writeSafetensors: tensor "${t.name}" has ${t.data.length} bytes, shape needs ${want}`,
      );
    }
    if (t.name in header) throw new RangeError(`writeSafetensors: duplicate tensor "${t.name}"`);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + want] };
    offset += want;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  const jsonLen = new TextEncoder().encode(json).length;
  json += " ".repeat((8 - ((8 + jsonLen) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(headerBytes.length), true);

  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  try {
    for (const chunk of [prefix, headerBytes, ...tensors.map((t) => t.data)]) {
      let written = 0;
      while (written < chunk.length) written += await file.write(chunk.subarray(written));
    }
  } finally {
    file.close();
  }
}
