// How a quantized matrix sits in a GPU buffer: GGML blocks repacked at upload into aligned regions,
// so the kernels (matmul_quant, embedding_quant) read every quant with 16-byte loads.
//
// GGML's blocks are 18, 20, 22, 34, 110 or 210 bytes: most are not even 4-byte aligned, and WGSL
// reads storage in whole u32 words. A part of R rows × K columns (nb = K / blockElems blocks per
// row) becomes up to four regions, each indexed (row, block), holding GGML's values bit for bit:
//   Q  the quants, per 32-value chunk: 16 bytes of nibbles (byte j: value j low, value j + 16 high;
//      Q4_0's own order, which Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS share), or Q8_0's 32 int8.
//      K-quants append their high bits after the block's chunks: Q6_K two u32 of 2-bit high parts
//      per chunk (value j's at bits 2j of word 0, value 16 + j's of word 1), Q5_K one u32 per chunk
//      (value j's fifth bit at bit j). Q3_K keeps its 2-bit low parts packed, two u32 per chunk
//      (one per half, value j's at bits 2j), then one u32 of high bits per chunk, as Q5_K.
//   S  one vec4 per block: Q4_K's and Q5_K's 12 packed scale bytes then f16 d and dmin; Q6_K's 16
//      int8 scales; Q3_K's 16 and IQ4_XS's 8 six-bit scales, unpacked to int8 less their offset 32.
//   D  Q8_0, Q4_0, Q5_0, Q6_K, Q3_K, IQ4_NL, IQ4_XS: the f16 d of each block, each row padded to
//      an even count; Q4_1 and Q5_1: d and m, one u32 per block.
//   H  Q5_0 and Q5_1: the block's u32 of fifth bits (value j's at bit j), as GGML stores it.
// Rows are written in any grouping (writeQuantRows), so the loader can stream a tensor in chunks.

import type { Gpu } from "../device.ts";
import { writeBytes } from "../buffers.ts";
import { QUANT_FORMATS, type QuantType } from "../../quant/formats.ts";
import { q6Quant } from "../../quant/q6_k.ts";
import { q3kQuant, q3kScale } from "../../quant/q3_k.ts";
import { iq4xsScale } from "../../quant/iq4_xs.ts";

interface Regions {
  /** Vec4 words of the Q region per block. */
  qVec4: number;
  /** An S vec4 per block. */
  s: boolean;
  /** f16 values per block in the D region (0: none, 1: d, 2: d and m). */
  dHalves: 0 | 1 | 2;
  /** An H u32 per block. */
  h: boolean;
}

const REGIONS: Record<QuantType, Regions> = {
  q8_0: { qVec4: 2, s: false, dHalves: 1, h: false },
  q4_0: { qVec4: 1, s: false, dHalves: 1, h: false },
  q4_k: { qVec4: 8, s: true, dHalves: 0, h: false },
  q6_k: { qVec4: 12, s: true, dHalves: 1, h: false },
  q4_1: { qVec4: 1, s: false, dHalves: 2, h: false },
  q5_0: { qVec4: 1, s: false, dHalves: 1, h: true },
  q5_1: { qVec4: 1, s: false, dHalves: 2, h: true },
  q5_k: { qVec4: 10, s: true, dHalves: 0, h: false },
  q3_k: { qVec4: 6, s: true, dHalves: 1, h: false },
  iq4_nl: { qVec4: 1, s: false, dHalves: 1, h: false },
  iq4_xs: { qVec4: 8, s: true, dHalves: 1, h: false },
};

/** Each format's FMT code in shaders/quant_blocks.wgsl. */
export const FORMAT_CODES: Record<QuantType, number> = {
  q8_0: 0,
  q4_0: 1,
  q4_k: 2,
  q6_k: 3,
  q4_1: 4,
  q5_0: 5,
  q5_1: 6,
  q5_k: 7,
  q3_k: 8,
  iq4_nl: 9,
  iq4_xs: 10,
};

/** Vec4 words of the Q region per block. */
export function qVec4PerBlock(type: QuantType): number {
  return REGIONS[type].qVec4;
}

export interface QuantLayout {
  type: QuantType;
  rows: number;
  cols: number;
  /** Blocks per row. */
  blocks: number;
  /** Byte offsets of the S, D and H regions (the Q region starts at 0), and the total size. */
  sOffset: number;
  dOffset: number;
  hOffset: number;
  bytes: number;
}

export function quantLayout(type: QuantType, rows: number, cols: number): QuantLayout {
  const f = QUANT_FORMATS[type];
  if (!Number.isInteger(cols) || cols <= 0 || cols % f.blockElems !== 0) {
    throw new RangeError(`${type}: rows of ${cols} values are not whole blocks of ${f.blockElems}`);
  }
  const r = REGIONS[type];
  const blocks = cols / f.blockElems;
  const sOffset = rows * blocks * r.qVec4 * 16;
  const dOffset = sOffset + (r.s ? rows * blocks * 16 : 0);
  const hOffset = dOffset + rows * dWordsPerRow(type, blocks) * 4;
  const bytes = hOffset + (r.h ? rows * blocks * 4 : 0);
  return { type, rows, cols, blocks, sOffset, dOffset, hOffset, bytes };
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

function dWordsPerRow(type: QuantType, blocks: number): number {
  return Math.ceil((blocks * REGIONS[type].dHalves) / 2);
}

/** The four regions' bytes for `rows` GGML rows (`ggml` holds exactly those rows). */
export interface PackedRows {
  q: Uint8Array;
  s: Uint8Array;
  d: Uint16Array;
  h: Uint32Array;
}

export function packQuantRows(
  type: QuantType,
  ggml: Uint8Array,
  rows: number,
  cols: number,
): PackedRows {
  const f = QUANT_FORMATS[type];
  const r = REGIONS[type];
  const { blocks } = quantLayout(type, rows, cols);
  if (ggml.byteLength < rows * blocks * f.blockBytes) {
    throw new RangeError(`${type}: ${rows} rows of ${cols} need ${rows * blocks * f.blockBytes} B`);
  }
  const qBlock = r.qVec4 * 16;
  const q = new Uint8Array(rows * blocks * qBlock);
  const s = new Uint8Array(r.s ? rows * blocks * 16 : 0);
  const d = new Uint16Array(rows * dWordsPerRow(type, blocks) * 2);
  const h = new Uint32Array(r.h ? rows * blocks : 0);
  const view = new DataView(ggml.buffer, ggml.byteOffset, ggml.byteLength);
  for (let row = 0; row < rows; row++) {
    for (let b = 0; b < blocks; b++) {
      const block = row * blocks + b;
      const src = block * f.blockBytes;
      const dst = block * qBlock;
      const sDst = block * 16;
      const dIndex = row * dWordsPerRow(type, blocks) * 2 + b * r.dHalves;
      const half = (o: number) => view.getUint16(src + o, true);
      const copyQ = (from: number, n: number) =>
        q.set(ggml.subarray(src + from, src + from + n), dst);
      switch (type) {
        case "q8_0":
          d[dIndex] = half(0);
          copyQ(2, 32);
          break;
        case "q4_0":
        case "iq4_nl":
          d[dIndex] = half(0);
          copyQ(2, 16);
          break;
        case "q4_1":
          d[dIndex] = half(0);
          d[dIndex + 1] = half(2);
          copyQ(4, 16);
          break;
        case "q5_0":
          d[dIndex] = half(0);
          h[block] = view.getUint32(src + 2, true);
          copyQ(6, 16);
          break;
        case "q5_1":
          d[dIndex] = half(0);
          d[dIndex + 1] = half(2);
          h[block] = view.getUint32(src + 4, true);
          copyQ(8, 16);
          break;
        case "q4_k":
          packQ4KQuants(ggml, src + 16, q, dst);
          packK4Scales(ggml, src, s, sDst);
          break;
        case "q5_k":
          packQ4KQuants(ggml, src + 48, q, dst);
          packQ5KHighBits(ggml, src + 16, q, dst + 128);
          packK4Scales(ggml, src, s, sDst);
          break;
        case "q6_k":
          packQ6KQuants(ggml, src, q, dst);
          s.set(ggml.subarray(src + 192, src + 208), sDst);
          d[dIndex] = half(208);
          break;
        case "q3_k":
          packQ3KQuants(ggml, src, q, dst);
          for (let k = 0; k < 16; k++) s[sDst + k] = (q3kScale(ggml, src + 96, k) - 32) & 0xff;
          d[dIndex] = half(108);
          break;
        case "iq4_xs":
          copyQ(8, 128);
          for (let j = 0; j < 8; j++) s[sDst + j] = (iq4xsScale(ggml, src, j) - 32) & 0xff;
          d[dIndex] = half(0);
          break;
      }
    }
  }
  return { q, s, d, h };
}

/** Q4_K's and Q5_K's S vec4: the 12 packed scale bytes, then d and dmin. */
function packK4Scales(ggml: Uint8Array, src: number, s: Uint8Array, sDst: number): void {
  s.set(ggml.subarray(src + 4, src + 16), sDst);
  s.set(ggml.subarray(src, src + 4), sDst + 12);
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

/** Q5_K's qh (bit c of byte l: value 32c + l) as one u32 per chunk c (bit l). */
function packQ5KHighBits(ggml: Uint8Array, qh: number, out: Uint8Array, dst: number): void {
  const words = new DataView(out.buffer, out.byteOffset + dst, 32);
  for (let c = 0; c < 8; c++) {
    let w = 0;
    for (let l = 0; l < 32; l++) w |= ((ggml[qh + l] >> c) & 1) << l;
    words.setUint32(4 * c, w >>> 0, true);
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

/** Q3_K's quants per chunk c: two u32 of 2-bit low parts at 8c, one u32 of high bits at 64 + 4c. */
function packQ3KQuants(ggml: Uint8Array, src: number, out: Uint8Array, dst: number): void {
  const words = new DataView(out.buffer, out.byteOffset + dst, 96);
  for (let c = 0; c < 8; c++) {
    let high = 0;
    for (let half = 0; half < 2; half++) {
      let low = 0;
      for (let j = 0; j < 16; j++) {
        const q = q3kQuant(ggml, src, 32 * c + 16 * half + j);
        low |= (q & 3) << (2 * j);
        high |= (q >> 2) << (16 * half + j);
      }
      words.setUint32(8 * c + 4 * half, low >>> 0, true);
    }
    words.setUint32(64 + 4 * c, high >>> 0, true);
  }
}

/** A whole part's bytes in one array (tests and small matrices). */
export function packQuantPart(type: QuantType, ggml: Uint8Array, rows: number, cols: number) {
  const layout = quantLayout(type, rows, cols);
  const out = new Uint8Array(layout.bytes);
  const { q, s, d, h } = packQuantRows(type, ggml, rows, cols);
  out.set(q, 0);
  out.set(s, layout.sOffset);
  out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), layout.dOffset);
  out.set(new Uint8Array(h.buffer, h.byteOffset, h.byteLength), layout.hOffset);
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
  const { q, s, d, h } = packQuantRows(type, ggml, rows, layout.cols);
  writeBytes(gpu, buffer, baseOffset + rowStart * blocks * REGIONS[type].qVec4 * 16, q);
  if (s.byteLength) {
    writeBytes(gpu, buffer, baseOffset + layout.sOffset + rowStart * blocks * 16, s);
  }
  if (d.byteLength) {
    const dRow = dWordsPerRow(type, blocks) * 4;
    writeBytes(gpu, buffer, baseOffset + layout.dOffset + rowStart * dRow, d);
  }
  if (h.byteLength) {
    writeBytes(gpu, buffer, baseOffset + layout.hOffset + rowStart * blocks * 4, h);
  }
}
