// One GPU device per dtype path for the whole test run (device creation is slow on llvmpipe).

import { type Gpu, openGpu } from "../../engine/gpu/device.ts";
import { createStorage, writeBytes } from "../../engine/gpu/buffers.ts";
import { POISON_F32 } from "./compare.ts";

const opened = new Map<string, Promise<Gpu>>();

/** The f16 path when the adapter has shader-f16, else f32. */
export function testGpu(): Promise<Gpu> {
  return cached("default", () => openGpu());
}

/** Always the f32 path. */
export function testGpuF32(): Promise<Gpu> {
  return cached("f32", () => openGpu({ forceF32: true }));
}

/** Both paths that this adapter supports, labelled, for tests that loop over dtypes. */
export async function testGpus(): Promise<{ label: string; gpu: Gpu }[]> {
  const gpus = [{ label: "f32", gpu: await testGpuF32() }];
  const def = await testGpu();
  if (def.f16) gpus.push({ label: "f16", gpu: def });
  return gpus;
}

function cached(key: string, open: () => Promise<Gpu>): Promise<Gpu> {
  let p = opened.get(key);
  if (!p) {
    opened.set(key, p = open());
    p.then((gpu) => devices.push(gpu.device), () => {});
  }
  return p;
}

// Destroy the shared devices before the process exits rather than leaving them to exit-time
// finalizers: a cold-cache run once crashed at exit ("double free or corruption") after every
// test had passed.
const devices: GPUDevice[] = [];
globalThis.addEventListener("unload", () => {
  for (const d of devices.splice(0)) d.destroy();
});

/** A storage buffer of `count` f32 slots, all NaN, so unwritten outputs fail comparisons. */
export function poisonedF32(gpu: Gpu, count: number): GPUBuffer {
  const buffer = createStorage(gpu, count * 4);
  writeBytes(gpu, buffer, 0, new Uint32Array(count).fill(POISON_F32));
  return buffer;
}
