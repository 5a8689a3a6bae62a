// Where Sluice keeps what it downloads or generates once (hub models, the demo model).

import { join } from "node:path";

/** Root of Sluice's on-disk cache: $SLUICE_CACHE, else ~/.cache/sluice. */
export function sluiceCacheDir(): string {
  const configured = Deno.env.get("SLUICE_CACHE");
  if (configured) return configured;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return join(home, ".cache", "sluice");
}
