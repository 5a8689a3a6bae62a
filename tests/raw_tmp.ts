import { MODEL_ID, startServer } from "./server/harness.ts";
const s = await startServer();
const schema = {
  type: "object",
  properties: { name: { type: "string", maxLength: 8 } },
  required: ["name"],
  additionalProperties: false,
};
for (const seed of [1, 2, 3, 4, 5, 6]) {
  const r = await s.post("/v1/chat/completions", {
    model: MODEL_ID,
    messages: [{ role: "user", content: "Name?" }],
    response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } },
    temperature: 1,
    seed,
    max_tokens: 100,
    logprobs: true,
    return_tokens_as_token_ids: true,
  });
  const j = await r.json();
  const c = j.choices[0];
  console.log(
    JSON.stringify(c.message.content),
    c.finish_reason,
    c.logprobs.content.map((t: any) => t.token.replace("token_id:", "")).join(","),
  );
}
await s.close();
