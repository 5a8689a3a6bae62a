// Whole HTTP/1.1 responses with a JSON body, as bytes: what the front door writes itself instead of
// handing a request to the HTTP server. An error carries OpenAI's envelope and closes the
// connection; a probe's answer (routes/health.ts) keeps it open.

import { ApiError } from "../openai/errors.ts";

const REASONS: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  501: "Not Implemented",
  503: "Service Unavailable",
  505: "HTTP Version Not Supported",
};

const encoder = new TextEncoder();

/** A response of `status` whose body is `value` as JSON, with `headers` ("name: value") added. */
export function jsonResponseBytes(
  status: number,
  value: unknown,
  headers: readonly string[] = [],
): Uint8Array {
  const body = JSON.stringify(value);
  const head = [
    `HTTP/1.1 ${status} ${REASONS[status] ?? "Error"}`,
    "content-type: application/json",
    `content-length: ${encoder.encode(body).length}`,
    ...headers,
    `date: ${new Date().toUTCString()}`,
  ];
  return encoder.encode(head.join("\r\n") + "\r\n\r\n" + body);
}

/** OpenAI's error envelope, after which the connection closes. */
export function errorResponseBytes(status: number, message: string, code: string): Uint8Array {
  return jsonResponseBytes(status, new ApiError(status, message, null, code).toJSON(), [
    "connection: close",
    ...(status === 503 ? ["retry-after: 1"] : []),
  ]);
}

/** Writes all of `bytes` (a Deno.Conn write may take only part). */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}
