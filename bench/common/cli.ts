// How every benchmark reads its flags: node:util's strict parseArgs (an unknown flag is an error,
// never silently ignored), values checked with zod, and every problem reported as one UsageError
// line that bench/main.ts prints above the bench's usage (exit 2), before any work starts.

import { parseArgs } from "node:util";
import { z } from "zod";

/** A flag the bench does not know, or a value it cannot take. */
export class UsageError extends Error {}

/** Parses `--name value` / `--name=value` string flags named by the schema's keys. */
export function parseBenchFlags<T extends z.ZodObject>(schema: T, args: string[]): z.infer<T> {
  const options = Object.fromEntries(
    Object.keys(schema.shape).map((k) => [k, { type: "string" as const }]),
  );
  let values;
  try {
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  return checkFlags(schema, values);
}

/** Checks parsed flag values against the schema; the issues become one UsageError line. */
export function checkFlags<T extends z.ZodType>(schema: T, values: unknown): z.infer<T> {
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    throw new UsageError(
      parsed.error.issues.map((i) => (i.path.length ? `--${i.path.join(".")}: ` : "") + i.message)
        .join("; "),
    );
  }
  return parsed.data;
}
