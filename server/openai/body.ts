// Reads a request body as JSON and checks its shape against a zod schema, answering with OpenAI's
// 400 envelopes (not JSON, wrong content type, the first field that does not fit).

import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, zodToApiError } from "./errors.ts";

export async function parseBody<T>(c: Context, schema: z.ZodType<T>): Promise<T> {
  const type = c.req.header("content-type") ?? "";
  if (!type.includes("application/json")) {
    throw new ApiError(400, "Content-Type must be application/json", null, "invalid_content_type");
  }
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ApiError(400, "The request body is not valid JSON", null, "invalid_json");
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw zodToApiError(parsed.error);
  return parsed.data;
}
