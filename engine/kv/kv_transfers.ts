// Executes KV copies between the device pool and the host tier, asynchronously to the step loop.
//
// WebGPU has one queue, so order is what makes this safe without fences:
//   - "out" copies are encoded into their own command buffer and submitted before anything else of
//     the step, so a device block copied out may be overwritten by the step's "in" copies and
//     kernels (queue.writeBuffer and later submits run after earlier submits). Their staging
//     buffers are mapped, and the bytes land in host memory a step or more later; landings are
//     chained so they happen in submission order.
//   - "in" copies are queue.writeBuffer calls straight from host storage, one per run and K/V.
//   - an "in" copy may not read a host block whose "out" copy has not landed (checkCopies refuses).
//   - prefetches (offload distance) are written into a mappable staging buffer (host memory on a
//     discrete GPU) and copied into the prefetch region between layers' compute passes, so one
//     region serves every offloaded layer of a step in turn.
//   - copies out after a layer (LayerKV's layer-wise offload) are encoded into the step's own
//     command buffer right after that layer's compute pass, so they read what the layer just
//     wrote while the next layers compute; they land like the other "out" copies.
// Staging buffers live from submit to landing, then are destroyed.

import type { Gpu } from "../gpu/device.ts";
import type { DeviceKv } from "./device_kv.ts";
import type { HostKv } from "./host_kv.ts";
import {
  afterLayerRuns,
  checkCopies,
  checkPrefetches,
  type CopyRun,
  type CopyTally,
  emptyTally,
  type KvCopy,
  type KvPrefetch,
  prefetchRuns,
  tally,
  toRuns,
} from "./kv_copies.ts";

/** Commands a step encodes between layers' compute passes (the forward pass runs them). */
export interface LayerCopies {
  /** Layers that need commands before their kernels. */
  layers: ReadonlySet<number>;
  encode(encoder: GPUCommandEncoder, layer: number): void;
}

/** Copies executed since load, per direction (plain data: it crosses the Worker boundary). */
export interface KvCopyStats {
  /** Steps that carried copies. */
  steps: number;
  out: CopyTally;
  in: CopyTally;
  /** Host → device copies into the prefetch region between layers (offload distance). */
  prefetch: CopyTally;
}

/** A step's prefetches, staged: encode them between layers, then free the staging once done. */
export interface StagedPrefetch {
  between: LayerCopies;
  release(): void;
}

/** Largest staging buffer: copies are packed into buffers of at most this size. */
const STAGING_BYTES = 64 << 20;

/** One contiguous byte range of K or V: where it is in the arena and where it goes on the host. */
interface Segment {
  src: GPUBuffer;
  offset: number;
  bytes: number;
  host: Uint8Array;
}

export class KvTransfers {
  private readonly stats: KvCopyStats = {
    steps: 0,
    out: emptyTally(),
    in: emptyTally(),
    prefetch: emptyTally(),
  };
  /** Host block → "out" copies into it that have not landed yet. */
  private readonly filling = new Map<number, number>();
  /** The last landing in submission order (never rejects). */
  private landed: Promise<void> = Promise.resolve();
  private readonly staging = new Set<GPUBuffer>();

  constructor(
    private readonly gpu: Gpu,
    private readonly kv: DeviceKv,
    private readonly host: HostKv,
    private readonly coalesce = true,
  ) {}

  /** Checks `copies` (throwing, with nothing done, on the first bad one) and plans their runs. */
  plan(copies: readonly KvCopy[]): CopyRun[] {
    const { layerArena, blocksPerArena } = this.kv.layout;
    checkCopies(
      copies,
      { layerArena, blocksPerArena, hostBlocks: this.host.blocks },
      (h) => this.filling.has(h),
    );
    return toRuns(copies, layerArena, {
      hostChunkBlocks: this.host.chunkBlocks,
      coalesce: this.coalesce,
    });
  }

  /**
   * Checks a step's prefetches against the host blocks still being filled, including by this
   * step's own "out" `runs`, and plans their runs per layer.
   */
  planPrefetch(
    prefetches: readonly KvPrefetch[],
    runs: readonly CopyRun[],
  ): Map<number, CopyRun[]> {
    if (prefetches.length === 0) return new Map();
    const { layerArena, blocksPerArena } = this.kv.layout;
    const outs = new Set<number>();
    for (const r of runs) {
      if (r.direction === "out") {
        for (const h of range(r.hostBlock, r.blocks)) outs.add(h);
      }
    }
    checkPrefetches(
      prefetches,
      { layerArena, blocksPerArena, hostBlocks: this.host.blocks },
      (h) => this.filling.has(h) || outs.has(h),
    );
    return prefetchRuns(prefetches, layerArena, {
      hostChunkBlocks: this.host.chunkBlocks,
      coalesce: this.coalesce,
    });
  }

  /**
   * Checks a step's copies out after layers (all "out") against each other, this step's own
   * "out" `runs` and the host blocks its `prefetches` read, and plans their runs per layer.
   */
  planAfterLayers(
    copies: readonly KvCopy[],
    runs: readonly CopyRun[],
    prefetches: readonly KvPrefetch[],
  ): Map<number, CopyRun[]> {
    if (copies.length === 0) return new Map();
    const { layerArena, blocksPerArena } = this.kv.layout;
    const bad = copies.findIndex((c) => c.direction !== "out");
    if (bad >= 0) throw new RangeError(`KV copy after layer ${bad}: only "out" copies run there`);
    checkCopies(copies, { layerArena, blocksPerArena, hostBlocks: this.host.blocks });
    const taken = new Set(prefetches.flatMap((p) => p.hostBlocks));
    for (const r of runs) {
      if (r.direction === "out") { for (const h of range(r.hostBlock, r.blocks)) taken.add(h); }
    }
    for (const c of copies) {
      const h = c.hostBlocks.find((b) => taken.has(b));
      if (h !== undefined) {
        throw new RangeError(
          `KV copy after layer ${c.layer}: host block ${h} is written or read by another copy`,
        );
      }
    }
    return afterLayerRuns(copies, layerArena, {
      hostChunkBlocks: this.host.chunkBlocks,
      coalesce: this.coalesce,
    });
  }

  /**
   * Stages a step's copies out after layers: `after` encodes each layer's copies into staging
   * buffers; `land()`, called once the step is submitted, resolves when their bytes are in host
   * memory (in submission order with the other copies out).
   */
  stageAfterLayers(
    byLayer: Map<number, CopyRun[]>,
  ): { after: LayerCopies; land(): Promise<void> } | null {
    if (byLayer.size === 0) return null;
    const all = [...byLayer.values()].flat();
    const t = tally(all, this.host.bytesPerBlock);
    this.stats.steps++;
    addTally(this.stats.out, t.out);
    // One staging group per layer, so each layer's copies are encoded on their own.
    const layers = [...byLayer.keys()];
    const staged = layers.map((layer) => this.stageOut(byLayer.get(layer)!));
    return {
      after: {
        layers: new Set(layers),
        encode: (encoder, layer) => staged[layers.indexOf(layer)].encode(encoder),
      },
      land: () => this.landOut(staged.flatMap((s) => s.pieces), all),
    };
  }

  /**
   * Copies the prefetched host bytes into staging buffers now (the host blocks may be rewritten
   * once this returns) and returns the commands that move them into the device between layers.
   */
  stagePrefetch(byLayer: Map<number, CopyRun[]>): StagedPrefetch | null {
    if (byLayer.size === 0) return null;
    const per = this.host.bytesPerBlock;
    const segments: {
      layer: number;
      dst: GPUBuffer;
      offset: number;
      bytes: number;
      host: Uint8Array;
    }[] = [];
    for (const [layer, runs] of byLayer) {
      const t = tally(runs, per).in;
      addTally(this.stats.prefetch, t);
      for (const r of runs) {
        const at = { offset: r.deviceBlock * per, bytes: r.blocks * per };
        segments.push({
          layer,
          dst: this.kv.k[r.arena],
          ...at,
          host: this.host.k(r.hostBlock, r.blocks),
        });
        segments.push({
          layer,
          dst: this.kv.v[r.arena],
          ...at,
          host: this.host.v(r.hostBlock, r.blocks),
        });
      }
    }
    const placed: {
      layer: number;
      dst: GPUBuffer;
      offset: number;
      bytes: number;
      src: GPUBuffer;
      at: number;
    }[] = [];
    const buffers: GPUBuffer[] = [];
    for (const group of packSegments(segments, STAGING_BYTES)) {
      const size = group.reduce((n, s) => n + s.bytes, 0);
      const buffer = this.gpu.device.createBuffer({
        size,
        usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC,
        mappedAtCreation: true,
        label: "kv.prefetch.staging",
      });
      const bytes = new Uint8Array(buffer.getMappedRange());
      let at = 0;
      for (const s of group) {
        bytes.set(s.host, at);
        placed.push({
          layer: s.layer,
          dst: s.dst,
          offset: s.offset,
          bytes: s.bytes,
          src: buffer,
          at,
        });
        at += s.bytes;
      }
      buffer.unmap();
      this.staging.add(buffer);
      buffers.push(buffer);
    }
    return {
      between: {
        layers: new Set(byLayer.keys()),
        encode: (encoder, layer) => {
          for (const p of placed) {
            if (p.layer === layer) {
              encoder.copyBufferToBuffer(p.src, p.at, p.dst, p.offset, p.bytes);
            }
          }
        },
      },
      release: () => {
        for (const b of buffers) this.dropStaging(b);
      },
    };
  }

  /**
   * Submits the "out" runs, then writes the "in" runs. Resolves once the "out" bytes are in host
   * memory; rejects if their readback fails.
   */
  execute(runs: readonly CopyRun[]): Promise<void> {
    if (runs.length === 0) return Promise.resolve();
    const t = tally(runs, this.host.bytesPerBlock);
    this.stats.steps++;
    addTally(this.stats.out, t.out);
    addTally(this.stats.in, t.in);
    const landing = this.copyOut(runs.filter((r) => r.direction === "out"));
    for (const r of runs) if (r.direction === "in") this.copyIn(r);
    return landing;
  }

  /** A snapshot of the counters. */
  snapshot(): KvCopyStats {
    return {
      steps: this.stats.steps,
      out: { ...this.stats.out },
      in: { ...this.stats.in },
      prefetch: { ...this.stats.prefetch },
    };
  }

  /** Resolves when every "out" copy submitted so far has landed (or failed). */
  idle(): Promise<void> {
    return this.landed;
  }

  /** Frees staging buffers still held (call after idle()). */
  destroy(): void {
    for (const b of this.staging) b.destroy();
    this.staging.clear();
  }

  private copyIn(r: CopyRun): void {
    const q = this.gpu.device.queue;
    const offset = r.deviceBlock * this.host.bytesPerBlock;
    q.writeBuffer(this.kv.k[r.arena], offset, this.host.k(r.hostBlock, r.blocks));
    q.writeBuffer(this.kv.v[r.arena], offset, this.host.v(r.hostBlock, r.blocks));
  }

  private copyOut(runs: readonly CopyRun[]): Promise<void> {
    if (runs.length === 0) return Promise.resolve();
    const staged = this.stageOut(runs);
    const encoder = this.gpu.device.createCommandEncoder({ label: "kv.out" });
    staged.encode(encoder);
    this.gpu.device.queue.submit([encoder.finish()]);
    return this.landOut(staged.pieces, runs);
  }

  /** Staging buffers for `runs` out, and the commands that fill them. */
  private stageOut(runs: readonly CopyRun[]): {
    pieces: { buffer: GPUBuffer; group: Segment[] }[];
    encode(encoder: GPUCommandEncoder): void;
  } {
    const segments = runs.flatMap((r) => this.segmentsOf(r));
    const pieces = packSegments(segments, STAGING_BYTES).map((group) => {
      const size = group.reduce((n, s) => n + s.bytes, 0);
      const buffer = this.gpu.device.createBuffer({
        size,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        label: "kv.out.staging",
      });
      this.staging.add(buffer);
      return { buffer, group };
    });
    return {
      pieces,
      encode: (encoder) => {
        for (const { buffer, group } of pieces) {
          let at = 0;
          for (const s of group) {
            encoder.copyBufferToBuffer(s.src, s.offset, buffer, at, s.bytes);
            at += s.bytes;
          }
        }
      },
    };
  }

  /** Maps the submitted staging `pieces` and lands them in host memory, after earlier landings. */
  private landOut(
    pieces: readonly { buffer: GPUBuffer; group: Segment[] }[],
    runs: readonly CopyRun[],
  ): Promise<void> {
    const blocks = runs.flatMap((r) => range(r.hostBlock, r.blocks));
    for (const h of blocks) this.filling.set(h, (this.filling.get(h) ?? 0) + 1);
    const mapped = Promise.all(pieces.map((p) => p.buffer.mapAsync(GPUMapMode.READ)));
    const previous = this.landed;
    const landing = Promise.all([mapped, previous]).then(() => {
      for (const p of pieces) land(p.buffer, p.group);
    }).finally(() => {
      for (const p of pieces) this.dropStaging(p.buffer);
      for (const h of blocks) this.unfill(h);
    });
    this.landed = landing.then(() => {}, () => {});
    return landing;
  }

  private segmentsOf(r: CopyRun): Segment[] {
    const per = this.host.bytesPerBlock;
    const at = { offset: r.deviceBlock * per, bytes: r.blocks * per };
    return [
      { src: this.kv.k[r.arena], ...at, host: this.host.k(r.hostBlock, r.blocks) },
      { src: this.kv.v[r.arena], ...at, host: this.host.v(r.hostBlock, r.blocks) },
    ];
  }

  private dropStaging(buffer: GPUBuffer): void {
    if (!this.staging.delete(buffer)) return;
    buffer.destroy();
  }

  private unfill(h: number): void {
    const n = this.filling.get(h)! - 1;
    if (n === 0) this.filling.delete(h);
    else this.filling.set(h, n);
  }
}

/** Copies a mapped staging buffer's segments into host storage, then unmaps it. */
function land(buffer: GPUBuffer, group: readonly Segment[]): void {
  const bytes = new Uint8Array(buffer.getMappedRange());
  let at = 0;
  for (const s of group) {
    s.host.set(bytes.subarray(at, at + s.bytes));
    at += s.bytes;
  }
  buffer.unmap();
}

/** Greedy packing in order: a group grows until the next segment would pass `cap` bytes. */
function packSegments<S extends { bytes: number }>(segments: readonly S[], cap: number): S[][] {
  const groups: S[][] = [];
  let size = Infinity;
  for (const s of segments) {
    if (size + s.bytes > cap) {
      groups.push([]);
      size = 0;
    }
    groups[groups.length - 1].push(s);
    size += s.bytes;
  }
  return groups;
}

function addTally(into: CopyTally, t: CopyTally): void {
  into.copies += t.copies;
  into.blocks += t.blocks;
  into.bytes += t.bytes;
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}
