// The process's limit on open file descriptors (RLIMIT_NOFILE), which bounds how many connections
// fit. Every connection is a descriptor, and a soft limit left at a distribution's default of
// 1,024 is what a connection flood exhausts first; the hard limit is often far higher. Deno raises
// the soft limit to the hard one itself as it starts (measured on 2.9.6, Linux:
// tests/cli/serve_connections_test.ts checks it stays so), so this only reads what is in force.

export interface DescriptorLimit {
  soft: number;
  hard: number;
}

/** Linux's account of this process's limits (a system file, not one of the source tree). */
const LIMITS_FILE = "/proc/self/limits";

/** What "unlimited" reads as: more descriptors than any count that matters here. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

/** The limits in force, or null where the system does not show them (only Linux does here). */
export function descriptorLimit(): DescriptorLimit | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(LIMITS_FILE);
  } catch {
    return null;
  }
  const row = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  if (!row) return null;
  const count = (v: string) => v === "unlimited" ? UNLIMITED : Number(v);
  return { soft: count(row[1]), hard: count(row[2]) };
}

/** Descriptors open in this process now (null where the system does not list them). */
export function openDescriptors(): number | null {
  for (const dir of ["/proc/self/fd", "/dev/fd"]) {
    try {
      let n = 0;
      for (const _ of Deno.readDirSync(dir)) n++;
      return n - 1; // the listing's own descriptor
    } catch {
      // try the next
    }
  }
  return null;
}

/** Descriptors kept back for everything but connections: model files, the GPU driver, workers. */
const RESERVED_DESCRIPTORS = 64;
/** An admitted connection holds up to three: the client's, and both ends of its loopback one. */
const DESCRIPTORS_PER_CONNECTION = 3;
/** Where the limit cannot be read, or it is very high: a cap that still bounds memory. */
const DEFAULT_MAX_CONNECTIONS = 4096;

/** The most connections that fit in the descriptors left, by default. */
export function connectionCapacity(limit: DescriptorLimit | null, open: number | null): number {
  if (limit === null) return DEFAULT_MAX_CONNECTIONS;
  const spare = limit.soft - (open ?? 0) - RESERVED_DESCRIPTORS;
  return Math.max(
    1,
    Math.min(DEFAULT_MAX_CONNECTIONS, Math.floor(spare / DESCRIPTORS_PER_CONNECTION)),
  );
}
