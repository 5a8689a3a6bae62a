// A view of the device that records every buffer made through it, so that a model closes every
// byte it opened (the kernels' own parameter uniforms included) and a test can see that it did.
// The view is a Proxy over the real device: pipelines, bind groups and the queue are the real
// ones; only createBuffer is watched (and each buffer's destroy).

import type { Gpu } from "../gpu/device.ts";

export interface TrackedGpu {
  gpu: Gpu;
  /** Buffers made through `gpu` and not yet destroyed, and their bytes. */
  live(): { buffers: number; bytes: number };
  /** Destroys every buffer made through `gpu`. */
  destroyAll(): void;
}

export function trackGpu(gpu: Gpu): TrackedGpu {
  const buffers = new Set<GPUBuffer>();
  const real = gpu.device;
  const device = new Proxy(real, {
    get(target, key) {
      if (key === "createBuffer") {
        return (descriptor: GPUBufferDescriptor) => {
          const buffer = target.createBuffer(descriptor);
          buffers.add(buffer);
          // A buffer destroyed by its user (a readback's staging) stops counting at once.
          const destroy = buffer.destroy.bind(buffer);
          buffer.destroy = () => {
            buffers.delete(buffer);
            destroy();
          };
          return buffer;
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    gpu: { ...gpu, device },
    live() {
      let bytes = 0;
      for (const b of buffers) bytes += b.size;
      return { buffers: buffers.size, bytes };
    },
    destroyAll() {
      for (const b of buffers) b.destroy();
      buffers.clear();
    },
  };
}
