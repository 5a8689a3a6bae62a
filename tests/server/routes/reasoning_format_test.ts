// Reasoning: a template that opens <think> for the answer makes the whole (unclosed) answer
// reasoning. By default it comes back as reasoning_content; --reasoning-format none
// (ServerConfig.reasoningInline) leaves it in the content, and a request's reasoning_format
// overrides the server's default either way.

import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";

const THINKING_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" +
  "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";

async function answer(inline: boolean, reasoningFormat?: string) {
  const s = await startServer({
    chatTemplate: THINKING_TEMPLATE,
    config: { reasoningInline: inline },
  });
  try {
    const r = await s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: [{ role: "user", content: "Think." }],
      max_tokens: 12,
      temperature: 0,
      ignore_eos: true,
      ...(reasoningFormat ? { reasoning_format: reasoningFormat } : {}),
    });
    assertEquals(r.status, 200);
    return (await r.json()).choices[0].message;
  } finally {
    await s.close();
  }
}

Deno.test("reasoning: split by default, inline with the server flag, a request overrides", async () => {
  const split = await answer(false);
  assert(split.reasoning_content.length > 0, "the answer is all reasoning");
  assert(!split.content, `no text outside the reasoning: ${JSON.stringify(split.content)}`);

  const inline = await answer(true);
  assertEquals(inline.reasoning_content ?? null, null);
  assertEquals(inline.content, split.reasoning_content, "the same greedy text, left inline");

  const overridden = await answer(true, "auto");
  assertEquals(overridden.reasoning_content, split.reasoning_content);
  const forcedInline = await answer(false, "none");
  assertEquals(forcedInline.content, inline.content);
});
