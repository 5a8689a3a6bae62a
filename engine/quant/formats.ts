// The GGML block-quantized formats Sluice reads: their sizes, their GGUF type codes, and the CPU
// reference decoders and encoders (one file per format).
//
// A quantized row of K values is K / blockElems blocks of blockBytes bytes each, stored in GGML's
// byte layout. The GPU never sees this layout directly: engine/gpu/kernels/quant_layout.ts repacks
// it at upload time. The CPU decoders here are the ground truth the kernels are tested against.

import { dequantizeQ8_0, quantizeQ8_0 } from "./q8_0.ts";
import { dequantizeQ4_0, quantizeQ4_0 } from "./q4_0.ts";
import { dequantizeQ4K, quantizeQ4K } from "./q4_k.ts";
import { dequantizeQ6K, quantizeQ6K } from "./q6_k.ts";
import { dequantizeQ4_1, quantizeQ4_1 } from "./q4_1.ts";
import { dequantizeQ5_0, quantizeQ5_0 } from "./q5_0.ts";
import { dequantizeQ5_1, quantizeQ5_1 } from "./q5_1.ts";
import { dequantizeQ5K, quantizeQ5K } from "./q5_k.ts";
import { dequantizeQ3K, quantizeQ3K } from "./q3_k.ts";
import { dequantizeIq4Nl, quantizeIq4Nl } from "./iq4_nl.ts";
import { dequantizeIq4Xs, quantizeIq4Xs } from "./iq4_xs.ts";

export type QuantType =
  | "q8_0"
  | "q4_0"
  | "q4_k"
  | "q6_k"
  | "q4_1"
  | "q5_0"
  | "q5_1"
  | "q5_k"
  | "q3_k"
  | "iq4_nl"
  | "iq4_xs";

export interface QuantFormat {
  type: QuantType;
  /** The tensor type code in GGUF headers (ggml_type). */
  ggmlType: number;
  /** Values per block. */
  blockElems: number;
  /** Bytes per block. */
  blockBytes: number;
}

export const QUANT_FORMATS: Record<QuantType, QuantFormat> = {
  q8_0: { type: "q8_0", ggmlType: 8, blockElems: 32, blockBytes: 34 },
  q4_0: { type: "q4_0", ggmlType: 2, blockElems: 32, blockBytes: 18 },
  q4_k: { type: "q4_k", ggmlType: 12, blockElems: 256, blockBytes: 144 },
  q6_k: { type: "q6_k", ggmlType: 14, blockElems: 256, blockBytes: 210 },
  q4_1: { type: "q4_1", ggmlType: 3, blockElems: 32, blockBytes: 20 },
  q5_0: { type: "q5_0", ggmlType: 6, blockElems: 32, blockBytes: 22 },
  q5_1: { type: "q5_1", ggmlType: 7, blockElems: 32, blockBytes: 24 },
  q5_k: { type: "q5_k", ggmlType: 13, blockElems: 256, blockBytes: 176 },
  q3_k: { type: "q3_k", ggmlType: 11, blockElems: 256, blockBytes: 110 },
  iq4_nl: { type: "iq4_nl", ggmlType: 20, blockElems: 32, blockBytes: 18 },
  iq4_xs: { type: "iq4_xs", ggmlType: 23, blockElems: 256, blockBytes: 136 },
};

export const QUANT_TYPES = Object.keys(QUANT_FORMATS) as QuantType[];

export function quantFormatOfGgmlType(t: number): QuantFormat | undefined {
  return Object.values(QUANT_FORMATS).find((f) => f.ggmlType === t);
}

export function isQuantType(s: string): s is QuantType {
  return s in QUANT_FORMATS;
}

/** Bytes of `count` values of `type`; `count` must be a whole number of blocks. */
export function quantByteLength(type: QuantType, count: number): number {
  const f = QUANT_FORMATS[type];
  if (!Number.isInteger(count) || count < 0 || count % f.blockElems !== 0) {
    throw new RangeError(`${type}: ${count} values are not whole blocks of ${f.blockElems}`);
  }
  return (count / f.blockElems) * f.blockBytes;
}

type Decoder = (bytes: Uint8Array, blocks: number, out: Float32Array) => void;
type Encoder = (values: Float32Array, blocks: number, out: Uint8Array) => void;

const DECODERS: Record<QuantType, Decoder> = {
  q8_0: dequantizeQ8_0,
  q4_0: dequantizeQ4_0,
  q4_k: dequantizeQ4K,
  q6_k: dequantizeQ6K,
  q4_1: dequantizeQ4_1,
  q5_0: dequantizeQ5_0,
  q5_1: dequantizeQ5_1,
  q5_k: dequantizeQ5K,
  q3_k: dequantizeQ3K,
  iq4_nl: dequantizeIq4Nl,
  iq4_xs: dequantizeIq4Xs,
};

const ENCODERS: Record<QuantType, Encoder> = {
  q8_0: quantizeQ8_0,
  q4_0: quantizeQ4_0,
  q4_k: quantizeQ4K,
  q6_k: quantizeQ6K,
  q4_1: quantizeQ4_1,
  q5_0: quantizeQ5_0,
  q5_1: quantizeQ5_1,
  q5_k: quantizeQ5K,
  q3_k: quantizeQ3K,
  iq4_nl: quantizeIq4Nl,
  iq4_xs: quantizeIq4Xs,
};

/** The first `count` values held by `bytes`, decoded exactly as GGML does (f32 arithmetic). */
export function dequantize(type: QuantType, bytes: Uint8Array, count: number): Float32Array {
  const need = quantByteLength(type, count);
  if (bytes.byteLength < need) {
    throw new RangeError(`${type}: ${count} values need ${need} bytes, got ${bytes.byteLength}`);
  }
  const out = new Float32Array(count);
  DECODERS[type](bytes, count / QUANT_FORMATS[type].blockElems, out);
  return out;
}

/**
 * A round-to-nearest reference quantizer for building test models: valid blocks, close to the
 * input, not bit-identical to llama.cpp's (which searches for better scales).
 */
export function quantize(type: QuantType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(quantByteLength(type, values.length));
  ENCODERS[type](values, values.length / QUANT_FORMATS[type].blockElems, out);
  return out;
}
