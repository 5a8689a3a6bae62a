// One cached token block of the prefix index, and its host copy: the shapes the index and its
// eviction order (prefix_eviction.ts) share, apart so neither file imports the other.

export interface PrefixEntry {
  readonly key: string;
  readonly parent: PrefixEntry | null;
  /** The device block holding this token block's KV, per layer; null while only the host has it. */
  blocks: readonly number[] | null;
  /** Its copy in the host tier, if it has one. */
  host: HostCopy | null;
  children: number;
  /** Evicted: no lookup reaches it or anything chained after it. */
  evicted: boolean;
}

/** An entry's KV in the host tier. */
export interface HostCopy {
  /** Host tier blocks, per layer. */
  readonly blocks: readonly number[];
  /** The copy out has landed: a lookup may copy it back in (the engine refuses it before). */
  landed: boolean;
}
