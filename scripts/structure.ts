// Structure figures for the re-layering: the largest source file in each layer and the import
// cycles among the project's own TypeScript files (strongly connected components of more than one
// file, by Tarjan's algorithm over static `import`/`export … from` specifiers). Run:
//   deno run -A scripts/structure.ts
// WGSL, tests and benchmarks are counted apart from the three layers.

import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");
const LAYERS = ["server", "runtime", "engine"];

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory && !entry.name.startsWith(".") && entry.name !== "node_modules") {
      yield* tsFiles(path);
    } else if (entry.isFile && entry.name.endsWith(".ts")) yield path;
  }
}

const IMPORT =
  /(?:import|export)\s[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']|import\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

const files: string[] = [];
for (const top of [...LAYERS, "bench", "main.ts"]) {
  const path = join(ROOT, top);
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
    // Type-only imports make no runtime cycle, but they still tie the files together: counted.
    const target = resolve(dirname(file), m[1] ?? m[2]);
    if (known.has(target)) out.push(target);
  }
  edges.set(file, out);
}

/** Strongly connected components of more than one node (Tarjan's algorithm): the cycles. */
function cyclesOf(graph: Map<string, string[]>): string[][] {
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
      if (component.length > 1) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

const cycles = cyclesOf(edges);
// Folders too: engine/model importing engine/gpu while engine/gpu imports engine/model is a cycle
// between the folders even when no two files import each other.
const folderEdges = new Map<string, string[]>();
for (const [from, tos] of edges) {
  const a = dirname(from);
  if (!folderEdges.has(a)) folderEdges.set(a, []);
  for (const to of tos) if (dirname(to) !== a) folderEdges.get(a)!.push(dirname(to));
}
const folderCycles = cyclesOf(folderEdges);

console.log("largest file per layer (lines):");
for (const layer of LAYERS) {
  const mine = files.filter((f) => relative(ROOT, f).startsWith(layer + "/"));
  const big = mine.reduce((a, b) => lines.get(b)! > lines.get(a)! ? b : a);
  console.log(`  ${layer}/: ${relative(ROOT, big)} ${lines.get(big)} (${mine.length} files)`);
}
console.log(`import cycles: ${cycles.length}`);
for (const c of cycles) console.log("  " + c.map((f) => relative(ROOT, f)).sort().join(" ↔ "));
console.log(`folder import cycles: ${folderCycles.length}`);
for (const c of folderCycles) {
  console.log("  " + c.map((f) => relative(ROOT, f) + "/").sort().join(" ↔ "));
}
