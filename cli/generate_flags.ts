// generate's own section of the flag table (flags.ts): the prompt and how it is sampled.

import { z } from "zod";
import { flag, section } from "./flag_row.ts";

const idList = z.string().regex(/^\d+(,\d+)*$/, "expected comma-separated token ids")
  .transform((s) => s.split(",").map(Number));

/** generate's prompt (`--chat` is named in its header and on --prompt's line). */
export const PROMPT = section("prompt and sampling", {
  prompt: flag({
    schema: z.string().optional(),
    usage: [
      "--prompt TEXT",
      "the prompt as text (--chat: as a user message in the chat template)",
    ],
  }),
  "prompt-ids": flag({
    schema: idList.optional(),
    usage: ["--prompt-ids 1,2,3", "the prompt as token ids"],
  }),
  chat: flag({ schema: z.boolean().default(false) }),
  "max-tokens": flag({
    schema: z.coerce.number().int().min(0).default(64),
    usage: ["--max-tokens N", "most tokens to generate (default 64)"],
  }),
  temperature: flag({
    schema: z.coerce.number().min(0).max(2).default(0),
    usage: ["--temperature T", "0 (default) is greedy"],
  }),
  "top-k": flag({
    schema: z.coerce.number().int().min(0).default(0),
    usage: ["--top-k K, --top-p P", "sampling filters (default: off)"],
  }),
  "top-p": flag({ schema: z.coerce.number().gt(0).max(1).default(1) }),
  seed: flag({
    schema: z.coerce.number().int().min(0).optional(),
    usage: ["--seed S", "sampling seed (default: random)"],
  }),
  "top-logprobs": flag({
    schema: z.coerce.number().int().min(0).max(20).default(0),
    usage: ["--top-logprobs K", "K likeliest ids per step, 0-20 (default 0)"],
  }),
  json: flag({
    schema: z.boolean().default(false),
    usage: [
      "--json",
      'print {"tokens":[...],"top_logprobs":[...],"finish_reason":"..."}',
    ],
  }),
});
