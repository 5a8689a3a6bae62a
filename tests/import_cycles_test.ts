// No file of the project imports itself back through others, and no folder does (issue 30):
// scripts/import_graph.ts reads every static import and re-export (type-only ones too) and neither
// the files' graph nor the folders' may have a cycle. A cycle makes load order matter and hides
// which concept depends on which; between folders, it is an arrow running back up a layer.

import { fileURLToPath } from "node:url";
import { cyclesOf, folderEdges, importGraph } from "../scripts/import_graph.ts";
import { assert, assertEquals } from "./helpers/testing.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

Deno.test("no import cycles among the files or folders of engine/, runtime/, server/, cli/, bench/", async () => {
  const { edges } = await importGraph(ROOT, [
    "engine",
    "runtime",
    "server",
    "cli",
    "bench",
    "main.ts",
  ]);
  assert(edges.size > 300, `only ${edges.size} files found`);
  const relative = (cycles: string[][]) => cycles.map((c) => c.map((f) => f.slice(ROOT.length)));
  assertEquals(relative(cyclesOf(edges)), [], "files");
  assertEquals(relative(cyclesOf(folderEdges(edges))), [], "folders");
});

Deno.test("the cycle finder finds a cycle, and only the files in it", () => {
  const graph = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a", "d"]], ["d", []]]);
  assertEquals(cyclesOf(graph), [["a", "b", "c"]]);
});
