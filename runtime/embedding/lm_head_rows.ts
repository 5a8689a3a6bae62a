// A few rows of a model's LM head read from its safetensors files, in float64: a reranker's
// relevance is the difference of two logits, the final hidden state dotted with the rows of its
// two answer tokens, computed on the host from the checkpoint itself (exact whatever the device
// holds the head as). A tied model's head is its embedding.

import type { ModelFiles } from "../../engine/formats/model_files.ts";
import { decodeTensor, dtypeBytes } from "../../engine/formats/safetensors.ts";
import { EMBED, LM_HEAD } from "../../engine/model/tensors.ts";

/** The LM head's rows `ids`, each [hiddenSize]; throws for a GGUF model (its head may be quantized). */
export async function readLmHeadRows(files: ModelFiles, ids: number[]): Promise<Float64Array[]> {
  if (files.gguf) throw new Error("reading LM head rows of a GGUF model is not supported");
  const name = files.config.tieWordEmbeddings ? EMBED : LM_HEAD;
  const t = files.tensors.get(name);
  if (!t) throw new Error(`${files.dir}: no ${name}`);
  const [rows, cols] = t.shape;
  const rowBytes = cols * dtypeBytes(t.dtype);
  const file = await Deno.open(t.file, { read: true });
  try {
    const out: Float64Array[] = [];
    for (const id of ids) {
      if (!(Number.isInteger(id) && id >= 0 && id < rows)) {
        throw new RangeError(`row ${id} of ${rows}`);
      }
      const bytes = new Uint8Array(rowBytes);
      await file.seek(t.dataOffset + id * rowBytes, Deno.SeekMode.Start);
      for (let filled = 0; filled < rowBytes;) {
        const n = await file.read(bytes.subarray(filled));
        if (n === null) throw new Error(`${t.file}: ends inside ${name}`);
        filled += n;
      }
      out.push(decodeTensor(bytes, t.dtype));
    }
    return out;
  } finally {
    file.close();
  }
}
