// Checks one HTTP/1.x request head as it arrived on the wire, before it goes to the HTTP server.
// Deno's server answers malformed framing with a bare, empty 400 that no client library can
// explain; checked here, the client gets OpenAI's error envelope instead. The checks are the
// framing rules a request smuggler or a broken client trips (RFC 9112 §6): one way to know where
// the body ends, a Content-Length that is one non-negative number, exactly one Host.

import type { BodyFraming } from "./body_framing.ts";

/** What the front door needs to know of a head it let through. */
export interface RequestHead {
  method: string;
  /** The head's length (request line and header lines). */
  bytes: number;
  /** The request target as sent (origin form: path and query). */
  target: string;
  /** The Host header's value (null: none, as HTTP/1.0 may send). */
  host: string | null;
  /** An Origin header was sent (a browser's cross-origin request, answered with CORS headers). */
  origin: boolean;
  /** The client asked to close after this request (HTTP/1.0, or `Connection: close`). */
  closeAfter: boolean;
  /** Where the body ends: a byte count, or chunked framing. */
  body: BodyFraming;
}

/** A head that must not reach the server: answered with `status` and the envelope. */
export interface HeadProblem {
  status: 400 | 431 | 501 | 505;
  message: string;
  code: string;
}

/** Most header lines a head may have (Deno's server refuses from about 128 on, bare). */
export const MAX_HEADER_LINES = 100;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/(\d)\.(\d)$/;

/** Parses the head's text (request line and header lines, the final blank line excluded). */
export function checkRequestHead(text: string): RequestHead | HeadProblem {
  const lines = text.split("\r\n");
  const requestLine = REQUEST_LINE.exec(lines[0]);
  if (!requestLine) return problem(400, "Malformed HTTP request line", "malformed_request");
  const [, method, target, major, minor] = requestLine;
  if (major !== "1") {
    return {
      status: 505,
      message: `HTTP/${major}.${minor} is not supported`,
      code: "http_version",
    };
  }
  if (lines.length - 1 > MAX_HEADER_LINES) {
    return problem(431, `More than ${MAX_HEADER_LINES} header lines`, "request_headers_too_large");
  }
  const lengths: string[] = [];
  let hosts = 0;
  let host: string | null = null;
  let origin = false;
  let connection = "";
  let transferEncoding: string | null = null;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    // No whitespace before the colon (RFC 9112 §5.1), no obsolete line folding.
    if (!TOKEN.test(name)) return problem(400, "Malformed header line", "malformed_header");
    const value = line.slice(colon + 1).trim();
    switch (name.toLowerCase()) {
      case "content-length":
        lengths.push(...value.split(",").map((v) => v.trim()));
        break;
      case "host":
        hosts++;
        host = value;
        break;
      case "origin":
        origin = true;
        break;
      case "connection":
        connection += "," + value.toLowerCase();
        break;
      case "transfer-encoding":
        transferEncoding = transferEncoding === null ? value : `${transferEncoding}, ${value}`;
        break;
    }
  }
  if (hosts > 1) return problem(400, "More than one Host header", "duplicate_host");
  const closeAfter = minor === "0"
    ? !connection.split(",").some((t) => t.trim() === "keep-alive")
    : connection.split(",").some((t) => t.trim() === "close");
  const known = { bytes: text.length, method, target, host, origin, closeAfter };
  if (hosts === 0 && minor !== "0") return problem(400, "No Host header", "missing_host");
  if (transferEncoding !== null) {
    // Both: the classic request-smuggling ambiguity; refused rather than guessed (§6.3).
    if (lengths.length > 0) {
      return problem(400, "Both Transfer-Encoding and Content-Length", "ambiguous_framing");
    }
    const codings = transferEncoding.toLowerCase().split(",").map((c) => c.trim());
    if (codings.length !== 1 || codings[0] !== "chunked") {
      return {
        status: 501,
        message: `Transfer-Encoding '${transferEncoding}' is not supported (only chunked)`,
        code: "unsupported_transfer_encoding",
      };
    }
    return { ...known, body: { kind: "chunked" } };
  }
  if (lengths.length > 1) {
    return problem(400, "More than one Content-Length", "duplicate_content_length");
  }
  if (lengths.length === 1) {
    if (!/^\d{1,15}$/.test(lengths[0])) {
      return problem(400, `Invalid Content-Length '${lengths[0]}'`, "invalid_content_length");
    }
    return { ...known, body: { kind: "length", bytes: Number(lengths[0]) } };
  }
  return { ...known, body: { kind: "length", bytes: 0 } };
}

export const isHeadProblem = (h: RequestHead | HeadProblem): h is HeadProblem => "status" in h;

function problem(status: 400 | 431, message: string, code: string): HeadProblem {
  return { status, message, code };
}
