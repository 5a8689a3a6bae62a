// How a quantized matrix sits in a GPU buffer: GGML blocks repacked at upload into aligned regions,
// so the kernels (matmul_quant, embedding_quant) read every quant with 16-byte loads.
//
// GGML's blocks are 18, 34 or 210 bytes: most are not even 4-byte aligned, and WGSL reads storage
// in whole u32 words. A part of R rows × K columns (nb = K / blockElems blocks per row) becomes
// three regions, each indexed (row, block), holding exactly GGML's bytes (only the d region's rows
// are padded to whole u32 words):
//   Q  the quants, per 32-value chunk: 16 bytes of nibbles (byte j: value j low, value j + 16 high;
//      Q4_0's own order), or Q8_0's 32 int8. Q6_K adds per chunk two u32 of 2-bit high parts
//      (value j's at bits 2j of word 0, value 16 + j's of word 1), after its block's 8 nibble chunks.
//   S  K-quants only, one vec4 per block: Q4_K's 12 packed scale bytes then f16 d and dmin;
//      Q6_K's 16 int8 scales.
//   D  Q8_0, Q4_0, Q6_K: the f16 d of each block, each row padded to an even count.
// Rows are written in any grouping (writeQuantRows), so the loader can stream a tensor in chunks.

import type { Gpu } from "../device.ts";
import { writeBytes } from "../buffers.ts";
import { QUANT_FORMATS, type QuantType } from "../../quant/formats.ts";
import { q6Quant } from "../../quant/q6_k.ts";

/** Vec4 words of the Q region per block. */
export const Q_VEC4_PER_BLOCK: Record<QuantType, number> = { q8_0: 2, q4_0: 1, q4_k: 8, q6_k: 12 };
const HAS_S: Record<QuantType, boolean> = { q8_0: false, q4_0: false, q4_k: true, q6_k: true };
const HAS_D: Record<QuantType, boolean> = { q8_0: true, q4_0: true, q4_k: false, q6_k: true };

export interface QuantLayout {
  type: QuantType;
  rows: number;
  cols: number;
  /** Blocks per row. */
  blocks: number;
  /** Byte offsets of the S and D regions (the Q region starts at 0), and the total size. */
  sOffset: number;
  dOffset: number;
  bytes: number;
}

export function quantLayout(type: QuantType, rows: number, cols: number): QuantLayout {
  const f = QUANT_FORMATS[type];
  if (!Number.isInteger(cols) || cols <= 0 || cols % f.blockElems !== 0) {
    throw new RangeError(`${type}: rows of ${cols} values are not whole blocks of ${f.blockElems}`);
  }
  const blocks = cols / f.blockElems;
  const sOffset = rows * blocks * Q_VEC4_PER_BLOCK[type] * 16;
  const dOffset = sOffset + (HAS_S[type] ? rows * blocks * 16 : 0);
  const bytes = dOffset + (HAS_D[type] ? rows * dWordsPerRow(blocks) * 4 : 0);
  return { type, rows, cols, blocks, sOffset, dOffset, bytes };
}

/** Bytes one row adds to a part. */
export function quantBytesPerRow(type: QuantType, cols: number): number {
  return quantLayout(type, 1, cols).bytes;
}

/** Rows per part so no buffer exceeds the binding limit (cf. rowsPerPart in weights/upload.ts). */
export function quantRowsPerPart(gpu: Gpu, type: QuantType, cols: number, rowsPerUnit = 1): number {
  const limit = Math.min(gpu.maxBinding, gpu.maxBufferSize);
  const rows = Math.floor(limit / (quantBytesPerRow(type, cols) * rowsPerUnit));
  if (rows < 1) throw new Error(`a ${type} row of ${cols} columns exceeds the binding limit`);
  // Multiples of 192 rows, like the f16 path, so parts of either kind split at the same rows.
  return rows >= 192 ? rows - (rows % 192) : rows;
}

function dWordsPerRow(blocks: number): number {
  return Math.ceil(blocks / 2);
}

/** The three regions' bytes for `rows` GGML rows (`ggml` holds exactly those rows). */
export interface PackedRows {
  q: Uint8Array;
  s: Uint8Array;
  d: Uint16Array;
}

export function packQuantRows(
  type: QuantType,
  ggml: Uint8Array,
  rows: number,
  cols: number,
): PackedRows {
  const f = QUANT_FORMATS[type];
  const { blocks } = quantLayout(type, rows, cols);
  if (ggml.byteLength < rows * blocks * f.blockBytes) {
    throw new RangeError(`${type}: ${rows} rows of ${cols} need ${rows * blocks * f.blockBytes} B`);
  }
  const qBlock = Q_VEC4_PER_BLOCK[type] * 16;
  const q = new Uint8Array(rows * blocks * qBlock);
  const s = new Uint8Array(HAS_S[type] ? rows * blocks * 16 : 0);
  const d = new Uint16Array(HAS_D[type] ? rows * dWordsPerRow(blocks) * 2 : 0);
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < blocks; b++) {
      const src = (r * blocks + b) * f.blockBytes;
      const dst = (r * blocks + b) * qBlock;
      const sDst = (r * blocks + b) * 16;
      const dIndex = r * dWordsPerRow(blocks) * 2 + b;
      const half = (o: number) => ggml[src + o] | (ggml[src + o + 1] << 8);
      if (type === "q8_0") {
        d[dIndex] = half(0);
        q.set(ggml.subarray(src + 2, src + 34), dst);
      } else if (type === "q4_0") {
        d[dIndex] = half(0);
        q.set(ggml.subarray(src + 2, src + 18), dst);
      } else if (type === "q4_k") {
        packQ4KQuants(ggml, src + 16, q, dst);
        s.set(ggml.subarray(src + 4, src + 16), sDst);
        s.set(ggml.subarray(src, src + 4), sDst + 12);
      } else {
        packQ6KQuants(ggml, src, q, dst);
        s.set(ggml.subarray(src + 192, src + 208), sDst);
        d[dIndex] = half(208);
      }
    }
  }
  return { q, s, d };
}

/** Q4_K's 64-value groups (low nibbles, then high) become two chunks in Q4_0's nibble order. */
function packQ4KQuants(ggml: Uint8Array, qs: number, out: Uint8Array, dst: number): void {
  for (let g = 0; g < 4; g++) {
    for (let j = 0; j < 16; j++) {
      const a = ggml[qs + 32 * g + j], b = ggml[qs + 32 * g + 16 + j];
      out[dst + 32 * g + j] = (a & 0xf) | ((b & 0xf) << 4);
      out[dst + 32 * g + 16 + j] = (a >> 4) | (b & 0xf0);
    }
  }
}

function packQ6KQuants(ggml: Uint8Array, src: number, out: Uint8Array, dst: number): void {
  const hi = new DataView(out.buffer, out.byteOffset + dst + 128, 64);
  for (let c = 0; c < 8; c++) {
    let h0 = 0, h1 = 0;
    for (let j = 0; j < 16; j++) {
      const a = q6Quant(ggml, src, 32 * c + j), b = q6Quant(ggml, src, 32 * c + 16 + j);
      out[dst + 16 * c + j] = (a & 0xf) | ((b & 0xf) << 4);
      h0 |= (a >> 4) << (2 * j);
      h1 |= (b >> 4) << (2 * j);
    }
    hi.setUint32(8 * c, h0 >>> 0, true);
    hi.setUint32(8 * c + 4, h1 >>> 0, true);
  }
}

/** A whole part's bytes in one array (tests and small matrices). */
export function packQuantPart(type: QuantType, ggml: Uint8Array, rows: number, cols: number) {
  const layout = quantLayout(type, rows, cols);
  const out = new Uint8Array(layout.bytes);
  const { q, s, d } = packQuantRows(type, ggml, rows, cols);
  out.set(q, 0);
  out.set(s, layout.sOffset);
  out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), layout.dOffset);
  return out;
}

/**
 * Packs `rows` GGML rows and writes them as rows rowStart.. of the part laid out by `layout` in
 * `buffer` (at `baseOffset`): the loader streams a tensor through this a chunk of rows at a time.
 */
export function writeQuantRows(
  gpu: Gpu,
  buffer: GPUBuffer,
  layout: QuantLayout,
  rowStart: number,
  ggml: Uint8Array,
  rows: number,
  baseOffset = 0,
): void {
  if (rowStart < 0 || rowStart + rows > layout.rows) {
    throw new RangeError(`rows ${rowStart}+${rows} outside a part of ${layout.rows}`);
  }
  const { type, blocks } = layout;
  const { q, s, d } = packQuantRows(type, ggml, rows, layout.cols);
  writeBytes(gpu, buffer, baseOffset + rowStart * blocks * Q_VEC4_PER_BLOCK[type] * 16, q);
  if (s.byteLength) {
    writeBytes(gpu, buffer, baseOffset + layout.sOffset + rowStart * blocks * 16, s);
  }
  if (d.byteLength) {
    writeBytes(gpu, buffer, baseOffset + layout.dOffset + rowStart * dWordsPerRow(blocks) * 4, d);
  }
}
