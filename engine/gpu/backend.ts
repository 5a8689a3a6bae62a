// Which of wgpu's backends Deno's WebGPU may open, chosen before the first adapter request.
//
// Left to itself on Linux, wgpu starts every backend it finds: Vulkan and, beside it, GL through
// EGL, even when the adapter it returns is Vulkan's. Loading libEGL for nothing is not free: at
// process exit its destructor frees memory while other threads tear down, and about one run in 40
// that opened two devices died after every test had passed ("malloc_consolidate(): unaligned
// fastbin chunk detected", "corrupted size vs. prev_size"; a gdb trace had the main thread in
// libEGL's destructor under exit() and a tokio worker freeing its malloc cache in the same arena).
// With one backend, EGL is never loaded beside Vulkan. So: Vulkan where a Vulkan driver is
// installed, GL (llvmpipe, no shader-f16) where none is, and whatever DENO_WEBGPU_BACKEND already
// says where it is set.

import { existsSync } from "node:fs";

/** Where the Vulkan loader looks for driver manifests when no variable overrides it. */
const ICD_DIRS = ["/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/etc/vulkan/icd.d"];

/** The backend to ask for on this machine (Linux only; elsewhere wgpu's choice stands). */
export function webgpuBackend(env = Deno.env.toObject()): "vulkan" | "gl" | undefined {
  if (env.DENO_WEBGPU_BACKEND || Deno.build.os !== "linux") return undefined;
  return vulkanDriverInstalled(env) ? "vulkan" : "gl";
}

/** Whether the Vulkan loader would find a driver manifest (VK_DRIVER_FILES / VK_ICD_FILENAMES first). */
export function vulkanDriverInstalled(
  env: Record<string, string | undefined>,
  standardDirs: readonly string[] = ICD_DIRS,
): boolean {
  const listed = env.VK_DRIVER_FILES ?? env.VK_ICD_FILENAMES;
  if (listed !== undefined) return listed.split(":").some((f) => f !== "" && existsSync(f));
  const dataDirs = (env.XDG_DATA_DIRS ?? "").split(":").filter((d) => d !== "")
    .map((d) => `${d}/vulkan/icd.d`);
  return [...standardDirs, ...dataDirs].some((dir) => {
    try {
      for (const entry of Deno.readDirSync(dir)) if (entry.name.endsWith(".json")) return true;
    } catch { /* no such directory */ }
    return false;
  });
}

/** Sets DENO_WEBGPU_BACKEND for this process where it is unset; Deno reads it at first use. */
export function chooseWebgpuBackend(): void {
  const backend = webgpuBackend();
  if (backend) Deno.env.set("DENO_WEBGPU_BACKEND", backend);
}
