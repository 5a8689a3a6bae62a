// End to end as `serve` runs it: the runtime opened with openRuntime and the engine in a Worker,
// the HTTP server in front, the official client streaming from it, /metrics, and a shutdown that
// closes the Worker.

import { sampleValue } from "../../server/metrics/parse.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { MODEL_ID, startServer } from "./harness.ts";

Deno.test("worker engine: chat and completions over HTTP, streamed and whole", async () => {
  const s = await startServer({ worker: true });
  try {
    const body = { model: MODEL_ID, prompt: [8, 9, 10], max_tokens: 12, temperature: 0 };
    const whole = await s.client.completions.create({ ...body, ignore_eos: true } as never);
    assertEquals(whole.usage!.completion_tokens, 12);
    const stream = await s.client.completions.create(
      { ...body, ignore_eos: true, stream: true, reading_rate: 200 } as never,
    ) as unknown as AsyncIterable<{ choices: { text: string; finish_reason: string | null }[] }>;
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assertEquals(text, whole.choices[0].text, "paced and streamed, the same greedy text");
    assertEquals(finish, "length");

    const chat = await s.client.chat.completions.create({
      model: MODEL_ID,
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 5,
    });
    assert(chat.usage!.completion_tokens <= 5);

    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "200" }), 3);
    assert(sampleValue(m, "sluice_tokens_generated_total")! >= 24);
    assert(sampleValue(m, "sluice_step_seconds_count")! > 0);
  } finally {
    await s.close(); // runtime.close() ends the Worker: the test would leak it otherwise
  }
});
