// The process's limit on open file descriptors (RLIMIT_NOFILE). Every connection is a descriptor,
// and a soft limit left at a distribution's default of 1,024 is what a connection flood exhausts
// first; the hard limit is often far higher and ours to take. At start the soft limit is raised to
// the hard one (as nginx's worker_rlimit_nofile or Node servers' ulimit advice do), through libc
// since Deno has no API for it. Where libc cannot be opened the limit is only read.

export interface DescriptorLimit {
  soft: number;
  hard: number;
}

// RLIMIT_NOFILE's number differs between kernels.
const RLIMIT_NOFILE: Partial<Record<typeof Deno.build.os, number>> = { linux: 7, darwin: 8 };
const LIBC: Partial<Record<typeof Deno.build.os, string>> = {
  linux: "libc.so.6",
  darwin: "libSystem.dylib",
};
/** What "no limit" reads as: more descriptors than any count that matters here. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

/**
 * Raises the soft limit to the hard limit; returns the limits in force afterwards, or null where
 * they cannot be read or set on this system.
 */
export function raiseDescriptorLimit(): DescriptorLimit | null {
  const resource = RLIMIT_NOFILE[Deno.build.os];
  const path = LIBC[Deno.build.os];
  if (resource === undefined || path === undefined) return null;
  let libc;
  try {
    libc = Deno.dlopen(path, {
      getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
      setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
    });
  } catch {
    return null;
  }
  try {
    // struct rlimit { rlim_t rlim_cur, rlim_max } with a 64-bit rlim_t on both systems.
    const limits = new BigUint64Array(2);
    const bytes = new Uint8Array(limits.buffer);
    if (libc.symbols.getrlimit(resource, bytes) !== 0) return null;
    if (limits[0] < limits[1]) {
      const wanted = limits[1];
      limits[0] = wanted;
      // macOS refuses a soft limit above OPEN_MAX whatever the hard limit says; keep the old one.
      if (libc.symbols.setrlimit(resource, bytes) !== 0) libc.symbols.getrlimit(resource, bytes);
    }
    return { soft: asCount(limits[0]), hard: asCount(limits[1]) };
  } finally {
    libc.close();
  }
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

const asCount = (v: bigint) => v >= BigInt(UNLIMITED) ? UNLIMITED : Number(v);

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
