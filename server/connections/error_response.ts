// A whole HTTP/1.1 response carrying OpenAI's error envelope, as bytes: what the front door
// writes itself to a connection it will not hand to the HTTP server, after which it closes.

import { ApiError } from "../openai/errors.ts";

const REASONS: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  501: "Not Implemented",
  503: "Service Unavailable",
  505: "HTTP Version Not Supported",
};

export function errorResponseBytes(status: number, message: string, code: string): Uint8Array {
  const body = JSON.stringify(new ApiError(status, message, null, code).toJSON());
  const head = [
    `HTTP/1.1 ${status} ${REASONS[status] ?? "Error"}`,
    "content-type: application/json",
    `content-length: ${new TextEncoder().encode(body).length}`,
    "connection: close",
    `date: ${new Date().toUTCString()}`,
    ...(status === 503 ? ["retry-after: 1"] : []),
  ];
  return new TextEncoder().encode(head.join("\r\n") + "\r\n\r\n" + body);
}

/** Writes all of `bytes` (a Deno.Conn write may take only part). */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}
