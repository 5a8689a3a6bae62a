// A minimal HTTP/1.1 client over a raw TCP socket to a loopback target. `fetch` would honour
// HTTP_PROXY and friends even for 127.0.0.1 (checked on Deno 2.9), which could carry benchmark
// traffic off the machine; a socket opened with Deno.connect to the literal loopback address
// cannot. It also lets the client timestamp bytes the moment they are read off the socket.
//
// Scope: one request per connection (Connection: close), bodies as Content-Length, chunked, or
// read-to-EOF. That is all the server's SSE and JSON endpoints need.

import { assertLoopback, type LoopbackTarget } from "./loopback.ts";

export interface HttpRequest {
  method: "GET" | "POST";
  path: string;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  /** Header names lower-cased. */
  headers: Map<string, string>;
  /** Body bytes as they arrive (de-chunked). Ends at the end of the body; closes the socket. */
  body: AsyncIterable<Uint8Array>;
  /** Closes the socket early (safe to call more than once). */
  close(): void;
}

const MAX_HEAD_BYTES = 64 * 1024;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** A growable byte queue over the socket. */
class SocketReader {
  private buf = new Uint8Array(0);
  private scratch = new Uint8Array(64 * 1024);
  constructor(private conn: Deno.Conn) {}

  get available(): number {
    return this.buf.length;
  }

  /** Reads more bytes; false at EOF. */
  async fill(): Promise<boolean> {
    const n = await this.conn.read(this.scratch);
    if (n === null) return false;
    const merged = new Uint8Array(this.buf.length + n);
    merged.set(this.buf);
    merged.set(this.scratch.subarray(0, n), this.buf.length);
    this.buf = merged;
    return true;
  }

  take(n: number): Uint8Array {
    const out = this.buf.slice(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Index of "\r\n" (or of "\r\n\r\n" when `blank`) in the buffer, or -1. */
  find(blank: boolean): number {
    const b = this.buf;
    for (let i = 0; i + 1 < b.length; i++) {
      if (b[i] !== 13 || b[i + 1] !== 10) continue;
      if (!blank) return i;
      if (i + 3 < b.length && b[i + 2] === 13 && b[i + 3] === 10) return i;
    }
    return -1;
  }

  /** One CRLF-terminated line (without the CRLF). */
  async line(limit: number): Promise<string> {
    for (;;) {
      const i = this.find(false);
      if (i >= 0) {
        const s = dec.decode(this.take(i));
        this.take(2);
        return s;
      }
      if (this.available > limit) throw new Error("HTTP: line too long");
      if (!(await this.fill())) throw new Error("HTTP: connection closed mid-line");
    }
  }
}

type Framing = { kind: "none" } | { kind: "chunked" } | { kind: "length"; length: number } | {
  kind: "eof";
};

/** The body's bytes as they arrive, de-chunked. */
async function* bodyBytes(reader: SocketReader, framing: Framing): AsyncGenerator<Uint8Array> {
  if (framing.kind === "none") return;
  if (framing.kind === "chunked") {
    for (;;) {
      const sizeLine = await reader.line(1024);
      const size = parseInt(sizeLine.split(";")[0].trim(), 16);
      if (!Number.isFinite(size) || size < 0) throw new Error(`HTTP: bad chunk size "${sizeLine}"`);
      if (size === 0) {
        while ((await reader.line(MAX_HEAD_BYTES)) !== ""); // trailers
        return;
      }
      yield* exactly(reader, size, "HTTP: truncated chunk");
      if ((await reader.line(2)) !== "") throw new Error("HTTP: chunk not followed by CRLF");
    }
  }
  if (framing.kind === "length") {
    yield* exactly(reader, framing.length, "HTTP: truncated body");
    return;
  }
  for (;;) {
    if (reader.available > 0) yield reader.take(reader.available);
    if (!(await reader.fill())) return;
  }
}

/** `n` bytes, yielded piece by piece as they are read. */
async function* exactly(
  reader: SocketReader,
  n: number,
  truncated: string,
): AsyncGenerator<Uint8Array> {
  let left = n;
  while (left > 0) {
    if (reader.available === 0 && !(await reader.fill())) throw new Error(truncated);
    const piece = reader.take(Math.min(left, reader.available));
    left -= piece.length;
    yield piece;
  }
}

/** Sends one request to the loopback target and returns once the response head is read. */
export async function loopbackRequest(
  target: LoopbackTarget,
  req: HttpRequest,
): Promise<HttpResponse> {
  assertLoopback(target);
  if (!req.path.startsWith("/") || /[\s]/.test(req.path)) {
    throw new Error(`HTTP: bad path ${req.path}`);
  }
  req.signal?.throwIfAborted();
  const conn = await Deno.connect({ hostname: target.host, port: target.port, transport: "tcp" });
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch { /* already closed by the peer */ }
  };
  const onAbort = () => close();
  req.signal?.addEventListener("abort", onAbort, { once: true });
  const cleanup = () => {
    req.signal?.removeEventListener("abort", onAbort);
    close();
  };
  // A read on a socket closed by abort throws a BadResource/Interrupted error; report the abort.
  const rethrow = (e: unknown): never => {
    if (req.signal?.aborted) throw req.signal.reason;
    throw e;
  };
  try {
    const body = req.body === undefined ? undefined : enc.encode(req.body);
    const lines = [
      `${req.method} ${req.path} HTTP/1.1`,
      `Host: ${target.host}:${target.port}`,
      "Connection: close",
      ...Object.entries(req.headers ?? {}).map(([k, v]) => {
        if (/[\r\n]/.test(k + v)) throw new Error("HTTP: header with a line break");
        return `${k}: ${v}`;
      }),
      ...(body ? [`Content-Length: ${body.length}`] : []),
    ];
    const head = enc.encode(lines.join("\r\n") + "\r\n\r\n");
    const out = new Uint8Array(head.length + (body?.length ?? 0));
    out.set(head);
    if (body) out.set(body, head.length);
    for (let off = 0; off < out.length;) off += await conn.write(out.subarray(off));

    const reader = new SocketReader(conn);
    let end: number;
    while ((end = reader.find(true)) < 0) {
      if (reader.available > MAX_HEAD_BYTES) throw new Error("HTTP: response head too large");
      if (!(await reader.fill())) {
        throw new Error("HTTP: connection closed before the response head");
      }
    }
    const headText = dec.decode(reader.take(end));
    reader.take(4);
    const [statusLine, ...headerLines] = headText.split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
    if (!m) throw new Error(`HTTP: bad status line "${statusLine}"`);
    const status = Number(m[1]);
    const headers = new Map<string, string>();
    for (const h of headerLines) {
      const i = h.indexOf(":");
      if (i > 0) headers.set(h.slice(0, i).trim().toLowerCase(), h.slice(i + 1).trim());
    }
    const chunked = /\bchunked\b/i.test(headers.get("transfer-encoding") ?? "");
    const length = headers.has("content-length")
      ? Number(headers.get("content-length"))
      : undefined;
    if (length !== undefined && !(Number.isInteger(length) && length >= 0)) {
      throw new Error(`HTTP: bad Content-Length "${headers.get("content-length")}"`);
    }
    const noBody = status === 204 || status === 304 || (status >= 100 && status < 200);

    const framing: Framing = noBody
      ? { kind: "none" }
      : chunked
      ? { kind: "chunked" }
      : length !== undefined
      ? { kind: "length", length }
      : { kind: "eof" };
    const bodyStream = (async function* () {
      try {
        yield* bodyBytes(reader, framing);
      } catch (e) {
        rethrow(e);
      } finally {
        cleanup();
      }
    })();
    return { status, headers, body: bodyStream, close: cleanup };
  } catch (e) {
    cleanup();
    return rethrow(e);
  }
}

/** Reads a whole (small) response body as text, bounded in size. */
export async function readText(res: HttpResponse, limit = 16 * 1024 * 1024): Promise<string> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const p of res.body) {
    n += p.length;
    if (n > limit) {
      res.close();
      throw new Error(`HTTP: body larger than ${limit} bytes`);
    }
    parts.push(p);
  }
  const all = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.length;
  }
  return dec.decode(all);
}

/** GET returning status and text, with a timeout. */
export async function getText(
  target: LoopbackTarget,
  path: string,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  const signal = AbortSignal.timeout(timeoutMs);
  const res = await loopbackRequest(target, { method: "GET", path, signal });
  return { status: res.status, text: await readText(res) };
}
