// Fills a directory that must appear whole or not at all (a downloaded or generated model): it is
// written under a temporary name beside its final place and renamed there only when complete, so
// an interrupted run never leaves something that looks like a model.

import { dirname } from "node:path";
import { isDir } from "./path_exists.ts";

/**
 * Creates `target` by filling a temporary sibling directory (named `prefix` + random) and renaming
 * it. Returns false when another process created `target` first (its directory is as good as
 * ours); rethrows the failure otherwise, with the temporary directory removed.
 */
export async function createDirAtomically(
  target: string,
  prefix: string,
  fill: (tmp: string) => Promise<void>,
): Promise<boolean> {
  const parent = dirname(target);
  await Deno.mkdir(parent, { recursive: true });
  const tmp = await Deno.makeTempDir({ dir: parent, prefix });
  try {
    await fill(tmp);
    await Deno.rename(tmp, target);
    return true;
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    if (await isDir(target)) return false;
    throw e;
  }
}
