import { assert, assertEquals } from "../../helpers/testing.ts";
import { JsonScanner } from "../../../server/agent/json_scanner.ts";

function scan(text: string): JsonScanner | null {
  const scanner = new JsonScanner();
  for (const ch of text) if (!scanner.push(ch)) return null;
  return scanner;
}

const DOCS = [
  '{"a": [1, -2.5e+3, 0.0, true, false, null], "b": {"c": "x\\"\\\\\\u00e9\\n"}, "d": []}',
  '[{}, [], "", 0, -0]',
  '  { "k" : "v" , "n" : 10 }  ',
];

Deno.test("json scanner: accepts JSON, refuses what is not", () => {
  for (const doc of DOCS) assert(scan(doc)?.finish(), doc);
  assert(scan("12")?.finish());
  for (
    const bad of ["{,}", '{"a" 1}', "[1,]", "01", "1.e5", "tru e", '"\\x"', '{"a":1}}', "[1 2]"]
  ) {
    const scanner = scan(bad);
    assert(scanner === null || !scanner.finish(), bad);
  }
});

Deno.test("json scanner: every prefix of a document closes into valid JSON", () => {
  for (const doc of DOCS) {
    for (let i = 1; i <= doc.length; i++) {
      const prefix = doc.slice(0, i);
      if (prefix.trim() === "") continue; // no value begun: nothing to close
      const scanner = scan(prefix)!;
      // After an object's ',' the comma must be dropped (the arguments stream holds it back).
      const kept = scanner.state === "key" ? prefix.slice(0, prefix.lastIndexOf(",")) : prefix;
      const closed = kept + scanner.completion();
      JSON.parse(closed); // throws if not valid
      if (i === doc.length) assertEquals(JSON.parse(closed), JSON.parse(doc));
    }
  }
});
