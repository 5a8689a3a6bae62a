// `deno task bench embeddings-llamacpp`: Sluice's encoder vectors against llama.cpp's on the very
// same GGUF files. Generated BERT and NomicBERT models (engine/sources/tiny_encoder.ts) are written
// as GGUF the way llama.cpp's converter writes them (tiny_encoder_gguf.ts), in F32 and F16, with
// mean and CLS pooling (the GGUF's pooling_type); both engines embed the same token ids (no
// special tokens added by either) and the report gives the cosine of each pair. The tests check
// these models against a float64 reference (tests/engine/encoder/); this checks that the file
// means to llama.cpp what it means to Sluice. llama.cpp runs on its CPU backend through
// node-llama-cpp (common/llamacpp_process.ts), so this needs node and npm, as bench llamacpp does.

import { join } from "node:path";
import { z } from "zod";
import { ensureRuntimeDir, writeTinyEncoder, writeTinyEncoderGguf } from "../engine/bench_api.ts";
import { openEncoderModel } from "../runtime/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import {
  installNodeLlamaCpp,
  LlamaCppProcess,
  NODE_LLAMA_CPP_VERSION,
} from "./common/llamacpp_process.ts";

export const USAGE = `usage: deno task bench embeddings-llamacpp [flags]

Cosine between Sluice's and llama.cpp's embeddings of the same generated BERT and NomicBERT GGUF
files (F32 and F16; mean and CLS pooling), the same token ids in both.

  --inputs N     inputs per model (default 8), of 3 to 120 tokens
  --layers N     encoder layers (default 2)`;

const Flags = z.object({
  inputs: z.coerce.number().int().min(1).max(64).default(8),
  layers: z.coerce.number().int().min(1).max(12).default(2),
});

/** The models compared: family, weight type, BERT's fused qkv, llama.cpp's pooling_type. */
const CASES = [
  { family: "bert", type: "F32", fusedQkv: false, pooling: "mean" },
  { family: "bert", type: "F16", fusedQkv: true, pooling: "cls" },
  { family: "nomic_bert", type: "F32", fusedQkv: false, pooling: "mean" },
  { family: "nomic_bert", type: "F16", fusedQkv: false, pooling: "mean" },
] as const;
const POOLING_TYPE = { mean: 1, cls: 2 } as const;

interface CaseResult {
  name: string;
  cosines: number[];
}

export async function benchEmbeddingsLlamaCpp(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  ensureRuntimeDir();
  const entry = await installNodeLlamaCpp();
  const llama = await LlamaCppProcess.start(entry);
  const root = await Deno.makeTempDir({ prefix: "sluice-bench-emb-llamacpp-" });
  try {
    const info = await llama.request<{ release: string }>({ op: "info" });
    const results: CaseResult[] = [];
    for (const c of CASES) {
      const name = `${c.family} ${c.type}${c.fusedQkv ? " fused qkv" : ""}, ${c.pooling}`;
      const dir = join(root, name.replace(/[^a-z0-9]+/gi, "-"));
      await writeTinyEncoder(dir, {
        family: c.family,
        hiddenSize: 128,
        numLayers: f.layers,
        numHeads: 4,
        intermediateSize: 512,
        maxPositions: 512,
        dtype: c.type,
        seed: 11,
      });
      const path = `${dir}.gguf`;
      await writeTinyEncoderGguf(dir, path, {
        type: c.type,
        fusedQkv: c.fusedQkv,
        poolingType: POOLING_TYPE[c.pooling],
      });
      const inputs = tokenInputs(f.inputs, await wordPieceFrame(dir));
      const sluice = await sluiceVectors(path, inputs);
      const { vectors } = await llama.request<{ vectors: number[][] }>({
        op: "embed",
        path,
        inputs,
        contextSize: 512,
        threads: 1,
      });
      results.push({ name, cosines: sluice.map((v, i) => cosine(v, vectors[i])) });
    }
    return report(results, f, info.release);
  } finally {
    await llama.close();
    await Deno.remove(root, { recursive: true });
  }
}

interface Frame {
  cls: number;
  sep: number;
  /** Ids of ordinary pieces (not [CLS], [SEP], [PAD], [UNK], [MASK]). */
  ordinary: number[];
}

/** The generated WordPiece vocabulary's special ids and its ordinary ones. */
async function wordPieceFrame(dir: string): Promise<Frame> {
  const tok = JSON.parse(await Deno.readTextFile(join(dir, "tokenizer.json")));
  const vocab = tok.model.vocab as Record<string, number>;
  const ordinary = Object.entries(vocab).filter(([t]) => !/^\[.*\]$/.test(t)).map(([, id]) => id);
  return { cls: vocab["[CLS]"], sep: vocab["[SEP]"], ordinary };
}

/** Inputs of varied lengths (3 to 120 ids), each framed as [CLS] … [SEP] as a tokenizer frames
 *  them: node-llama-cpp adds the frame to token ids that lack it, so both engines see these. */
function tokenInputs(count: number, frame: Frame): number[][] {
  const { ordinary } = frame;
  return Array.from({ length: count }, (_, b) => {
    const body = 1 + ((b * 37) % 118);
    const ids = Array.from(
      { length: body },
      (_, i) => ordinary[(b * 7919 + i * 104729) % ordinary.length],
    );
    return [frame.cls, ...ids, frame.sep];
  });
}

async function sluiceVectors(path: string, inputs: number[][]): Promise<Float32Array[]> {
  const opened = await openEncoderModel(path);
  const embedder = opened.embedder;
  if (!embedder) throw new Error(`${path} opened as a reranker`);
  try {
    return (await embedder.embed(inputs)).vectors;
  } finally {
    await embedder.close();
  }
}

/** Cosine of two vectors; -1 where either holds a NaN (so NaN never passes for agreement). */
function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return -1;
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const c = ab / Math.sqrt(aa * bb);
  return Number.isFinite(c) ? c : -1;
}

function report(results: CaseResult[], f: z.infer<typeof Flags>, release: string): string {
  const min = (xs: number[]) => Math.min(...xs);
  return [
    "# Embeddings: Sluice against llama.cpp on the same GGUF files",
    "",
    `Generated encoders (hidden 128, ${f.layers} layers, 4 heads, intermediate 512; random ` +
    `weights), written as GGUF as llama.cpp's converter writes them; ${f.inputs} inputs of ` +
    `3 to 120 token ids each, the same ids in both engines. llama.cpp ${release} (node-llama-cpp ` +
    `${NODE_LLAMA_CPP_VERSION}, CPU).`,
    "",
    "| model | inputs | lowest cosine | 1 − cosine, each input |",
    "| --- | ---: | ---: | --- |",
    ...results.map((r) =>
      `| ${r.name} | ${r.cosines.length} | ${min(r.cosines).toFixed(7)} | ${
        r.cosines.map((c) => (1 - c).toExponential(1)).join(", ")
      } |`
    ),
    "",
  ].join("\n");
}
