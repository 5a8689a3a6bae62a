// Kernel benchmark: the copy and read-only kernels' bandwidth (storage and texture) as baselines,
// then the matmul on SmolLM2-135M's shapes — decode (1, 4, 16 rows) and prefill (256 rows) — and
// every matrix-vector kernel (the weight dtype's and each quantized format's), each with its weights
// in a storage buffer and in a texture (--matmul-kernel), against the read rooflines, as Markdown.
//
// Each figure is the median over trials of the slope between submits of n and 3n dispatches, so
// the ~11 ms submit round trip cancels out. Wall-clock: other processes on the CPU slow it down.
// The matvec table is measured into numbers (matvecMeasurement) and formatted apart (matvecTable),
// as bench speed uses it.

import type { BoundKernel, Gpu } from "../engine/engine.ts";
import {
  bindCopy,
  bindIntMatmul,
  bindMatmul,
  bindQuantizeX,
  bindQuantMatmul,
  bindReadSum,
  bindReadSumTexture,
  createMatmulX,
  createQuantizedX,
  createReadSumTexture,
  createStorage,
  createWeightTexture,
  destroyQuantizedX,
  hasIntDot,
  type MatmulMode,
  QUANT_FORMATS,
  QUANT_TYPES,
  quantLayout,
  randomHalves,
  READ_SUM_TEXTURE_WIDTH,
  readBack,
  readSumTextureTotals,
  readSumTotals,
  writeBytes,
  writeTextureBytes,
} from "../engine/bench_api.ts";

export const USAGE = `usage: deno task bench kernels [--only all|matvec] [--shape NAME]
                                [--formats f16,q4_0,...]

The copy kernel's and a read-only kernel's bandwidth, then the matmul on SmolLM2-135M's shapes
(decode at 1, 4 and 16 rows, prefill at 256 rows), then every matrix-vector kernel at one row (the
weight dtype's and each GGUF block format's where K is whole blocks), with its weights in a storage
buffer and in a texture, as GB/s of weight bytes read and as a share of the read rooflines (the
same bytes summed from a storage buffer and from a texture).
  --only matvec   only the matrix-vector table (skips the bandwidth and batch tables)
  --shape NAME    only shapes whose name starts with NAME (e.g. o_proj, "LM head")
  --formats LIST  only these formats (the weight dtype's is f16 or f32)`;

export interface KernelBenchOptions {
  only?: "all" | "matvec";
  shape?: string;
  formats?: string[];
}

interface Shape {
  name: string;
  K: number;
  N: number;
  mode: MatmulMode;
  /** The LM head only ever sees the gathered last rows, so it has no prefill figure. */
  prefill: boolean;
}

const SHAPES: Shape[] = [
  { name: "o_proj / square", K: 576, N: 576, mode: "add", prefill: true },
  { name: "qkv (9+3+3 heads × 64)", K: 576, N: 960, mode: "store", prefill: true },
  { name: "gate+up, SwiGLU → 1536", K: 576, N: 1536, mode: "glu", prefill: true },
  { name: "down_proj", K: 1536, N: 576, mode: "add", prefill: true },
  { name: "LM head", K: 576, N: 49152, mode: "store", prefill: false },
];
const DECODE_ROWS = [1, 4, 16];
const PREFILL_ROWS = 256;
const COPY_BYTES = 32 << 20;
/** Submits are grown until one takes this long, then timed at n and 3n dispatches. */
const MIN_SUBMIT_MS = 60;
const TRIALS = 7;

export async function benchKernels(gpu: Gpu, options: KernelBenchOptions = {}): Promise<string> {
  const started = performance.now();
  const load = Deno.loadavg().map((v) => v.toFixed(2)).join(", ");
  const shapes = SHAPES.filter((s) => !options.shape || s.name.startsWith(options.shape));
  const formats = MATVEC_FORMATS(gpu).filter((f) =>
    !options.formats || options.formats.includes(f)
  );
  if (options.only === "matvec") {
    return [
      `## Matrix-vector kernels — ${gpu.adapterName}, ${gpu.f16 ? "f16" : "f32"} weights`,
      "",
      ...matvecTable(await measureMatvecs(gpu, shapes, formats, ROOFLINE_ROUNDS)),
      "",
      `_Load average at start: ${load}; ${
        ((performance.now() - started) / 1000).toFixed(0)
      } s including first-use shader compilation._`,
    ].join("\n");
  }

  const src = createStorage(gpu, COPY_BYTES);
  const dst = createStorage(gpu, COPY_BYTES);
  const copyS = await secondsPerDispatch(gpu, bindCopy(gpu, { src, dst, bytes: COPY_BYTES }), 1);
  const copyGBs = COPY_BYTES / copyS / 1e9;
  const totals = createStorage(gpu, readSumTotals(COPY_BYTES) * 4);
  const readKernel = bindReadSum(gpu, { src, bytes: COPY_BYTES, totals });
  const readGBs = COPY_BYTES / (await secondsPerDispatch(gpu, readKernel, 1)) / 1e9;
  src.destroy();
  dst.destroy();
  totals.destroy();
  const texGBs = await textureReadGBs(gpu);

  const wBytesPer = gpu.f16 ? 2 : 4;
  const rowsNeeded = Math.max(PREFILL_ROWS, ...DECODE_ROWS);
  const lines: string[] = [];
  for (const shape of shapes) {
    const weightRows = (shape.mode === "glu" ? 2 : 1) * shape.N;
    const wBytes = weightRows * shape.K * wBytesPer;
    const w = randomWeights(gpu, weightRows * shape.K);
    const x = createStorage(gpu, rowsNeeded * shape.K * 4);
    const y = createStorage(gpu, rowsNeeded * shape.N * 4);
    const kernel = bindMatmul(gpu, { x, w, y, K: shape.K, N: shape.N, mode: shape.mode });
    const t: Record<number, number> = {};
    for (const rows of DECODE_ROWS) t[rows] = await secondsPerDispatch(gpu, kernel, rows);
    const gbs = wBytes / t[1] / 1e9;
    const cells = [
      shape.name,
      `${shape.K}×${shape.N}${shape.mode === "glu" ? "×2" : ""} ${shape.mode}`,
      `${(wBytes / 2 ** 20).toFixed(2)}`,
      `${(t[1] * 1e6).toFixed(0)}`,
      `${gbs.toFixed(2)}`,
      `${((100 * gbs) / copyGBs).toFixed(0)}%`,
      ...DECODE_ROWS.slice(1).map((rows) => `${((rows * t[1]) / t[rows]).toFixed(2)}×`),
    ];
    if (shape.prefill) {
      const tp = await secondsPerDispatch(gpu, kernel, PREFILL_ROWS);
      const flops = 2 * PREFILL_ROWS * weightRows * shape.K;
      const effective = (PREFILL_ROWS * wBytes) / tp / 1e9;
      cells.push(
        `${(flops / tp / 1e9).toFixed(2)}`,
        `${effective.toFixed(1)} (${(effective / copyGBs).toFixed(1)}×)`,
      );
    } else {
      cells.push("–", "–");
    }
    lines.push(`| ${cells.join(" | ")} |`);
    w.destroy();
    x.destroy();
    y.destroy();
  }
  const matvecs = await measureMatvecs(gpu, shapes, formats, ROOFLINE_ROUNDS);

  return [
    `## Kernels — ${gpu.adapterName}, ${gpu.f16 ? "f16" : "f32"} weights`,
    "",
    `Copy kernel (vec4<u32>, ${COPY_BYTES >> 20} MiB): **${copyGBs.toFixed(2)} GB/s** copied ` +
    `(${(2 * copyGBs).toFixed(2)} GB/s read + written). Read-only kernel (u32 sum, same bytes): ` +
    `**${readGBs.toFixed(2)} GB/s** from a storage buffer, **${texGBs.toFixed(2)} GB/s** from a ` +
    `texture (texel fetches). Load average at start: ${load}.`,
    "",
    "| shape | K×N | weights MiB | rows=1 µs | rows=1 GB/s | % of copy | " +
    DECODE_ROWS.slice(1).map((r) => `rows=${r} speed-up`).join(" | ") +
    ` | prefill ${PREFILL_ROWS} GFLOP/s | prefill effective GB/s (× copy) |`,
    "|" + " --- |".repeat(8 + DECODE_ROWS.length - 1),
    ...lines,
    "",
    "GB/s: weight bytes read per second (rows=1 reads every weight once per token). Speed-up: " +
    "tokens/s at that batch ÷ tokens/s at one row. Prefill effective GB/s: rows × weight bytes ÷ " +
    "time, the bandwidth a row-at-a-time matvec would need to keep up. The small shapes' weights " +
    "fit in the CPU's L2/L3 caches; the LM head's do not.",
    "",
    ...matvecTable(matvecs),
    "",
    `_${
      ((performance.now() - started) / 1000).toFixed(0)
    } s including first-use shader compilation._`,
  ].join("\n");
}

const MATVEC_FORMATS = (gpu: Gpu): string[] => [gpu.f16 ? "f16" : "f32", ...QUANT_TYPES];

/** The matrix-vector table of a measurement: its heading, columns, rows and how to read a cell. */
export function matvecTable(r: MatvecResult): string[] {
  const gbs = (xs: number[]) => median(xs);
  const share = (k: number[], roof: number[]) =>
    `${(100 * median(k.map((v, i) => v / roof[i]))).toFixed(0)}%`;
  const lines = r.rows.map((row) => {
    const cells = row.cells.map((c) => {
      if (!c) return "–";
      const figures = (k: number[]) =>
        `${(c.bytes / gbs(k) / 1e3).toFixed(0)} / ${gbs(k).toFixed(2)} / ${
          share(k, c.storageRoofline)
        } / ${share(k, c.textureRoofline)}`;
      return `S ${figures(c.storageKernel)}<br>T ${figures(c.textureKernel)}` +
        (c.intKernel ? `<br>I ${figures(c.intKernel)}` : "");
    });
    return `| ${[row.shape, row.dims, ...cells].join(" | ")} |`;
  });
  return [
    "### Matrix-vector kernels (rows=1) against the read rooflines",
    "",
    `| shape | K×N | ${r.formats.join(" | ")} |`,
    "|" + " --- |".repeat(2 + r.formats.length),
    ...lines,
    "",
    "Each cell, for the kernel reading its weights from a storage buffer (S) and from a texture " +
    "holding the same bytes (T, --matmul-kernel texture), and for a quantized format the " +
    "integer-dot pair, quantize_x then matmul_int on the storage buffer (I, --quant-kernels int, " +
    "where WGSL has packed_4x8_integer_dot_product): µs per call / GB/s of weight bytes read " +
    "(the format's bytes, scales included) / % of the storage read roofline / % of the texture " +
    "read roofline, each roofline the read-only kernel summing the same bytes (the texture's " +
    `rounded up to 64 KiB rows), measured in ${ROOFLINE_ROUNDS} rounds interleaved with the ` +
    "matvecs; shares are medians of the per-round ratios. On llvmpipe a storage load costs a " +
    "stalled store-to-load forward per 4 bytes, a texel fetch does not. x is uniform-capable, as " +
    "the engine's activations are (the quantized kernels read it through a uniform binding). " +
    "q4_k and q6_k need K in whole blocks of 256 (GGUF files keep other formats for such " +
    "matrices): – where K is not.",
  ];
}

/** One format on one shape: GB/s of weight bytes read, one figure per round in round order. */
export interface MatvecCell {
  /** Weight bytes one call reads (the format's, scales included). */
  bytes: number;
  /** The kernel with its weights in a storage buffer. */
  storageKernel: number[];
  /** The kernel with its weights in a texture. */
  textureKernel: number[];
  /** The read-only kernel summing as many bytes from a storage buffer. */
  storageRoofline: number[];
  /** The read-only kernel summing as many bytes (rounded up to whole rows) from a texture. */
  textureRoofline: number[];
  /**
   * A quantized format's integer-dot pair (quantize_x, then matmul_int on the storage buffer) in
   * GB/s of the same weight bytes; absent for float formats or without the WGSL feature.
   */
  intKernel?: number[];
}

/** The matrix-vector measurement: a row per shape, a cell per format (null: K not whole blocks). */
export interface MatvecResult {
  adapter: string;
  f16: boolean;
  formats: string[];
  rows: { shape: string; dims: string; cells: (MatvecCell | null)[] }[];
}

/** The matvec measurement alone, as `bench kernels --only matvec` and `bench speed` run it. */
export function matvecMeasurement(
  gpu: Gpu,
  options: { shape?: string; formats?: string[]; rounds?: number } = {},
): Promise<MatvecResult> {
  const shapes = SHAPES.filter((s) => !options.shape || s.name.startsWith(options.shape));
  const formats = MATVEC_FORMATS(gpu).filter((f) =>
    !options.formats || options.formats.includes(f)
  );
  return measureMatvecs(gpu, shapes, formats, options.rounds ?? ROOFLINE_ROUNDS);
}

/**
 * One table row per shape: each format's matrix-vector kernel at one row, weights in storage and in
 * a texture, against the two read-only kernels summing as many bytes, measured in ROOFLINE_ROUNDS
 * rounds in a rotating order so that drifting load hits all four alike; the shares are medians of
 * the per-round ratios.
 */
async function measureMatvecs(
  gpu: Gpu,
  shapes: Shape[],
  formats: string[],
  rounds: number,
): Promise<MatvecResult> {
  const rows: MatvecResult["rows"] = [];
  for (const shape of shapes) {
    const { K, N, mode } = shape;
    const weightRows = (mode === "glu" ? 2 : 1) * N;
    const x = createMatmulX(gpu, K * 4, "x");
    const y = createStorage(gpu, N * 4);
    const cells: (MatvecCell | null)[] = [];
    for (const format of formats) {
      const quant = QUANT_TYPES.find((t) => t === format);
      if (quant && K % QUANT_FORMATS[quant].blockElems !== 0) {
        cells.push(null);
        continue;
      }
      const bytes = quant
        ? quantLayout(quant, weightRows, K).bytes
        : weightRows * K * (gpu.f16 ? 2 : 4);
      const w = quant ? randomHalvesBuffer(gpu, bytes) : randomWeights(gpu, weightRows * K);
      const wTexture = await textureCopy(gpu, w, bytes);
      const kernel = (weights: GPUBuffer | GPUTexture) =>
        quant
          ? bindQuantMatmul(gpu, { x, w: weights, y, K, N, mode, type: quant })
          : bindMatmul(gpu, { x, w: weights, y, K, N, mode });
      const storage = readOnly(gpu, Math.ceil(bytes / 16) * 16, false);
      const texture = readOnly(gpu, bytes, true);
      const runs: [BoundKernel, number][] = [
        [kernel(w), bytes],
        [kernel(wTexture), bytes],
        storage.run,
        texture.run,
      ];
      const xq = quant && hasIntDot() ? createQuantizedX(gpu, K, "x int8") : null;
      if (quant && xq) {
        const quantize = bindQuantizeX(gpu, { x, out: xq, K });
        const int = bindIntMatmul(gpu, { x: xq, w, y, K, N, mode, type: quant });
        const pair: BoundKernel = {
          encode(pass, rows) {
            quantize.encode(pass, rows);
            int.encode(pass, rows);
          },
        };
        runs.push([pair, bytes]);
      }
      const gbs: number[][] = runs.map(() => []);
      for (let round = 0; round < rounds; round++) {
        for (let j = 0; j < runs.length; j++) {
          const i = (j + round) % runs.length;
          gbs[i].push(runs[i][1] / (await secondsPerDispatch(gpu, runs[i][0], 1)) / 1e9);
        }
      }
      cells.push({
        bytes,
        storageKernel: gbs[0],
        textureKernel: gbs[1],
        storageRoofline: gbs[2],
        textureRoofline: gbs[3],
        ...(xq ? { intKernel: gbs[4] } : {}),
      });
      if (xq) destroyQuantizedX(xq);
      w.destroy();
      wTexture.destroy();
      storage.destroy();
      texture.destroy();
    }
    rows.push({ shape: shape.name, dims: `${K}×${N}${mode === "glu" ? "×2" : ""} ${mode}`, cells });
    x.destroy();
    y.destroy();
  }
  return { adapter: gpu.adapterName, f16: gpu.f16, formats, rows };
}

const ROOFLINE_ROUNDS = 3;

/**
 * A read-only sum of `bytes` random bytes, from a storage buffer or from a texture (rounded up to
 * the texture's 64 KiB rows), and the bytes it reads.
 */
function readOnly(gpu: Gpu, bytes: number, texture: boolean) {
  const totalsFor = (n: number) => createStorage(gpu, n * 4);
  if (!texture) {
    const src = randomHalvesBuffer(gpu, bytes);
    const totals = totalsFor(readSumTotals(bytes));
    return {
      run: [bindReadSum(gpu, { src, bytes, totals }), bytes] as [BoundKernel, number],
      destroy: () => (src.destroy(), totals.destroy()),
    };
  }
  const rowBytes = READ_SUM_TEXTURE_WIDTH * 16;
  const rounded = Math.ceil(bytes / rowBytes) * rowBytes;
  const tex = randomTexture(gpu, rounded);
  const totals = totalsFor(readSumTextureTotals(rounded));
  return {
    run: [bindReadSumTexture(gpu, { texture: tex, totals }), rounded] as [BoundKernel, number],
    destroy: () => (tex.destroy(), totals.destroy()),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** GB/s of the read-only sum over COPY_BYTES of random texels. */
async function textureReadGBs(gpu: Gpu): Promise<number> {
  const texture = randomTexture(gpu, COPY_BYTES);
  const totals = createStorage(gpu, readSumTextureTotals(COPY_BYTES) * 4);
  const s = await secondsPerDispatch(gpu, bindReadSumTexture(gpu, { texture, totals }), 1);
  texture.destroy();
  totals.destroy();
  return COPY_BYTES / s / 1e9;
}

/** A read-sum texture of `bytes` (whole 64 KiB rows) of random words. */
function randomTexture(gpu: Gpu, bytes: number): GPUTexture {
  const texture = createReadSumTexture(gpu, bytes);
  const rowBytes = READ_SUM_TEXTURE_WIDTH * 16;
  const height = bytes / rowBytes;
  const rows = Math.min(64, height);
  const chunk = new Uint32Array((rows * rowBytes) / 4);
  let state = 0x9e3779b9;
  for (let y = 0; y < height; y += rows) {
    const n = Math.min(rows, height - y);
    for (let i = 0; i < chunk.length; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      chunk[i] = state >>> 0;
    }
    gpu.device.queue.writeTexture({ texture, origin: [0, y] }, chunk, { bytesPerRow: rowBytes }, [
      READ_SUM_TEXTURE_WIDTH,
      n,
    ]);
  }
  return texture;
}

/** A weight texture holding the first `bytes` of `buffer` (read back, then written). */
async function textureCopy(gpu: Gpu, buffer: GPUBuffer, bytes: number): Promise<GPUTexture> {
  const texture = createWeightTexture(gpu, bytes);
  writeTextureBytes(gpu, texture, 0, new Uint8Array(await readBack(gpu, buffer, bytes)));
  return texture;
}

/** Median seconds per dispatch of `kernel` at `rows`, by the slope between n and 3n dispatches. */
async function secondsPerDispatch(gpu: Gpu, kernel: BoundKernel, rows: number): Promise<number> {
  const submit = async (n: number): Promise<number> => {
    const encoder = gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (let i = 0; i < n; i++) kernel.encode(pass, rows);
    pass.end();
    const commands = encoder.finish();
    const t0 = performance.now();
    gpu.device.queue.submit([commands]);
    await gpu.device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  };
  await submit(1); // first use compiles the shader
  let n = 1;
  while ((await submit(n)) < MIN_SUBMIT_MS && n < 4096) n *= 2;
  const slopes: number[] = [];
  for (let i = 0; i < TRIALS; i++) {
    const one = await submit(n);
    const three = await submit(3 * n);
    slopes.push((three - one) / (2 * n) / 1000);
  }
  slopes.sort((a, b) => a - b);
  return slopes[Math.floor(slopes.length / 2)];
}

/**
 * `bytes` of random f16 halves in ±[0.5, 1): valid quantized blocks of every format (any bits are
 * valid quants; every scale field is a finite f16), with no zeros to flatter a kernel.
 */
function randomHalvesBuffer(gpu: Gpu, bytes: number): GPUBuffer {
  const buffer = createStorage(gpu, bytes);
  writeBytes(gpu, buffer, 0, randomHalves(Math.ceil(bytes / 4) * 2));
  return buffer;
}

/** A weight buffer of `count` values in [-1, 1): random, so no fast path for zeros can flatter it. */
function randomWeights(gpu: Gpu, count: number): GPUBuffer {
  const buffer = createStorage(gpu, count * (gpu.f16 ? 2 : 4));
  let state = 0x9e3779b9;
  const next16 = () => {
    // xorshift32: plenty for filler data.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state & 0xffff;
  };
  const chunk = 1 << 20;
  for (let start = 0; start < count; start += chunk) {
    const n = Math.min(chunk, count - start);
    if (gpu.f16) {
      // Sign, exponent 0b01110 (0.5..1), random mantissa: finite, normal halves.
      const bits = Uint16Array.from({ length: n }, () => (next16() & 0x83ff) | 0x3800);
      writeBytes(gpu, buffer, start * 2, bits);
    } else {
      const values = Float32Array.from({ length: n }, () => next16() / 32768 - 1);
      writeBytes(gpu, buffer, start * 4, values);
    }
  }
  return buffer;
}
