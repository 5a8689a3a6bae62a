// Opens a GGUF model split over several files (llama.cpp's gguf-split: NAME-00001-of-00003.gguf,
// ...), as one GgufFile: the first part's metadata (only it carries the model's), and every part's
// tensors, each still pointing at the file that holds its bytes, so the weight loader reads from
// the right part without knowing there are several.
//
// Any part of the set opens the whole set: the others are found by the file name's numbering, and
// each part's split.no and split.count must agree with its name. A missing part, a part of another
// set, or a tensor count other than split.tensors.count fails the load naming the file.

import { basename, dirname, join } from "node:path";
import { ModelLoadError } from "../model/errors.ts";
import { type GgufFile, type GgufTensor, type GgufValue, readGguf } from "./gguf.ts";

/** NAME-00001-of-00003.gguf: the name, the part (from 1) and the number of parts. */
const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** The file name of part `no` (from 1) of `count`, beside `prefix`. */
export function splitPartPath(prefix: string, no: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `${prefix}-${pad(no)}-of-${pad(count)}.gguf`;
}

/** True for the name of any part but the first of a split set (not a model by itself). */
export function isLaterSplitPart(fileName: string): boolean {
  const m = SPLIT_NAME.exec(basename(fileName));
  return m !== null && Number(m[2]) !== 1;
}

/** The GGUF file at `path`, or the whole split set it belongs to. Throws ModelLoadError. */
export async function readGgufModel(path: string): Promise<GgufFile> {
  const given = await readGguf(path);
  const count = splitNumber(given, "split.count");
  if (count === null || count === 1) return given;

  const m = SPLIT_NAME.exec(basename(path));
  if (m === null) {
    throw new ModelLoadError(
      path,
      `is one of ${count} parts of a split model (split.count), but its name is not ` +
        `NAME-0000i-of-${String(count).padStart(5, "0")}.gguf, so the other parts cannot be found`,
    );
  }
  if (Number(m[3]) !== count) {
    throw new ModelLoadError(
      path,
      `is named as one of ${Number(m[3])} parts, but split.count is ${count}`,
    );
  }
  const prefix = join(dirname(path), m[1]);
  const parts: GgufFile[] = [];
  for (let no = 1; no <= count; no++) {
    const partPath = splitPartPath(prefix, no, count);
    const part = partPath === path ? given : await readPart(partPath, no, count);
    const partNo = splitNumber(part, "split.no");
    const partCount = splitNumber(part, "split.count");
    if (partNo !== no - 1 || partCount !== count) {
      throw new ModelLoadError(
        partPath,
        `says it is part ${partNo === null ? "?" : partNo + 1} of ${partCount ?? "?"} ` +
          `(split.no, split.count), but its name makes it part ${no} of ${count}`,
      );
    }
    parts.push(part);
  }

  const first = parts[0];
  const tensors = new Map<string, GgufTensor>();
  for (const part of parts) {
    for (const [name, t] of part.tensors) {
      if (tensors.has(name)) {
        throw new ModelLoadError(
          part.path,
          `tensor "${name}" is also in ${tensors.get(name)!.file}`,
        );
      }
      tensors.set(name, t);
    }
  }
  const want = splitNumber(first, "split.tensors.count");
  if (want !== null && want !== tensors.size) {
    throw new ModelLoadError(
      first.path,
      `says its ${count} parts hold ${want} tensors (split.tensors.count), but they hold ` +
        `${tensors.size}`,
    );
  }
  return { ...first, tensors };
}

async function readPart(path: string, no: number, count: number): Promise<GgufFile> {
  try {
    await Deno.stat(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new ModelLoadError(path, `is missing: part ${no} of ${count} of a split model`);
  }
  return await readGguf(path);
}

/** A split.* metadata number, or null when absent. */
function splitNumber(gguf: GgufFile, key: string): number | null {
  const v: GgufValue | undefined = gguf.metadata[key];
  if (v === undefined) return null;
  if (typeof v !== "number" && typeof v !== "bigint") {
    throw new ModelLoadError(gguf.path, `metadata ${key} is not a number`);
  }
  return Number(v);
}
