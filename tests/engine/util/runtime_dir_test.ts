// ensureRuntimeDir: a usable XDG_RUNTIME_DIR is left alone; an unset, relative or missing one is
// replaced by a private directory (mode 0700, ours) that later calls reuse.

import { join } from "node:path";
import { ensureRuntimeDir } from "../../../engine/util/runtime_dir.ts";
import { assertEquals } from "../../helpers/testing.ts";

function fakeEnv(initial: Record<string, string>) {
  const vars = new Map(Object.entries(initial));
  return {
    get: (k: string) => vars.get(k),
    set: (k: string, v: string) => void vars.set(k, v),
    vars,
  };
}

Deno.test({
  name: "ensureRuntimeDir: keeps a usable one, replaces an unusable one with a private directory",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    const tmp = await Deno.makeTempDir({ prefix: "sluice-runtime-test-" });
    try {
      const usable = await Deno.makeTempDir({ dir: tmp });
      const kept = fakeEnv({ XDG_RUNTIME_DIR: usable });
      assertEquals(ensureRuntimeDir({ tmpDir: tmp, env: kept }), usable);
      assertEquals(kept.vars.get("XDG_RUNTIME_DIR"), usable);

      const expected = join(tmp, `sluice-runtime-${Deno.uid()}`);
      const unusable: Record<string, string>[] = [
        {},
        { XDG_RUNTIME_DIR: "relative/dir" },
        { XDG_RUNTIME_DIR: "/no/such" },
      ];
      for (const bad of unusable) {
        const env = fakeEnv(bad);
        assertEquals(ensureRuntimeDir({ tmpDir: tmp, env }), expected, JSON.stringify(bad));
        assertEquals(env.vars.get("XDG_RUNTIME_DIR"), expected);
        const info = Deno.statSync(expected);
        assertEquals([info.isDirectory, info.mode! & 0o777, info.uid], [true, 0o700, Deno.uid()]);
      }

      // A directory left too open (by hand, say) is made private again.
      Deno.chmodSync(expected, 0o755);
      assertEquals(ensureRuntimeDir({ tmpDir: tmp, env: fakeEnv({}) }), expected);
      assertEquals(Deno.statSync(expected).mode! & 0o777, 0o700);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
});
