// bench/ and the simulation (sim/) reach the engine and the runtime only through their public faces
// and their named bench APIs (issue 30): scripts/import_graph.ts reads every import of bench/'s files (type-only and
// dynamic ones too), and each one into engine/ or runtime/ must be one of these four modules. A
// bench that needs more asks for it by name in a bench API, where the list stays short and seen.

import { fileURLToPath } from "node:url";
import { importGraph } from "../scripts/import_graph.ts";
import { assert, assertEquals } from "./helpers/testing.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

const ALLOWED = [
  "engine/bench_api.ts",
  "engine/engine.ts",
  "runtime/bench_api.ts",
  "runtime/service.ts",
];

Deno.test("bench/ and sim/ import only the engine's and runtime's public faces and bench APIs", async () => {
  const { edges } = await importGraph(ROOT, ["bench", "sim", "engine", "runtime"]);
  const deeper: string[] = [];
  let reached = 0;
  for (const [from, tos] of edges) {
    if (!from.startsWith(`${ROOT}bench/`) && !from.startsWith(`${ROOT}sim/`)) continue;
    for (const to of tos) {
      const target = to.slice(ROOT.length);
      if (!/^(engine|runtime)\//.test(target)) continue;
      reached++;
      if (!ALLOWED.includes(target)) deeper.push(`${from.slice(ROOT.length)} -> ${target}`);
    }
  }
  assert(reached > 20, `only ${reached} imports from bench/ into engine/ and runtime/ found`);
  assertEquals(deeper, []);
});
