// Every flag a command accepts is named in its --help text, so a flag added to a schema in main.ts
// without a usage line fails here.

import { COMMAND_FLAGS } from "../../main.ts";
import { assert } from "../helpers/testing.ts";

Deno.test("usage: every flag of serve and generate is documented in its --help", () => {
  for (const [command, { schema, usage }] of Object.entries(COMMAND_FLAGS)) {
    for (const flag of Object.keys(schema.shape)) {
      assert(
        new RegExp(`--${flag}\\b`).test(usage),
        `${command} --help does not mention --${flag}`,
      );
    }
  }
});
