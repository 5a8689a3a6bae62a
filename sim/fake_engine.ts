// A StepEngine with no GPU, for runtime tests and the simulation (sim/): a toy "model" whose next
// token is a hash of every token before it, read back through the block tables the runtime uploads. A wrong table entry,
// a block reused too early, a position written twice or a stale slot all change its output, so
// tests can compare each request's tokens with the ones its prompt alone determines. A sample
// with a token mask (constrained decoding) draws, by the same hash, among the ids the mask allows:
// a random model that can only say what the grammar lets it.

import type {
  CostModel,
  EngineInfo,
  KvCopy,
  SampleRecord,
  StepEngine,
  StepPlan,
} from "../engine/engine.ts";
import { blocksPerLayer, NOT_RESIDENT } from "../engine/bench_api.ts";

export interface FakeEngineShape {
  numLayers?: number;
  blockSize?: number;
  blocksPerArena?: number[];
  /** Defaults to all layers in arena 0. */
  layerArena?: number[];
  maxSlots?: number;
  maxRows?: number;
  vocabSize?: number;
  maxBlocksPerSeq?: number;
  ringSize?: number;
  /** Most steps of one decode group (StepPlan.group); default 1: groups are refused. */
  maxDecodeSteps?: number;
  /** Host KV tier blocks (0: none). */
  hostBlocks?: number;
  /** A sliding window: samples read only its positions, and the runtime frees blocks behind it. */
  slidingWindow?: number;
  /** Each layer's own window, 0 for none (Gemma's local and global layers); overrides slidingWindow. */
  layerWindows?: number[];
  /**
   * Greedy sampling (temperature 0) ignores the seed, as a real model's does (default false: the
   * runtime's tests vary greedy requests' tokens by their seeds).
   */
  greedyIgnoresSeed?: boolean;
  /** Top logprobs a sample may ask for (default 4): each is the sampled id's, then lower ones. */
  maxTopLogprobs?: number;
  /**
   * Whether a sample reads its whole context in every layer (default true), which checks every
   * block it attends to. false: only its own position, so a GPU-sized simulation (thousands of
   * positions, dozens of layers, hundreds of thousands of tokens) costs time linear in its rows;
   * its tokens then hash the position and the last token instead of the whole context.
   */
  readsWholeContext?: boolean;
  /** A cost model "profiled at load" (none by default), and the bytes of a block it prices. */
  costModel?: CostModel;
  kvBlockBytes?: number;
}

/** The token the toy model samples after `context` (prompt + generated ids), for `seed`. */
export function toyNextToken(context: readonly number[], seed: number, vocab: number): number {
  return toyHash(context, seed) % vocab;
}

/** As toyNextToken, drawn among the ids `mask` allows (bit id % 32 of word id >> 5). */
export function toyMaskedToken(
  context: readonly number[],
  seed: number,
  vocab: number,
  mask: Uint32Array,
): number {
  if (mask.length !== Math.ceil(vocab / 32)) {
    throw new Error(`a mask of ${mask.length} words for a vocabulary of ${vocab}`);
  }
  const allowed: number[] = [];
  for (let id = 0; id < vocab; id++) if (mask[id >>> 5] & (1 << (id & 31))) allowed.push(id);
  if (allowed.length === 0) throw new Error("a mask that allows no token");
  return allowed[mix(toyHash(context, seed)) % allowed.length];
}

/** Murmur3's finalizer: FNV's low bits cycle when one token repeats, and a mask's count is small. */
function mix(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function toyHash(context: readonly number[], seed: number): number {
  let h = 0x811c9dc5 ^ seed;
  for (const t of context) h = Math.imul(h ^ t, 0x01000193) >>> 0;
  return Math.imul(h ^ context.length, 0x01000193) >>> 0;
}

/**
 * The tokens a request gets when nothing interferes: maxTokens, or up to a stop id. With a sliding
 * `window`, each token sees only the last `window` positions (the earlier ones read as -1).
 */
export function toyGeneration(
  prompt: readonly number[],
  maxTokens: number,
  seed: number,
  vocab: number,
  stopIds: ReadonlySet<number> = new Set(),
  window?: number,
): number[] {
  const ctx = [...prompt];
  const out: number[] = [];
  while (out.length < maxTokens) {
    const seen = window ? ctx.map((t, i) => i < ctx.length - window ? -1 : t) : ctx;
    const t = toyNextToken(seen, seed, vocab);
    if (stopIds.has(t)) break;
    out.push(t);
    ctx.push(t);
  }
  return out;
}

/**
 * What is stored at each position (block * blockSize + offset) of a tier: the token, and which
 * layer wrote it (-1: nothing). Typed arrays, not maps of strings: property tests run millions of
 * steps through this.
 */
class Positions {
  readonly layer: Int32Array;
  readonly token: Int32Array;
  constructor(length: number) {
    this.layer = new Int32Array(length).fill(-1);
    this.token = new Int32Array(length);
  }
}

/** A host-tier position a copy out writes once its step lands, and the value (layer -1: none). */
type Landing = { at: number; layer: number; token: number };

export class FakeEngine implements StepEngine {
  readonly info: EngineInfo;
  steps = 0;
  closed = false;
  /** Rows per step, for tests that look at batching. */
  readonly rowsPerStep: number[] = [];
  /** Per step, the slots it sampled and whether under a mask, for tests of constrained batching. */
  readonly samplesPerStep: { slot: number; masked: boolean }[][] = [];
  /** Per step, the decode steps it ran (1, or its group's size). */
  readonly groupSteps: number[] = [];
  /** Per slot, the highest position any row has written (-1: none), for tests of groups. */
  readonly highestPos: number[];
  private readonly table: Uint32Array;
  /** Per arena, what was stored at each of its positions. */
  private readonly kv: Positions[];
  /** The host tier: what landed at each of its positions. */
  private readonly host: Positions;
  /** Host block → copies out into it that have not landed. */
  private readonly filling = new Map<number, number>();
  /** Blocks copied each way, for tests. */
  readonly copied = { out: 0, in: 0, prefetched: 0 };
  private readonly nextIds: number[];
  private readonly seeds: number[];
  private unread = 0;
  private readonly greedyIgnoresSeed: boolean;
  private readonly readsWholeContext: boolean;
  /** Per step whose records have not resolved, the slots it samples. */
  private readonly unresolved: Set<number>[] = [];

  constructor(
    shape: FakeEngineShape = {},
    private readonly delay: () => Promise<void> = () => Promise.resolve(),
  ) {
    const numLayers = shape.numLayers ?? 2;
    const blockSize = shape.blockSize ?? 4;
    const blocksPerArena = shape.blocksPerArena ?? [64];
    const maxSlots = shape.maxSlots ?? 8;
    const maxBlocksPerSeq = shape.maxBlocksPerSeq ?? 64;
    const layerArena = shape.layerArena ?? new Array(numLayers).fill(0);
    const perLayer = blocksPerLayer({ blocksPerArena, layerArena });
    this.greedyIgnoresSeed = shape.greedyIgnoresSeed ?? false;
    this.readsWholeContext = shape.readsWholeContext ?? true;
    this.info = {
      architecture: "llama",
      slidingWindow: shape.slidingWindow ?? null,
      ...(shape.layerWindows ? { layerWindows: shape.layerWindows } : {}),
      adapter: "fake",
      dtype: "f32",
      weightBytes: 0,
      kvBytes: 0,
      numLayers,
      vocabSize: shape.vocabSize ?? 1000,
      blockSize,
      blocksPerArena,
      layerArena,
      maxBlocksPerSeq,
      maxSlots,
      maxRows: shape.maxRows ?? 16,
      maxTopLogprobs: shape.maxTopLogprobs ?? 4,
      maxContext: Math.min(maxBlocksPerSeq, perLayer) * blockSize,
      ringSize: shape.ringSize ?? 3,
      maxDecodeSteps: shape.maxDecodeSteps ?? 1,
      hostBlocks: shape.hostBlocks ?? 0,
      kvBlockBytes: shape.kvBlockBytes ?? 0,
      dispatchesPerStep: 1,
      costModel: shape.costModel,
    };
    this.table = new Uint32Array(numLayers * maxSlots * maxBlocksPerSeq).fill(NOT_RESIDENT);
    this.kv = blocksPerArena.map((n) => new Positions(n * blockSize));
    this.host = new Positions(this.info.hostBlocks * blockSize);
    this.nextIds = new Array(maxSlots).fill(-1);
    this.seeds = new Array(maxSlots).fill(0);
    this.highestPos = new Array(maxSlots).fill(-1);
  }

  step(plan: StepPlan): Promise<SampleRecord[]> {
    if (this.closed) return Promise.reject(new Error("engine is closed"));
    if (this.unread >= this.info.ringSize) {
      return Promise.reject(new Error(`more than ${this.info.ringSize} steps unread`));
    }
    const { maxSlots, maxBlocksPerSeq, maxRows } = this.info;
    const copies = plan.copies ?? [];
    if (plan.rows.length > maxRows || (plan.rows.length === 0 && copies.length === 0)) {
      throw new Error("bad row count");
    }
    if (plan.group) this.checkGroup(plan);
    // Copies out read the device now and land in host memory when the step's records resolve;
    // copies in read the host now. Like the engine, reading a host block before the copy out
    // filling it has landed is refused, and so is a step whose copies write a block twice.
    const after = plan.copiesAfterLayer ?? [];
    if (after.some((c) => c.direction !== "out")) {
      throw new Error("an after-layer copy must be out");
    }
    if (after.length > 0 && plan.rows.length === 0) throw new Error("after-layer copies, no rows");
    this.checkTargets([...copies, ...after]);
    const outs = copies.filter((c) => c.direction === "out");
    const landing = outs.flatMap((c) => this.copyOut(c));
    const filled = [...outs, ...after].flatMap((c) => c.hostBlocks);
    for (const h of filled) this.filling.set(h, (this.filling.get(h) ?? 0) + 1);
    for (const c of copies.filter((c) => c.direction === "in")) this.copyIn(c);
    for (const t of plan.tables) {
      t.blocks.forEach((b, i) => {
        this.table[(t.layer * maxSlots + t.slot) * maxBlocksPerSeq + t.first + i] = b;
      });
    }
    for (const s of plan.sampling) {
      const greedy = s.params.temperature === 0 && this.greedyIgnoresSeed;
      this.seeds[s.slot] = greedy ? 0 : s.params.seed;
    }
    this.steps++;
    this.rowsPerStep.push(plan.rows.length);
    this.groupSteps.push(plan.group?.steps ?? 1);

    const masks = new Map((plan.masks ?? []).map((m) => [m.sample, m.bits]));
    if (
      masks.size !== (plan.masks ?? []).length || [...masks.keys()].some((i) => !plan.samples[i])
    ) {
      throw new Error("masks name samples twice or samples that do not exist");
    }
    // A mask follows from the token before it: that token must be back before a masked sample.
    for (const i of masks.keys()) {
      const slot = plan.rows[plan.samples[i].row].slot;
      if (this.unresolved.some((slots) => slots.has(slot))) {
        throw new Error(`slot ${slot}: a masked sample while its last sample is in flight`);
      }
    }
    const sampled = new Set(plan.samples.map((s) => plan.rows[s.row].slot));
    this.unresolved.push(sampled);
    this.samplesPerStep.push(
      plan.samples.map((s, i) => ({ slot: plan.rows[s.row].slot, masked: masks.has(i) })),
    );
    const records = plan.group
      ? this.runGroup(plan, landing)
      : this.runRows(plan, plan.rows, masks, landing);
    this.unread++;
    return this.delay().then(() => {
      this.unread--;
      this.unresolved.splice(this.unresolved.indexOf(sampled), 1);
      for (const { at, layer, token } of landing) {
        this.host.layer[at] = layer;
        this.host.token[at] = token;
      }
      for (const h of filled) {
        const n = this.filling.get(h)! - 1;
        if (n === 0) this.filling.delete(h);
        else this.filling.set(h, n);
      }
      return records;
    });
  }

  /** What the engine refuses of a decode group (forward.ts's checkGroup). */
  private checkGroup(plan: StepPlan): void {
    const { steps, budgets, stopIds } = plan.group!;
    if (!Number.isInteger(steps) || steps < 1 || steps > this.info.maxDecodeSteps) {
      throw new Error(`decode group of ${steps} steps (max ${this.info.maxDecodeSteps})`);
    }
    if ((plan.copies ?? []).length > 0 || (plan.prefetch ?? []).length > 0) {
      throw new Error("a decode group cannot copy KV");
    }
    if (plan.masks?.length || plan.copiesAfterLayer?.length) {
      throw new Error("a decode group has masks or copies");
    }
    if (
      plan.samples.length !== plan.rows.length || plan.samples.some((s, i) => s.row !== i) ||
      plan.rows.some((r) => r.token !== null) ||
      new Set(plan.rows.map((r) => r.slot)).size !== plan.rows.length
    ) {
      throw new Error("a decode group's rows must be one sampled decode row per slot");
    }
    if (
      budgets.length !== plan.rows.length || stopIds.length !== plan.rows.length ||
      budgets.some((b) => !Number.isInteger(b) || b < 1)
    ) {
      throw new Error("a decode group needs a budget >= 1 and stop ids per sample");
    }
  }

  /**
   * A decode group as decode_advance.wgsl runs it: each step takes the ids the last one sampled,
   * one position on; a row that took its budget or a stop id holds its last position and input.
   */
  private runGroup(plan: StepPlan, landing: Landing[]): SampleRecord[] {
    const { steps, budgets, stopIds } = plan.group!;
    const rows = plan.rows.map((r) => ({ ...r }));
    const input = rows.map((r) => this.nextIds[r.slot]);
    const taken = rows.map(() => 0);
    const done = rows.map(() => false);
    const records: SampleRecord[] = [];
    for (let step = 0; step < steps; step++) {
      if (step > 0) {
        rows.forEach((r, s) => {
          const id = this.nextIds[r.slot];
          if (!done[s]) {
            taken[s]++;
            done[s] = taken[s] >= budgets[s] || stopIds[s].slice(0, 8).includes(id);
            if (!done[s]) {
              r.pos++;
              input[s] = id;
            }
          }
          this.nextIds[r.slot] = input[s];
        });
      }
      records.push(...this.runRows(plan, rows, new Map(), landing));
    }
    return records;
  }

  /**
   * One step's rows through the toy model: returns the records of `plan`'s samples and leaves
   * each sampled slot's id in nextIds.
   */
  private runRows(
    plan: StepPlan,
    rows: StepPlan["rows"],
    masks: Map<number, Uint32Array>,
    landing: Landing[],
  ): SampleRecord[] {
    const { numLayers } = this.info;
    const after = plan.copiesAfterLayer ?? [];
    // Layer by layer, as the GPU runs them: bring the layer's offloaded KV into the prefetch
    // region, write every row's token into its KV, read back what each sample row attends to, and
    // copy out what the layer's after-layer copies name (what it has just written included).
    // The region is reused by the next offloaded layer, so a sample must read it in between.
    const rowTokens = rows.map((r) => r.token ?? this.nextIds[r.slot]);
    rows.forEach((r, i) => {
      if (rowTokens[i] < 0) throw new Error(`slot ${r.slot} has no sampled id to decode from`);
      this.highestPos[r.slot] = Math.max(this.highestPos[r.slot], r.pos);
    });
    // Positions each sample reads in `layer`: from its window's start (or 0), or only its own.
    const firstRead = (pos: number, layer: number) => {
      const window = this.info.layerWindows?.[layer] ?? this.info.slidingWindow;
      if (!this.readsWholeContext) return pos;
      return window ? Math.max(0, pos - window + 1) : 0;
    };
    const seen = plan.samples.map((s) =>
      this.readsWholeContext ? new Array(rows[s.row].pos + 1).fill(-1) : [] as number[]
    );
    for (let l = 0; l < numLayers; l++) {
      const arena = this.kv[this.info.layerArena[l]];
      for (const p of (plan.prefetch ?? []).filter((p) => p.layer === l)) {
        this.copyIn({ direction: "in", ...p }, false);
      }
      rows.forEach((r, i) => {
        const at = this.key(l, r.slot, r.pos);
        arena.layer[at] = l;
        arena.token[at] = rowTokens[i];
      });
      plan.samples.forEach((s, i) => {
        const row = rows[s.row];
        // With a sliding window, like the attention kernel: the positions before it are not read
        // (their blocks may be freed and taken by others); they stay -1 in the context.
        for (let pos = firstRead(row.pos, l); pos <= row.pos; pos++) {
          const at = this.key(l, row.slot, pos);
          const layer = arena.layer[at], token = arena.token[at];
          if (layer === -1) throw new Error(`slot ${row.slot} pos ${pos} layer ${l}: no KV`);
          if (layer !== l) throw new Error(`layer ${l} reads a block layer ${layer} wrote`);
          if ((seen[i][pos] ?? -1) !== -1 && seen[i][pos] !== token) {
            throw new Error(`slot ${row.slot} pos ${pos}: layers disagree`);
          }
          seen[i][pos] = token;
        }
      });
      for (const c of after.filter((c) => c.layer === l)) landing.push(...this.copyOut(c));
    }
    return plan.samples.map((s, i) => {
      const row = rows[s.row];
      const { vocabSize } = this.info;
      const mask = masks.get(i);
      const context = this.readsWholeContext ? seen[i] : [row.pos, seen[i][row.pos]];
      const id = mask
        ? toyMaskedToken(context, this.seeds[row.slot], vocabSize, mask)
        : toyNextToken(context, this.seeds[row.slot], vocabSize);
      this.nextIds[row.slot] = id;
      // A toy distribution: the sampled id is the likeliest, the ids after it each less likely.
      const top: [number, number][] = plan.wantTopLogprobs
        ? Array.from(
          { length: this.info.maxTopLogprobs },
          (_, k) => [(id + k) % vocabSize, -1 - k] as [number, number],
        )
        : [];
      return { id, logprob: -1, top };
    });
  }

  /** Throws when two copies in write one device block, or two copies out one host block. */
  private checkTargets(copies: readonly KvCopy[]): void {
    const written = new Set<string>();
    for (const c of copies) {
      const inward = c.direction === "in";
      for (const b of inward ? c.deviceBlocks : c.hostBlocks) {
        const key = inward
          ? `device block ${b} of arena ${this.info.layerArena[c.layer]}`
          : `host block ${b}`;
        if (written.has(key)) throw new Error(`copies write ${key} twice in one step`);
        written.add(key);
      }
    }
  }

  private checkCopy(c: KvCopy): number {
    const arena = this.info.layerArena[c.layer];
    if (c.deviceBlocks.length !== c.hostBlocks.length) throw new Error("copy lengths differ");
    for (const d of c.deviceBlocks) {
      if (d < 0 || d >= this.info.blocksPerArena[arena]) throw new Error(`copy: device block ${d}`);
    }
    for (const h of c.hostBlocks) {
      if (h < 0 || h >= this.info.hostBlocks) throw new Error(`copy: host block ${h}`);
    }
    return arena;
  }

  private copyOut(c: KvCopy): Landing[] {
    const arena = this.checkCopy(c);
    this.copied.out += c.deviceBlocks.length;
    const { blockSize } = this.info;
    const from = this.kv[arena];
    const landing: Landing[] = [];
    c.deviceBlocks.forEach((d, i) => {
      for (let off = 0; off < blockSize; off++) {
        const src = d * blockSize + off;
        landing.push({
          at: c.hostBlocks[i] * blockSize + off,
          layer: from.layer[src],
          token: from.token[src],
        });
      }
    });
    return landing;
  }

  private copyIn(c: KvCopy, count = true): void {
    const arena = this.checkCopy(c);
    const pending = c.hostBlocks.find((h) => this.filling.has(h));
    if (pending !== undefined) {
      throw new Error(`layer ${c.layer}: host block ${pending} read before its copy out landed`);
    }
    if (count) this.copied.in += c.deviceBlocks.length;
    else this.copied.prefetched += c.deviceBlocks.length;
    const { blockSize } = this.info;
    const to = this.kv[arena];
    c.deviceBlocks.forEach((d, i) => {
      for (let off = 0; off < blockSize; off++) {
        const src = c.hostBlocks[i] * blockSize + off, dst = d * blockSize + off;
        to.layer[dst] = this.host.layer[src];
        to.token[dst] = this.host.token[src];
      }
    });
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  /** Where (layer, slot, pos) is stored: the block the table names, which must be resident. */
  private key(layer: number, slot: number, pos: number): number {
    const { maxSlots, maxBlocksPerSeq, blockSize } = this.info;
    const entry = Math.floor(pos / blockSize);
    if (entry >= maxBlocksPerSeq) throw new Error(`pos ${pos} beyond the table`);
    const block = this.table[(layer * maxSlots + slot) * maxBlocksPerSeq + entry];
    if (block === NOT_RESIDENT) {
      throw new Error(`layer ${layer} slot ${slot} pos ${pos}: not resident`);
    }
    const arenaBlocks = this.info.blocksPerArena[this.info.layerArena[layer]];
    if (block >= arenaBlocks) throw new Error(`block ${block} outside arena`);
    // Layers of one arena share its blocks: the key must not include the layer, so two layers
    // given the same block would overwrite each other and be caught.
    return block * blockSize + pos % blockSize;
  }
}
