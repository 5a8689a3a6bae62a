// Writes small but complete Hugging Face-style Llama model directories: random weights that are
// deterministic from a seed, and a real byte-level BPE tokenizer with a ChatML template. Tests
// use them as fixtures; `--model demo` uses one so the server runs without a download.

import { join } from "node:path";
import type { RopeScaling } from "./config.ts";
import {
  encodeTensor,
  numElements,
  type StDtype,
  writeSafetensors,
} from "../formats/safetensors.ts";

export interface TinyModelSpec {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Defaults to hiddenSize / numHeads. */
  headDim?: number;
  /**
   * Model vocabulary. Defaults to the tokenizer's full size (TOKENIZER_VOCAB_SIZE); smaller values
   * (at least 259) train fewer merges, larger ones pad the embedding like real checkpoints do.
   */
  vocabSize?: number;
  tied: boolean;
  dtype: StDtype;
  /** Number of safetensors shards; 1 (default) writes a single model.safetensors. */
  shards?: number;
  ropeScaling?: RopeScaling;
  ropeTheta?: number;
  maxPositionEmbeddings?: number;
  seed: number;
}

/** Size of the generated tokenizer: 3 special tokens, 256 byte tokens, 253 merges. */
export const TOKENIZER_VOCAB_SIZE = 512;
export const SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
const NUM_BYTE_TOKENS = 256;

export const CHATML_TEMPLATE = "{% for message in messages %}" +
  "{% if loop.first and message['role'] != 'system' %}" +
  "{{ '<|im_start|>system\\nYou are a small demo assistant.<|im_end|>\\n' }}{% endif %}" +
  "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
  "{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export async function writeTinyModel(dir: string, spec: TinyModelSpec): Promise<void> {
  const headDim = spec.headDim ?? spec.hiddenSize / spec.numHeads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new RangeError(`writeTinyModel: head dim ${headDim} must be an even integer`);
  }
  const vocabSize = spec.vocabSize ?? TOKENIZER_VOCAB_SIZE;
  if (vocabSize < SPECIAL_TOKENS.length + NUM_BYTE_TOKENS) {
    throw new RangeError(`writeTinyModel: vocabSize ${vocabSize} is below the 259 base tokens`);
  }
  await Deno.mkdir(dir, { recursive: true });
  const tokenizer = buildTokenizerJson(Math.min(vocabSize, TOKENIZER_VOCAB_SIZE));
  const maxPos = spec.maxPositionEmbeddings ?? 2048;

  const config: Record<string, unknown> = {
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    hidden_size: spec.hiddenSize,
    intermediate_size: spec.intermediateSize,
    num_hidden_layers: spec.numLayers,
    num_attention_heads: spec.numHeads,
    num_key_value_heads: spec.numKvHeads,
    head_dim: headDim,
    vocab_size: vocabSize,
    hidden_act: "silu",
    rms_norm_eps: 1e-5,
    rope_theta: spec.ropeTheta ?? 10000,
    rope_scaling: ropeScalingJson(spec.ropeScaling ?? null),
    max_position_embeddings: maxPos,
    tie_word_embeddings: spec.tied,
    attention_bias: false,
    mlp_bias: false,
    bos_token_id: 1,
    eos_token_id: 2,
    torch_dtype: { F32: "float32", F16: "float16", BF16: "bfloat16" }[spec.dtype],
  };
  await writeJson(join(dir, "config.json"), config);
  await writeJson(join(dir, "generation_config.json"), {
    bos_token_id: 1,
    eos_token_id: [2, 0],
  });
  await writeJson(join(dir, "tokenizer.json"), tokenizer);
  await writeJson(join(dir, "tokenizer_config.json"), tokenizerConfigJson(maxPos));
  await writeWeights(dir, spec, headDim, vocabSize);
}

function ropeScalingJson(s: RopeScaling): Record<string, unknown> | null {
  if (s === null) return null;
  if (s.type === "linear") return { rope_type: "linear", factor: s.factor };
  if (s.type === "freq_factors") {
    throw new RangeError("freq_factors scaling has no config.json form");
  }
  return {
    rope_type: "llama3",
    factor: s.factor,
    low_freq_factor: s.lowFreqFactor,
    high_freq_factor: s.highFreqFactor,
    original_max_position_embeddings: s.originalMaxPositionEmbeddings,
  };
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify(value, null, 2) + "\n");
}

// ---- weights ----

// Scale choices. Linear weights are ~N(0, 1/fan_in), so each projection keeps the size of its input.
// The rest makes greedy decoding of a random model look like language-ish noise rather than one
// token forever: the embedding is large enough that layer 0 sees which token it is (not just
// the attention's average over the context), the MLPs amplify so that the residual stream is
// mostly token-dependent features and only ~10% the raw input embedding (with tied embeddings a
// dominant input embedding makes the model echo its input), and the final norm sets the spread
// of the logits to LOGIT_STD so that the top candidates are usually separated.
// (Tuned by greedy-decoding the demo and small tied/untied models with the float64 reference.)
const EMBED_STD = 0.5;
const ATTN_OUT_GAIN = 0.5;
const MLP_OUT_GAIN = 4;
const LOGIT_STD = 4;

interface PlannedTensor {
  name: string;
  shape: number[];
  /** Standard deviation of the N(0, std²) draw, or of the jitter around `center` for norms. */
  std: number;
  center: number;
}

function planTensors(spec: TinyModelSpec, headDim: number, vocab: number): PlannedTensor[] {
  const h = spec.hiddenSize;
  const qDim = spec.numHeads * headDim;
  const kvDim = spec.numKvHeads * headDim;
  const inter = spec.intermediateSize;
  const linear = (name: string, rows: number, cols: number, gain = 1): PlannedTensor => ({
    name,
    shape: [rows, cols],
    std: gain / Math.sqrt(cols),
    center: 0,
  });
  const norm = (name: string, center = 1): PlannedTensor => ({
    name,
    shape: [h],
    std: 0.1 * center,
    center,
  });
  // Logits are lm_head rows · x̂ with x̂ of RMS 1, so their spread is finalNorm · rowStd · sqrt(h).
  const lmHeadStd = spec.tied ? EMBED_STD : 1 / Math.sqrt(h);
  const out: PlannedTensor[] = [
    { name: "model.embed_tokens.weight", shape: [vocab, h], std: EMBED_STD, center: 0 },
  ];
  for (let i = 0; i < spec.numLayers; i++) {
    const p = `model.layers.${i}`;
    out.push(
      norm(`${p}.input_layernorm.weight`),
      linear(`${p}.self_attn.q_proj.weight`, qDim, h),
      linear(`${p}.self_attn.k_proj.weight`, kvDim, h),
      linear(`${p}.self_attn.v_proj.weight`, kvDim, h),
      linear(`${p}.self_attn.o_proj.weight`, h, qDim, ATTN_OUT_GAIN),
      norm(`${p}.post_attention_layernorm.weight`),
      linear(`${p}.mlp.gate_proj.weight`, inter, h),
      linear(`${p}.mlp.up_proj.weight`, inter, h),
      linear(`${p}.mlp.down_proj.weight`, h, inter, MLP_OUT_GAIN),
    );
  }
  out.push(norm("model.norm.weight", LOGIT_STD / (lmHeadStd * Math.sqrt(h))));
  if (!spec.tied) out.push(linear("lm_head.weight", vocab, h));
  return out;
}

async function writeWeights(
  dir: string,
  spec: TinyModelSpec,
  headDim: number,
  vocab: number,
): Promise<void> {
  const tensors = planTensors(spec, headDim, vocab).map((t) => {
    const values = gaussian(tensorSeed(spec.seed, t.name), numElements(t.shape));
    for (let i = 0; i < values.length; i++) values[i] = t.center + t.std * values[i];
    return {
      name: t.name,
      dtype: spec.dtype,
      shape: t.shape,
      data: encodeTensor(values, spec.dtype),
    };
  });

  const shards = Math.max(1, Math.min(spec.shards ?? 1, tensors.length));
  const metadata = { format: "pt" };
  if (shards === 1) {
    await writeSafetensors(join(dir, "model.safetensors"), tensors, metadata);
    return;
  }
  // Contiguous groups of roughly equal byte size, named like transformers names them.
  const total = tensors.reduce((s, t) => s + t.data.length, 0);
  const groups: (typeof tensors)[] = Array.from({ length: shards }, () => []);
  let acc = 0;
  for (const [i, t] of tensors.entries()) {
    const remainingTensors = tensors.length - i;
    let g = Math.min(shards - 1, Math.floor((acc / total) * shards));
    // Leave at least one tensor for each later shard.
    g = Math.max(g, shards - remainingTensors);
    groups[g].push(t);
    acc += t.data.length;
  }
  const weightMap: Record<string, string> = {};
  for (const [i, group] of groups.entries()) {
    const file = `model-${pad5(i + 1)}-of-${pad5(shards)}.safetensors`;
    await writeSafetensors(join(dir, file), group, metadata);
    for (const t of group) weightMap[t.name] = file;
  }
  await writeJson(join(dir, "model.safetensors.index.json"), {
    metadata: { total_size: total },
    weight_map: weightMap,
  });
}

function pad5(n: number): string {
  return String(n).padStart(5, "0");
}

/** FNV-1a over the name, mixed with the seed: each tensor's values depend only on (seed, name). */
function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** N(0, 1) samples via Box–Muller from mulberry32 (a small 32-bit generator; plenty here). */
function gaussian(seed: number, n: number): Float64Array {
  let state = seed >>> 0;
  const uniform = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float64Array(n);
  for (let i = 0; i < n; i += 2) {
    const u1 = 1 - uniform(); // (0, 1], keeps log finite
    const u2 = uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    out[i] = r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}

// ---- tokenizer ----

// Training text for the merges: ordinary English, some code, digits and punctuation, so that
// common words become single tokens and the rest falls back to bytes.
const CORPUS = `
The river was quiet in the morning, and the light on the water moved slowly from one bank to the
other. A small boat came down the stream with two people in it: one of them was reading a book,
the other was watching the birds. They did not speak for a long time. When the sun was higher,
the boat reached the old bridge, and the man who had been reading put the book away and said that
they should stop for lunch. There is a place near the bridge where the grass is soft and the trees
give shade. They ate bread and cheese, and drank water from a bottle, and then they talked about
the city, about the work they had left there, and about the days that were still to come.
What is the time? It is ten past three. How many tokens are in this sentence? Let us count them.
The server streams tokens to every client at the pace the client can read, and it keeps the
stream smooth while the device is busy with other requests. Each request has a buffer, and the
scheduler reads how full the buffers are when it decides who runs next.
function add(a, b) { return a + b; }
for (let i = 0; i < 10; i++) { console.log(i * 2); }
if (value === null) { throw new Error("value is missing"); }
The numbers 1, 2, 3, 10, 20, 100, 2024 and 3.14 appear in the text as well.
She said: "I think we should go now." He answered, "Yes, let's go." They went home together.
`;

const PRETOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/**
 * The byte-level alphabet: printable Latin-1 bytes stand for themselves, the others are shifted to
 * code points from 256 up, so every byte is one visible character and spaces become "Ġ".
 */
function byteAlphabet(): string[] {
  const chars: string[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    chars[b] = String.fromCodePoint(printable ? b : next++);
  }
  return chars;
}

/** Greedy BPE training: repeatedly merge the most frequent adjacent pair (ties by text order). */
function trainMerges(numNewTokens: number, alphabet: string[]): [string, string][] {
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const piece of CORPUS.match(PRETOKENIZE) ?? []) {
    const word = Array.from(encoder.encode(piece), (b) => alphabet[b]).join("\u0000");
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  const words = [...counts].map(([w, count]) => ({ symbols: w.split("\u0000"), count }));
  const known = new Set(alphabet);
  const merges: [string, string][] = [];
  let added = 0;
  while (added < numNewTokens) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = symbols[i] + "\u0000" + symbols[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null;
    let bestCount = 0;
    for (const [key, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) break; // every word is a single token
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    if (!known.has(a + b)) {
      known.add(a + b);
      added++;
    }
    for (const w of words) {
      const merged: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          merged.push(a + b);
          i++;
        } else merged.push(w.symbols[i]);
      }
      w.symbols = merged;
    }
  }
  return merges;
}

function buildTokenizerJson(size: number): Record<string, unknown> {
  const alphabet = byteAlphabet();
  const vocab: Record<string, number> = {};
  let nextId = 0;
  for (const token of [...SPECIAL_TOKENS, ...alphabet]) vocab[token] = nextId++;
  const merges = trainMerges(size - nextId, alphabet);
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = nextId++;

  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => [a, b]),
    },
  };
}

function tokenizerConfigJson(maxPos: number): Record<string, unknown> {
  const addedTokensDecoder: Record<string, unknown> = {};
  SPECIAL_TOKENS.forEach((content, id) => {
    addedTokensDecoder[String(id)] = {
      content,
      lstrip: false,
      normalized: false,
      rstrip: false,
      single_word: false,
      special: true,
    };
  });
  return {
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: ["<|im_start|>", "<|im_end|>"],
    bos_token: "<|im_start|>",
    eos_token: "<|im_end|>",
    pad_token: "<|im_end|>",
    unk_token: "<|endoftext|>",
    chat_template: CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    model_max_length: maxPos,
    tokenizer_class: "GPT2Tokenizer",
  };
}

// ---- the demo model ----

export const DEMO_SPEC: TinyModelSpec = {
  hiddenSize: 256,
  intermediateSize: 688,
  numLayers: 4,
  numHeads: 8,
  numKvHeads: 2,
  tied: true,
  dtype: "F16",
  seed: 20240601,
};

/** Root of Sluice's on-disk cache: $SLUICE_CACHE, else ~/.cache/sluice. */
export function sluiceCacheDir(): string {
  const configured = Deno.env.get("SLUICE_CACHE");
  if (configured) return configured;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return join(home, ".cache", "sluice");
}

/** The cached demo model directory, generated on first use (atomically, via rename). */
export async function demoModelDir(): Promise<string> {
  const root = sluiceCacheDir();
  const dir = join(root, "demo-v1");
  if (await isDir(dir)) return dir;
  await Deno.mkdir(root, { recursive: true });
  const tmp = await Deno.makeTempDir({ dir: root, prefix: ".demo-v1-" });
  try {
    await writeTinyModel(tmp, DEMO_SPEC);
    await Deno.rename(tmp, dir);
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    // Another process may have finished first; its directory is as good as ours.
    if (!(await isDir(dir))) throw e;
  }
  return dir;
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
