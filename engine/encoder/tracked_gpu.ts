// A view of the device that records every buffer and texture made through it, so that a model closes every
// byte it opened (the kernels' own parameter uniforms included) and a test can see that it did.
// The view is a Proxy over the real device: pipelines, bind groups and the queue are the real
// ones; only createBuffer and createTexture are watched (and each one's destroy).

import type { Gpu } from "../gpu/device.ts";

export interface TrackedGpu {
  gpu: Gpu;
  /** Buffers and textures made through `gpu` and not yet destroyed, and their bytes. */
  live(): { buffers: number; bytes: number };
  /** Destroys every buffer and texture made through `gpu`. */
  destroyAll(): void;
}

/** Bytes of an rgba32uint weight texture (the only kind an encoder makes). */
function textureBytes(t: GPUTexture): number {
  return t.width * t.height * 16;
}

export function trackGpu(gpu: Gpu): TrackedGpu {
  const buffers = new Set<GPUBuffer>();
  const textures = new Set<GPUTexture>();
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
      if (key === "createTexture") {
        return (descriptor: GPUTextureDescriptor) => {
          const texture = target.createTexture(descriptor);
          textures.add(texture);
          const destroy = texture.destroy.bind(texture);
          texture.destroy = () => {
            textures.delete(texture);
            destroy();
          };
          return texture;
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
      for (const t of textures) bytes += textureBytes(t);
      return { buffers: buffers.size + textures.size, bytes };
    },
    destroyAll() {
      for (const b of buffers) b.destroy();
      for (const t of textures) t.destroy();
      buffers.clear();
      textures.clear();
    },
  };
}
