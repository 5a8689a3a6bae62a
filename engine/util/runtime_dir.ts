// Mesa's drivers (Vulkan lavapipe and GL alike) look for a Wayland display while WebGPU opens the
// adapter, and print "error: XDG_RUNTIME_DIR is invalid or not set in the environment." when the
// variable is missing: harmless on a headless machine, but noise every user would have to learn to
// ignore. Before anything opens the GPU, the CLI points an unset or unusable XDG_RUNTIME_DIR at a
// private directory (mode 0700, as the XDG spec asks). The environment is the process's, so the
// engine's Worker sees it too.

import { join } from "node:path";

export interface RuntimeDirOptions {
  /** Where the private directory goes (default: the system temp directory). */
  tmpDir?: string;
  env?: Pick<typeof Deno.env, "get" | "set">;
}

/**
 * Leaves a usable XDG_RUNTIME_DIR alone (an absolute path to a directory); otherwise creates or
 * reuses `<tmp>/sluice-runtime-<uid>` (owned by us, mode 0700) and sets the variable to it.
 * Returns the directory in use, or null when none could be made (the noise is then Mesa's only).
 */
export function ensureRuntimeDir(options: RuntimeDirOptions = {}): string | null {
  const env = options.env ?? Deno.env;
  const current = env.get("XDG_RUNTIME_DIR");
  if (current && current.startsWith("/") && isDir(current)) return current;
  if (Deno.build.os === "windows") return null;
  const uid = Deno.uid() ?? 0;
  const dir = join(options.tmpDir ?? tempDir(env), `sluice-runtime-${uid}`);
  try {
    Deno.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) return null;
  }
  // An existing directory must be ours and private, or another user could plant sockets there.
  const info = Deno.lstatSync(dir);
  if (!info.isDirectory || info.uid !== uid) return null;
  if ((info.mode ?? 0) & 0o077) Deno.chmodSync(dir, 0o700);
  env.set("XDG_RUNTIME_DIR", dir);
  return dir;
}

function tempDir(env: Pick<typeof Deno.env, "get">): string {
  return env.get("TMPDIR") || "/tmp";
}

function isDir(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}
