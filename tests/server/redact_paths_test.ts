// redactPaths: absolute paths in public error messages shrink to their last component; other
// slashes (rates, URLs, hub ids, relative paths) are left as they are.

import { redactPaths } from "../../server/state/redact_paths.ts";
import { assertEquals } from "../helpers/testing.ts";

Deno.test("redact paths: absolute paths keep only their last component", () => {
  const cases: [string, string][] = [
    [
      '/home/alice/.cache/sluice/models/m/model.safetensors: tensor "x" holds NaN or Inf',
      '…/model.safetensors: tensor "x" holds NaN or Inf',
    ],
    [
      "cannot read '/home/alice/models/m/config.json' (No such file)",
      "cannot read '…/config.json' (No such file)",
    ],
    ["no model in /srv/models/llama/.", "no model in …/llama."],
    ["bad dir /", "bad dir …"],
    ["file:///home/bob/m/tokenizer.json: bad", "…/tokenizer.json: bad"],
    ["C:\\Users\\bob\\m\\config.json: bad", "…/config.json: bad"],
    ["two: /a/b/c.json and /d/e/f.json", "two: …/c.json and …/f.json"],
    // Left alone:
    ["42 tokens/s and/or more", "42 tokens/s and/or more"],
    [
      "cannot download org/model from https://huggingface.co/org/model",
      "cannot download org/model from https://huggingface.co/org/model",
    ],
    ["relative models/m/config.json: bad", "relative models/m/config.json: bad"],
  ];
  for (const [message, redacted] of cases) assertEquals(redactPaths(message), redacted, message);
});
