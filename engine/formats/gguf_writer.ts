// Writes GGUF files (versions 2 and 3, little-endian): typed metadata, tensor infos, then the
// tensor data, each tensor aligned as llama.cpp's writer aligns it. Sluice never writes GGUF to
// serve; tests build fixtures with it and the decode benchmark its quantized models
// (gguf_convert.ts turns a model directory into one).

/** One metadata value with its GGUF type. */
export type GgufMeta =
  | {
    type: "u16" | "u32" | "i32" | "f32" | "u64" | "bool" | "str";
    value: number | boolean | string;
  }
  | { type: "arr"; of: "str"; value: string[] }
  | { type: "arr"; of: "u32" | "i32" | "f32"; value: number[] };

export const meta = {
  u16: (value: number): GgufMeta => ({ type: "u16", value }),
  u32: (value: number): GgufMeta => ({ type: "u32", value }),
  i32: (value: number): GgufMeta => ({ type: "i32", value }),
  u64: (value: number): GgufMeta => ({ type: "u64", value }),
  f32: (value: number): GgufMeta => ({ type: "f32", value }),
  bool: (value: boolean): GgufMeta => ({ type: "bool", value }),
  str: (value: string): GgufMeta => ({ type: "str", value }),
  strs: (value: string[]): GgufMeta => ({ type: "arr", of: "str", value }),
  f32s: (value: number[]): GgufMeta => ({ type: "arr", of: "f32", value }),
  i32s: (value: number[]): GgufMeta => ({ type: "arr", of: "i32", value }),
};

export interface GgufTensorToWrite {
  name: string;
  /** GGUF type id (0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K, 14 Q6_K, 30 BF16, ...). */
  ggmlType: number;
  /** ggml order: dims[0] is the number of columns. */
  dims: number[];
  data: Uint8Array;
}

export interface GgufToWrite {
  version?: 2 | 3;
  alignment?: number;
  metadata: Record<string, GgufMeta>;
  tensors: GgufTensorToWrite[];
}

const VALUE_TYPE = { u16: 2, u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9, u64: 10 } as const;

class ByteSink {
  private chunks: Uint8Array[] = [];
  length = 0;

  bytes(b: Uint8Array): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  private scalar(size: number, set: (v: DataView) => void): void {
    const b = new Uint8Array(size);
    set(new DataView(b.buffer));
    this.bytes(b);
  }
  u16(x: number) {
    this.scalar(2, (v) => v.setUint16(0, x, true));
  }
  u32(x: number) {
    this.scalar(4, (v) => v.setUint32(0, x, true));
  }
  i32(x: number) {
    this.scalar(4, (v) => v.setInt32(0, x, true));
  }
  f32(x: number) {
    this.scalar(4, (v) => v.setFloat32(0, x, true));
  }
  u64(x: number) {
    this.scalar(8, (v) => v.setBigUint64(0, BigInt(x), true));
  }
  str(s: string) {
    const b = new TextEncoder().encode(s);
    this.u64(b.length);
    this.bytes(b);
  }
  pad(alignment: number) {
    const n = (alignment - (this.length % alignment)) % alignment;
    if (n > 0) this.bytes(new Uint8Array(n));
  }
  /** The pieces in order, without joining them (a whole model would be held twice). */
  pieces(): readonly Uint8Array[] {
    return this.chunks;
  }
  concat(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
}

function writeValue(sink: ByteSink, m: GgufMeta): void {
  if (m.type === "arr") {
    sink.u32(VALUE_TYPE[m.of]);
    sink.u64(m.value.length);
    for (const v of m.value) writeScalar(sink, m.of, v);
    return;
  }
  writeScalar(sink, m.type, m.value);
}

function writeScalar(sink: ByteSink, type: string, v: number | boolean | string): void {
  switch (type) {
    case "u16":
      return sink.u16(v as number);
    case "u32":
      return sink.u32(v as number);
    case "i32":
      return sink.i32(v as number);
    case "f32":
      return sink.f32(v as number);
    case "u64":
      return sink.u64(v as number);
    case "bool":
      return sink.bytes(new Uint8Array([v ? 1 : 0]));
    case "str":
      return sink.str(v as string);
  }
  throw new Error(`gguf_writer: unknown type ${type}`);
}

/** The whole file as bytes. */
export function encodeGguf(spec: GgufToWrite): Uint8Array {
  return encode(spec).concat();
}

export async function writeGguf(path: string, spec: GgufToWrite): Promise<void> {
  using file = await Deno.open(path, { write: true, create: true, truncate: true });
  const write = async (bytes: Uint8Array) => {
    for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
  };
  // Metadata is many small pieces (a vocabulary's strings): gathered into large writes.
  const gathered = new Uint8Array(1 << 20);
  let held = 0;
  for (const piece of encode(spec).pieces()) {
    if (held + piece.length > gathered.length) {
      await write(gathered.subarray(0, held));
      held = 0;
    }
    if (piece.length >= gathered.length) await write(piece);
    else {
      gathered.set(piece, held);
      held += piece.length;
    }
  }
  await write(gathered.subarray(0, held));
}

function encode(spec: GgufToWrite): ByteSink {
  const alignment = spec.alignment ?? 32;
  const metadata = { ...spec.metadata };
  if (spec.alignment !== undefined) metadata["general.alignment"] = meta.u32(alignment);
  const sink = new ByteSink();
  sink.bytes(new TextEncoder().encode("GGUF"));
  sink.u32(spec.version ?? 3);
  sink.u64(spec.tensors.length);
  sink.u64(Object.keys(metadata).length);
  for (const [key, value] of Object.entries(metadata)) {
    sink.str(key);
    sink.u32(VALUE_TYPE[value.type]);
    writeValue(sink, value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of spec.tensors) {
    offsets.push(offset);
    offset += t.data.length;
    offset += (alignment - (offset % alignment)) % alignment;
  }
  spec.tensors.forEach((t, i) => {
    sink.str(t.name);
    sink.u32(t.dims.length);
    for (const d of t.dims) sink.u64(d);
    sink.u32(t.ggmlType);
    sink.u64(offsets[i]);
  });
  sink.pad(alignment);
  const dataStart = sink.length;
  spec.tensors.forEach((t, i) => {
    sink.bytes(new Uint8Array(dataStart + offsets[i] - sink.length));
    sink.bytes(t.data);
  });
  return sink;
}
