// Which wgpu backend Sluice asks Deno for (engine/gpu/backend.ts): one, never Vulkan and GL
// together, so libEGL is not loaded beside a Vulkan adapter (its teardown at exit corrupted the heap
// about one run in 40). The process-exit check itself is the 30-run loop in bench/results.

import { vulkanDriverInstalled, webgpuBackend } from "../../../engine/gpu/backend.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("webgpu backend: Vulkan where a driver manifest is found, else GL; an explicit choice stands", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-icd-" });
  try {
    const icd = `${dir}/lvp_icd.x86_64.json`;
    await Deno.writeTextFile(icd, "{}");
    const linux = Deno.build.os === "linux";
    assertEquals(
      webgpuBackend({ VK_ICD_FILENAMES: icd }),
      linux ? "vulkan" : undefined,
    );
    assertEquals(
      webgpuBackend({ VK_DRIVER_FILES: `/nonexistent:${icd}` }),
      linux ? "vulkan" : undefined,
    );
    // bench startup hides the driver this way to measure the GL adapter.
    assertEquals(
      webgpuBackend({ VK_ICD_FILENAMES: "/nonexistent" }),
      linux ? "gl" : undefined,
    );
    assertEquals(
      webgpuBackend({ VK_ICD_FILENAMES: icd, DENO_WEBGPU_BACKEND: "gl" }),
      undefined,
    );
    // VK_DRIVER_FILES (the newer name) wins over VK_ICD_FILENAMES, as in the loader.
    assertEquals(
      vulkanDriverInstalled({
        VK_DRIVER_FILES: "/nonexistent",
        VK_ICD_FILENAMES: icd,
      }),
      false,
    );
    // The XDG data directories' vulkan/icd.d count too.
    await Deno.mkdir(`${dir}/data/vulkan/icd.d`, { recursive: true });
    await Deno.writeTextFile(`${dir}/data/vulkan/icd.d/x.json`, "{}");
    assertEquals(
      vulkanDriverInstalled({ XDG_DATA_DIRS: `/nonexistent:${dir}/data` }),
      true,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
