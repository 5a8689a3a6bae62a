// Weights held in a texture instead of a storage buffer: the same bytes, read by texel fetches.
//
// On llvmpipe (Mesa's software adapter) every storage-buffer load compiles to a stalled stack store
// and reload, while a texel fetch is a vectorized load: the same bytes read 6-13x faster. So a part
// of a matrix may live in an rgba32uint texture whose texels are its 16-byte words in order, row
// after row of TEXTURE_WIDTH texels (4096: 64 KiB rows, like the read roofline kernel). A kernel
// reads word i at (i % TEXTURE_WIDTH, i / TEXTURE_WIDTH); textureWordsSource() swaps a shader's
// storage declaration of its words for that texture, so one WGSL file serves both layouts.

import type { Gpu } from "./device.ts";

/** Texels per texture row: a power of two, so the shader's division is a shift. */
export const TEXTURE_WIDTH = 4096;
const TEXEL_BYTES = 16;

/** Where a matrix part's bytes live: a storage buffer (the default) or a texture. */
export type WeightLayout = "storage" | "texture";

/** Texels `bytes` occupy (rounded up to whole 16-byte words). */
export function texelsOf(bytes: number): number {
  return Math.ceil(bytes / TEXEL_BYTES);
}

/** The most texels one weight texture may hold on this device. */
export function maxTexels(gpu: Gpu): number {
  return TEXTURE_WIDTH * gpu.device.limits.maxTextureDimension2D;
}

/** An rgba32uint texture large enough for `bytes`, zero-filled. */
export function createWeightTexture(gpu: Gpu, bytes: number, label?: string): GPUTexture {
  const texels = Math.max(1, texelsOf(bytes));
  if (texels > maxTexels(gpu)) {
    throw new RangeError(`${bytes} B exceed one weight texture (${maxTexels(gpu)} texels)`);
  }
  return gpu.device.createTexture({
    size: [TEXTURE_WIDTH, Math.ceil(texels / TEXTURE_WIDTH)],
    format: "rgba32uint",
    // COPY_SRC: so tests (and a debugger) can read the words back.
    usage: GPUTextureUsage.TEXTURE_BINDING | GPUTextureUsage.COPY_DST | GPUTextureUsage.COPY_SRC,
    label,
  });
}

/**
 * Writes `data` at byte `offset` of the texture's word order, as writeBytes does for a buffer. The
 * offset must fall on a word; a tail shorter than a word is zero-padded.
 */
export function writeTextureBytes(
  gpu: Gpu,
  texture: GPUTexture,
  offset: number,
  data: ArrayBufferView,
): void {
  if (offset % TEXEL_BYTES !== 0) {
    throw new RangeError(`texture write at byte ${offset}: not on a 16-byte word`);
  }
  let bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  if (bytes.byteLength % TEXEL_BYTES !== 0) {
    const padded = new Uint8Array(texelsOf(bytes.byteLength) * TEXEL_BYTES);
    padded.set(bytes);
    bytes = padded;
  }
  const queue = gpu.device.queue;
  let texel = offset / TEXEL_BYTES;
  let done = 0;
  const total = bytes.byteLength / TEXEL_BYTES;
  while (done < total) {
    const x = texel % TEXTURE_WIDTH, y = Math.floor(texel / TEXTURE_WIDTH);
    // A partial row (the first or the last), or as many whole rows as remain.
    const left = total - done;
    const whole = x === 0 ? Math.floor(left / TEXTURE_WIDTH) : 0;
    const [width, height] = whole > 0 ? [TEXTURE_WIDTH, whole] : [
      Math.min(TEXTURE_WIDTH - x, left),
      1,
    ];
    const count = width * height;
    queue.writeTexture(
      { texture, origin: [x, y] },
      bytes.subarray(done * TEXEL_BYTES, (done + count) * TEXEL_BYTES),
      { bytesPerRow: TEXTURE_WIDTH * TEXEL_BYTES },
      [width, height],
    );
    done += count;
    texel += count;
  }
}

/**
 * `src` with the storage declaration `@group(0) @binding(B) var<storage, read> NAME:
 * array<vec4<u32>>;` (or `array<u32>`) replaced by a texture at the same binding. The shader must
 * read NAME only through `NAME_word(i)`, defined on the line after the declaration (`{ return
 * NAME[i]; }`), which becomes a texel fetch: word i of a vec4 array is texel i, of a u32 array
 * component i % 4 of texel i / 4, so the same texture serves both views of a buffer.
 */
export function textureWordsSource(src: string, name: string): string {
  for (const [element, texel] of [["vec4<u32>", "i"], ["u32", "i / 4u"]]) {
    const declaration = new RegExp(
      `(@group\\(0\\) @binding\\(\\d+\\)) var<storage, read> ${name}: array<${element}>;\\n` +
        `fn ${name}_word\\(i: u32\\) -> ${element} \\{ return ${name}\\[i\\]; \\}`,
    );
    if (!declaration.test(src)) continue;
    const fetch =
      `textureLoad(${name}_texture, vec2<u32>(t % ${TEXTURE_WIDTH}u, t / ${TEXTURE_WIDTH}u), 0)`;
    return src.replace(
      declaration,
      `$1 var ${name}_texture: texture_2d<u32>;\n` +
        `fn ${name}_word(i: u32) -> ${element} {\n` +
        `  let t = ${texel};\n` +
        `  return ${fetch}${element === "u32" ? "[i % 4u]" : ""};\n` +
        `}`,
    );
  }
  throw new Error(`shader: storage words "${name}" not found`);
}
