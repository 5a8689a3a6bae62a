// The import graph of the project's own TypeScript files and its cycles (strongly connected
// components of more than one node, by Tarjan's algorithm), read from static `import`/`export …
// from` specifiers and dynamic `import("…")` of relative paths. Type-only imports make no runtime
// cycle, but they still tie the files together: counted. Used by scripts/structure.ts and by
// tests/import_cycles_test.ts.

import { dirname, join, resolve } from "node:path";

const IMPORT =
  /(?:import|export)\s[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']|import\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory && !entry.name.startsWith(".") && entry.name !== "node_modules") {
      yield* tsFiles(path);
    } else if (entry.isFile && entry.name.endsWith(".ts")) yield path;
  }
}

export interface ImportGraph {
  /** Each file's imports among the graph's files (absolute paths). */
  edges: Map<string, string[]>;
  /** Each file's line count. */
  lines: Map<string, number>;
}

/** The graph of every .ts file under `tops` (folders or files, relative to `root`). */
export async function importGraph(root: string, tops: string[]): Promise<ImportGraph> {
  const files: string[] = [];
  for (const top of tops) {
    const path = join(root, top);
    const stat = await Deno.stat(path).catch(() => null);
    if (!stat) continue;
    if (stat.isFile) files.push(path);
    else for await (const f of tsFiles(path)) files.push(f);
  }
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  const lines = new Map<string, number>();
  for (const file of files) {
    const text = await Deno.readTextFile(file);
    lines.set(file, text.split("\n").length - (text.endsWith("\n") ? 1 : 0));
    const out: string[] = [];
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), m[1] ?? m[2]);
      if (known.has(target)) out.push(target);
    }
    edges.set(file, out);
  }
  return { edges, lines };
}

/** Strongly connected components of more than one node (Tarjan's algorithm): the cycles. */
export function cyclesOf(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>(), low = new Map<string, number>();
  const stack: string[] = [], onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index), low.set(v, index), index++;
    stack.push(v), onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) visit(w), low.set(v, Math.min(low.get(v)!, low.get(w)!));
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const component: string[] = [];
      let w: string;
      do component.push(w = stack.pop()!), onStack.delete(w); while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

/** The graph between folders: an edge wherever a file of one imports a file of another. */
export function folderEdges(edges: Map<string, string[]>): Map<string, string[]> {
  const folders = new Map<string, string[]>();
  for (const [from, tos] of edges) {
    const a = dirname(from);
    if (!folders.has(a)) folders.set(a, []);
    for (const to of tos) if (dirname(to) !== a) folders.get(a)!.push(dirname(to));
  }
  return folders;
}
