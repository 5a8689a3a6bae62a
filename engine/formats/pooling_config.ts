// How a model's token states become one vector, read from its own files: sentence-transformers'
// modules.json names a Pooling module (its folder's config.json says cls, mean or last token) and,
// if present, a Normalize module. A directory without them has no pooling of its own (null): a
// chat model, which cannot serve embeddings unless its architecture is an embedding one.

import { join } from "node:path";
import { z } from "zod";

export type PoolingMode = "cls" | "mean" | "last";

export interface PoolingConfig {
  mode: PoolingMode;
  /** L2-normalise the pooled vector (a Normalize module, or the model's documented default). */
  normalize: boolean;
}

const ModulesJson = z.array(z.object({ path: z.string().default(""), type: z.string() }));

const PoolingJson = z.object({
  pooling_mode_cls_token: z.boolean().optional(),
  pooling_mode_mean_tokens: z.boolean().optional(),
  pooling_mode_max_tokens: z.boolean().optional(),
  pooling_mode_mean_sqrt_len_tokens: z.boolean().optional(),
  pooling_mode_weightedmean_tokens: z.boolean().optional(),
  pooling_mode_lasttoken: z.boolean().optional(),
});

/** The pooling a sentence-transformers directory declares, or null where it declares none. */
export async function readPoolingConfig(dir: string): Promise<PoolingConfig | null> {
  const modules = await readJson(join(dir, "modules.json"));
  if (modules === null) return null;
  const list = ModulesJson.parse(modules);
  const pooling = list.find((m) => m.type.endsWith(".Pooling"));
  if (!pooling) return null;
  const normalize = list.some((m) => m.type.endsWith(".Normalize"));
  const json = await readJson(join(dir, pooling.path, "config.json"));
  if (json === null) {
    throw new Error(`${join(dir, pooling.path)}: the Pooling module's config.json is missing`);
  }
  return { mode: poolingMode(PoolingJson.parse(json)), normalize };
}

/** The one mode a Pooling config switches on; the modes Sluice does not pool by are refused. */
export function poolingMode(c: z.infer<typeof PoolingJson>): PoolingMode {
  const unsupported = [
    c.pooling_mode_max_tokens && "max",
    c.pooling_mode_mean_sqrt_len_tokens && "mean_sqrt_len",
    c.pooling_mode_weightedmean_tokens && "weightedmean",
  ].filter(Boolean);
  if (unsupported.length > 0) {
    throw new Error(`pooling by ${unsupported.join(", ")} is not supported`);
  }
  const on: PoolingMode[] = [];
  if (c.pooling_mode_cls_token) on.push("cls");
  if (c.pooling_mode_mean_tokens) on.push("mean");
  if (c.pooling_mode_lasttoken) on.push("last");
  if (on.length !== 1) {
    throw new Error(
      `the Pooling config must switch on exactly one of cls, mean, last (got ${on.length})`,
    );
  }
  return on[0];
}

async function readJson(path: string): Promise<unknown | null> {
  try {
    return JSON.parse(await Deno.readTextFile(path));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
