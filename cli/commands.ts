// serve's and generate's flags: each command's schema, usage and options, derived from the flag
// table's sections it takes (flags.ts), and the rules between flags: the presets'
// (runtime/policy/index.ts), the host tier's own flags, --recompute's default, one prompt.

import { parseArgs } from "node:util";
import { z } from "zod";
import type { AutoOption } from "../runtime/policy/economics.ts";
import { presetProblems } from "../runtime/policy/index.ts";
import {
  fedOptions,
  flagSetting,
  parseArgsSpec,
  type Rows,
  rowsOf,
  shapeOf,
  usageOf,
  type ValuesOf,
} from "./flag_row.ts";
import { DEFAULT_HOST_KV_MB, ENGINE, MODEL } from "./flags.ts";
import { PROMPT } from "./generate_flags.ts";
import { HTTP, MODELS, REQUESTS } from "./serve_flags.ts";

/** What every command opens a model with. */
const SHARED = rowsOf([MODEL, ENGINE]);
type SharedValues = ValuesOf<typeof SHARED>;

/** --recompute as given; absent, "auto" unless a fixed --preempt was given. */
function recomputeOf(flags: SharedValues): "off" | "auto" {
  return flags.recompute ?? (flags.preempt === undefined ? "auto" : "off");
}

/** The options the user gave that --sched auto would otherwise choose. */
function givenOf(flags: SharedValues): AutoOption[] {
  const given: AutoOption[] = [];
  // The host tier stays where the user sized it or asked for something that lives there.
  const host = flags["host-kv-mb"] !== undefined || flags["write-through"] !== undefined ||
    flags["swap-reuse"] !== undefined || flags.preempt === "swap" || flags.offload !== "none";
  if (host) given.push("hostTier");
  if (flags["write-through"] !== undefined) given.push("writeThrough");
  if (flags.preempt !== undefined || flags.recompute !== undefined) {
    given.push("recompute", "preempt");
  }
  return given;
}

/** The engine and runtime options that `flags` of `rows` set: each row's, and --recompute's. */
function optionsOf<T extends Rows>(rows: T, flags: SharedValues) {
  const { engine, runtime } = fedOptions(rows, flags);
  const recompute = recomputeOf(flags);
  return {
    // --recompute auto's choice and --sched auto's read the cost model, profiled at load.
    engine: {
      ...engine,
      profileCosts: recompute === "auto" || flags.sched === "auto" || undefined,
    },
    runtime: { ...runtime, recompute, given: givenOf(flags) },
  };
}

/**
 * Flags that only make sense together (runtime/policy/index.ts says which, by option), checked on
 * each command's schema before anything loads.
 */
function checkPreset(f: SharedValues, ctx: z.RefinementCtx): void {
  const hostTier = (f["host-kv-mb"] ?? DEFAULT_HOST_KV_MB) > 0;
  const { runtime } = optionsOf(SHARED, f);
  // Auto runs tokenflow or fcfs, and tokenflow wherever one of its own options is given: the
  // options are checked as tokenflow's (runtime/policy/economics.ts).
  const sched = runtime.policy === "auto" ? "tokenflow" : runtime.policy;
  for (const p of presetProblems(sched, runtime, { hostTier })) {
    ctx.addIssue({ code: "custom", path: [flagSetting(SHARED, p.option)], message: p.message });
  }
  // The host tier's own flags do nothing without it.
  for (const flag of ["write-through", "swap-reuse"] as const) {
    if (!hostTier && f[flag] !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: [flag],
        message: "needs a host KV tier: pass --host-kv-mb MB",
      });
    }
  }
}

const SERVE_SECTIONS = [MODEL, MODELS, HTTP, REQUESTS, ENGINE] as const;
const SERVE_ROWS = rowsOf(SERVE_SECTIONS);
const serveSchema = z.object(shapeOf(SERVE_ROWS)).superRefine(checkPreset);

const SERVE_HEADER = `usage: deno task serve [flags]          (main.ts serve)

An OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/models, /health,
/metrics. The port opens once the model is found (or downloaded); /health says "loading" (503) until
the weights are on the GPU and every kernel a request can need is compiled, then "ready". A model
that cannot be loaded ends the process (exit 1).`;

const GENERATE_SECTIONS = [PROMPT, MODEL, ENGINE] as const;
const GENERATE_ROWS = rowsOf(GENERATE_SECTIONS);
const generateSchema = z.object(shapeOf(GENERATE_ROWS))
  .refine((f) => (f.prompt === undefined) !== (f["prompt-ids"] === undefined), {
    message: "pass exactly one of --prompt or --prompt-ids",
  }).refine((f) => (f.model?.length ?? 0) <= 1, {
    message: "generate runs one model: pass --model once",
  }).superRefine(checkPreset);

const GENERATE_HEADER =
  `usage: deno task generate (--prompt TEXT [--chat] | --prompt-ids 1,2,3) [flags]
                                        (main.ts generate)

Runs one prompt and prints the reply as it is generated (or, with --json, the ids and top logprobs).`;

/** Each command's flags and usage (tests check that every flag is documented). */
export const COMMAND_FLAGS = {
  serve: { schema: serveSchema, usage: usageOf(SERVE_HEADER, SERVE_SECTIONS) },
  generate: { schema: generateSchema, usage: usageOf(GENERATE_HEADER, GENERATE_SECTIONS) },
};

export type ServeFlags = z.output<typeof serveSchema>;
export type GenerateFlags = z.output<typeof generateSchema>;

/** serve's engine and runtime options. */
export function serveOptions(flags: ServeFlags) {
  const { engine, runtime } = optionsOf(SERVE_ROWS, flags);
  const defaultSlo = { ttftMs: flags["slo-ttft-ms"], tbtMs: flags["slo-tbt-ms"] };
  return { engine, runtime: { ...runtime, defaultSlo } };
}

/** generate's engine and runtime options: one request, as long as it asks. */
export function generateOptions(flags: GenerateFlags) {
  const { engine, runtime } = optionsOf(GENERATE_ROWS, flags);
  return { engine, runtime: { ...runtime, maxQueue: 1, maxTokensLimit: Number.MAX_SAFE_INTEGER } };
}

/** A flag the command does not know, or a value it cannot take: exit 2 with the usage. */
export class UsageError extends Error {}

/** Every command's flags: one another command takes is refused by name, not as unknown. */
const ALL_FLAGS = parseArgsSpec(rowsOf([PROMPT, MODEL, MODELS, HTTP, REQUESTS, ENGINE]));

/** `args` parsed and checked by `schema`; throws UsageError. */
export function parseFlags<T extends z.ZodObject>(schema: T, args: string[]): z.output<T> {
  let values;
  try {
    ({ values } = parseArgs({ args, options: ALL_FLAGS, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const stray = Object.keys(values).find((k) => !Object.hasOwn(schema.shape, k));
  if (stray) throw new UsageError(`unknown flag --${stray} for this command`);
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    throw new UsageError(
      parsed.error.issues.map((i) => (i.path.length ? `--${i.path.join(".")}: ` : "") + i.message)
        .join("; "),
    );
  }
  return parsed.data;
}
