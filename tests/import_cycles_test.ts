// No file of the project imports itself back through others (issue 30): scripts/import_graph.ts
// reads every static import and re-export (type-only ones too) and the graph must have no cycle.
// A cycle makes load order matter and hides which concept depends on which. (Cycles between
// folders, which scripts/structure.ts also lists, are issue 30's larger work and not checked yet.)

import { fileURLToPath } from "node:url";
import { cyclesOf, importGraph } from "../scripts/import_graph.ts";
import { assert, assertEquals } from "./helpers/testing.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

Deno.test("no import cycles among the files of engine/, runtime/, server/, bench/ and main.ts", async () => {
  const { edges } = await importGraph(ROOT, ["engine", "runtime", "server", "bench", "main.ts"]);
  assert(edges.size > 300, `only ${edges.size} files found`);
  const cycles = cyclesOf(edges).map((c) => c.map((f) => f.slice(ROOT.length)));
  assertEquals(cycles, []);
});

Deno.test("the cycle finder finds a cycle, and only the files in it", () => {
  const graph = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a", "d"]], ["d", []]]);
  assertEquals(cyclesOf(graph), [["a", "b", "c"]]);
});
