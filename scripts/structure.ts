// Structure figures for the re-layering: the largest source file in each layer and the import
// cycles among the project's own TypeScript files and folders (scripts/import_graph.ts). Run:
//   deno run -A scripts/structure.ts
// WGSL, tests and benchmarks are counted apart from the three layers.

import { dirname, relative, resolve } from "node:path";
import { cyclesOf, folderEdges, importGraph } from "./import_graph.ts";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");
const LAYERS = ["server", "runtime", "engine"];

const { edges, lines } = await importGraph(ROOT, [...LAYERS, "bench", "cli", "main.ts"]);
const files = [...edges.keys()];
const cycles = cyclesOf(edges);
// Folders too: engine/model importing engine/gpu while engine/gpu imports engine/model is a cycle
// between the folders even when no two files import each other.
const folderCycles = cyclesOf(folderEdges(edges));

console.log("largest file per layer (lines):");
for (const layer of LAYERS) {
  const mine = files.filter((f) => relative(ROOT, f).startsWith(layer + "/"));
  const big = mine.reduce((a, b) => lines.get(b)! > lines.get(a)! ? b : a);
  console.log(`  ${layer}/: ${relative(ROOT, big)} ${lines.get(big)} (${mine.length} files)`);
}
console.log(`import cycles: ${cycles.length}`);
for (const c of cycles) console.log("  " + c.map((f) => relative(ROOT, f)).join(" ↔ "));
console.log(`folder import cycles: ${folderCycles.length}`);
for (const c of folderCycles) {
  console.log("  " + c.map((f) => relative(ROOT, f) + "/").join(" ↔ "));
}
