// Media types are parsed, not searched: only application/json (any case, any parameters) is JSON;
// everything else, the text/plain trick included, is 415 with OpenAI's envelope.

import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { mediaType, parseBody } from "../../../server/openai/body.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("body: media type essence", () => {
  const cases: [string | undefined, string | null][] = [
    ["application/json", "application/json"],
    ["Application/JSON; charset=UTF-8", "application/json"],
    ["  application/json  ;charset=utf-8", "application/json"],
    ["text/plain;charset=application/json", "text/plain"],
    ["text/plain; x=application/json", "text/plain"],
    ["multipart/form-data; boundary=application/json", "multipart/form-data"],
    ["application/json-patch+json", "application/json-patch+json"],
    ["application/json/x", null],
    ["application /json", null],
    ["json", null],
    ["", null],
    [undefined, null],
  ];
  for (const [header, essence] of cases) assertEquals(mediaType(header), essence, String(header));
});

Deno.test("body: only application/json bodies are read", async () => {
  const app = new Hono()
    .post("/", async (c) => c.json(await parseBody(c, z.object({ a: z.number() }))))
    .onError((err, c) => {
      const e = ApiError.from(err);
      return c.json(e.toJSON(), e.status as ContentfulStatusCode);
    });
  const post = async (type: string | null, body = '{"a":1}') => {
    const headers: Record<string, string> = type === null ? {} : { "content-type": type };
    const res = await app.request("/", { method: "POST", headers, body });
    const json = await res.json();
    return [res.status, json.error?.code ?? json] as const;
  };
  assertEquals(await post("application/json"), [200, { a: 1 }]);
  assertEquals(await post("APPLICATION/JSON; charset=utf-8"), [200, { a: 1 }]);
  for (
    const type of [
      "text/plain;charset=application/json",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=application/json",
      "application/jsonp",
    ]
  ) {
    assertEquals(await post(type), [415, "invalid_content_type"], type);
  }
  // Deno's Request gives a string body text/plain when no type is set: that is refused too.
  assertEquals(await post(null), [415, "invalid_content_type"]);
  assertEquals(await post("application/json", "{not json"), [400, "invalid_json"]);
});
