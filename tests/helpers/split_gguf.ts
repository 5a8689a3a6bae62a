// Splits a GGUF file into NAME-00001-of-0000N.gguf parts the way llama.cpp's gguf-split does: the
// tensors in their order, a run of them per part; the first part with all the metadata, the others
// with only split.*; every part with split.no (from 0), split.count and split.tensors.count.
//
// The metadata is read back with @huggingface/gguf, which drops the stored types, so each value is
// written again by its kind: integers as u32 (i32 when negative, u64 when bigint), other numbers as
// f32, integer arrays as i32. Sluice's reader takes any numeric type, so the parts load as the
// original does; the split.* keys are u16/u16/i32 as gguf-split writes them.

import { join } from "node:path";
import { readGguf } from "../../engine/formats/gguf.ts";
import { splitPartPath } from "../../engine/formats/gguf_split.ts";
import {
  type GgufMeta,
  type GgufTensorToWrite,
  meta,
  writeGguf,
} from "../../engine/formats/gguf_writer.ts";

/** Writes `source` as `parts` files named after `name` in `dir`; returns their paths in order. */
export async function splitGguf(
  source: string,
  dir: string,
  name: string,
  parts: number,
): Promise<string[]> {
  const gguf = await readGguf(source);
  const tensors = [...gguf.tensors.values()];
  const perPart = Math.ceil(tensors.length / parts);
  const metadata: Record<string, GgufMeta> = {};
  for (const [key, value] of Object.entries(gguf.metadata)) {
    if (key !== "general.alignment") metadata[key] = typed(key, value);
  }
  const paths: string[] = [];
  using file = await Deno.open(source, { read: true });
  for (let no = 0; no < parts; no++) {
    const slice = tensors.slice(no * perPart, (no + 1) * perPart);
    const written: GgufTensorToWrite[] = [];
    for (const t of slice) {
      const data = new Uint8Array(t.byteLength);
      await file.seek(t.dataOffset, Deno.SeekMode.Start);
      for (let at = 0; at < data.length;) {
        const n = await file.read(data.subarray(at));
        if (n === null) throw new Error(`${source} ends inside tensor ${t.name}`);
        at += n;
      }
      written.push({ name: t.name, ggmlType: t.ggmlType, dims: t.dims, data });
    }
    const split = {
      "split.no": meta.u16(no),
      "split.count": meta.u16(parts),
      "split.tensors.count": meta.i32(tensors.length),
    };
    const path = splitPartPath(join(dir, name), no + 1, parts);
    await writeGguf(path, {
      version: gguf.version as 2 | 3,
      alignment: "general.alignment" in gguf.metadata ? gguf.alignment : undefined,
      metadata: no === 0 ? { ...metadata, ...split } : split,
      tensors: written,
    });
    paths.push(path);
  }
  return paths;
}

function typed(key: string, value: unknown): GgufMeta {
  if (typeof value === "string") return meta.str(value);
  if (typeof value === "boolean") return meta.bool(value);
  if (typeof value === "bigint") return meta.u64(Number(value));
  if (typeof value === "number") {
    if (!Number.isInteger(value)) return meta.f32(value);
    return value < 0 ? meta.i32(value) : meta.u32(value);
  }
  if (Array.isArray(value)) {
    if (value.every((v) => typeof v === "string")) return meta.strs(value as string[]);
    const numbers = value.map(Number);
    return numbers.every(Number.isInteger) ? meta.i32s(numbers) : meta.f32s(numbers);
  }
  throw new Error(`split_gguf: metadata ${key} has a value of an unexpected kind`);
}
