// What a row of the flag table (flags.ts) holds, and what is derived from rows: the zod shape a
// command parses its flags with, node:util's parseArgs spec, the --help sections, and the engine
// and runtime options the flags set. Nothing here names a flag.

import { z } from "zod";
import type { OpenOptions } from "../runtime/open.ts";

/** The options a flag can set: those openRuntime takes for the engine and for the runtime. */
export type EngineFlagOptions = OpenOptions["engine"];
export type RuntimeFlagOptions = OpenOptions["runtime"];

/** An option set from a flag's value through a conversion (`to`). */
export interface Converted<K, V, T> {
  key: K;
  as: (value: V) => T;
}

/**
 * Where a flag's value goes on one side (`O`): the key of an option that takes the value as it is,
 * or the key and a conversion into what the option takes.
 */
export type Feed<O, V> =
  | { [K in keyof O]-?: [V] extends [O[K]] ? K : never }[keyof O]
  | { [K in keyof O]-?: Converted<K, V, O[K]> }[keyof O];

/** Sets option `key` to `as(value)`. */
export const to = <K extends string, V, T>(key: K, as: (value: V) => T): Converted<K, V, T> => ({
  key,
  as,
});

/** One flag. */
export interface Flag {
  /** How a given value is checked and converted, with the default; a boolean is a switch. */
  schema: z.ZodType;
  /**
   * Its --help lines: the flag as typed, then its description's lines (as wrapped in the text).
   * Absent: it is named on a neighbour's line or in the command's header.
   */
  usage?: readonly string[];
  /** The engine option it sets (a Feed). */
  engine?: unknown;
  /** The runtime option it sets (a Feed). */
  runtime?: unknown;
}

export type Rows = Record<string, Flag>;

/** A row's feeds, checked against the options and the schema's output. */
interface Checked<Row extends Flag> {
  engine?: Feed<EngineFlagOptions, z.output<Row["schema"]>>;
  runtime?: Feed<RuntimeFlagOptions, z.output<Row["schema"]>>;
}

/** A row, as written (its option keys kept for the options' types), once checked. */
export function flag<const Row extends Flag>(row: Row & Checked<Row>): Row {
  return row;
}

/** A --help section: its title, and its rows in the order they are listed. */
export interface Section<T extends Rows = Rows> {
  title: string;
  flags: T;
}

export const section = <T extends Rows>(title: string, flags: T): Section<T> => ({ title, flags });

/** The rows of `sections`, together. */
export type RowsOf<S extends readonly Section[]> = S extends
  readonly [infer First extends Section, ...infer Rest extends readonly Section[]]
  ? First["flags"] & RowsOf<Rest>
  : unknown;

export function rowsOf<const S extends readonly Section[]>(sections: S): RowsOf<S> {
  return Object.assign({}, ...sections.map((s) => s.flags));
}

/** The zod shape of `rows`: each flag's schema under its name. */
export type ShapeOf<T extends Rows> = { -readonly [K in keyof T]: T[K]["schema"] };

/** The parsed values of `rows`' flags. */
export type ValuesOf<T extends Rows> = z.output<z.ZodObject<ShapeOf<T>>>;

export function shapeOf<T extends Rows>(rows: T): ShapeOf<T> {
  return Object.fromEntries(Object.entries(rows).map(([name, row]) => [name, row.schema])) as never;
}

/** A switch takes no value (`--json`): its schema is a boolean, maybe with a default. */
function isSwitch(schema: z.ZodType): boolean {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) {
    return isSwitch(schema.unwrap() as z.ZodType);
  }
  return schema instanceof z.ZodBoolean;
}

/** Whether a flag may be given several times (its schema is an array). */
function isList(schema: z.ZodType): boolean {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) {
    return isList(schema.unwrap() as z.ZodType);
  }
  return schema instanceof z.ZodArray;
}

/** node:util parseArgs's options for `rows`. */
export function parseArgsSpec(
  rows: Rows,
): Record<string, { type: "string" | "boolean"; multiple?: boolean }> {
  return Object.fromEntries(
    Object.entries(rows).map(([name, row]) => [
      name,
      {
        type: isSwitch(row.schema) ? "boolean" : "string",
        ...(isList(row.schema) ? { multiple: true } : {}),
      },
    ]),
  );
}

/** Where the descriptions start: column 25, after a two-space indent. */
const TERM_WIDTH = 23;

function usageLines([term, ...description]: readonly string[]): string[] {
  const gap = term.length < TERM_WIDTH ? " ".repeat(TERM_WIDTH - term.length) : "   ";
  const [first, ...rest] = description;
  const head = first === undefined ? `  ${term}` : `  ${term}${gap}${first}`;
  return [head, ...rest.map((line) => " ".repeat(TERM_WIDTH + 2) + line)];
}

/** A command's --help: its header, its sections, and --help itself. */
export function usageOf(header: string, sections: readonly Section[]): string {
  const text = sections.map(({ title, flags }) =>
    [`${title}:`, ...Object.values(flags).flatMap((f) => f.usage ? usageLines(f.usage) : [])]
      .join("\n")
  );
  return [header, ...text, usageLines(["-h, --help", "this text"])[0]].join("\n\n");
}

/** The key of the option that a row sets on `Side`, or never. */
type KeyOn<Row, Side extends string> = Row extends { [S in Side]: infer F }
  ? F extends { key: infer K } ? K : F
  : never;

/** The options `rows` set on one side, typed as that side declares them. */
type Fed<T extends Rows, O, Side extends "engine" | "runtime"> = Pick<
  O,
  Extract<{ [K in keyof T]: KeyOn<T[K], Side> }[keyof T], keyof O>
>;

/** A row's feed as a key and a conversion (none: the value as it is). */
function feedOf(feed: unknown): Converted<string, unknown, unknown> | undefined {
  if (typeof feed === "string") return { key: feed, as: (value) => value };
  return feed as Converted<string, unknown, unknown> | undefined;
}

/** The engine and runtime options that `rows` set. */
export interface FedOptions<T extends Rows> {
  engine: Fed<T, EngineFlagOptions, "engine">;
  runtime: Fed<T, RuntimeFlagOptions, "runtime">;
}

/** The engine and runtime options that the flag values `values` of `rows` set. */
export function fedOptions<T extends Rows>(
  rows: T,
  values: Record<string, unknown>,
): FedOptions<T> {
  const engine: Record<string, unknown> = {};
  const runtime: Record<string, unknown> = {};
  for (const [name, row] of Object.entries(rows)) {
    for (const [options, feed] of [[engine, row.engine], [runtime, row.runtime]] as const) {
      const f = feedOf(feed);
      if (f) options[f.key] = f.as(values[name]);
    }
  }
  return { engine, runtime } as FedOptions<T>;
}

/** The flag of `rows` that sets runtime option `option`. */
export function flagSetting(rows: Rows, option: string): string {
  const found = Object.entries(rows).find(([, row]) => feedOf(row.runtime)?.key === option);
  if (!found) throw new Error(`no flag sets the runtime's ${option}`);
  return found[0];
}
