// One client connection through the front door. Bytes from the client are read here first: each
// request head is collected and checked (request_head.ts), then forwarded to the HTTP server over
// a loopback connection opened for this client on its first request, with its body measured
// (body_framing.ts) so the next head is found and checked too. Bytes back are copied untouched.
//
// While nothing is in flight, the connection is on a clock: it must send a complete request head
// within the header timeout of opening or of its last response ending (a partial head then gets
// 408), and a connection that sends nothing after a response is closed after the keep-alive
// timeout. While a request is in flight the application's own deadlines apply (body deadline,
// streams). A client that goes away closes its loopback connection at once, which is how the HTTP
// server learns to abort its request and free what it held.

import { BodyTracker } from "./body_framing.ts";
import { errorResponseBytes, writeAll } from "./error_response.ts";
import { checkRequestHead, isHeadProblem, type RequestHead } from "./request_head.ts";

export interface ConnectionLimits {
  headerTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** Longest request head, request line and headers; longer gets 431. */
  maxHeadBytes: number;
}

/** Why a connection ended, as /metrics counts it. */
export type CloseReason =
  | "client_closed"
  | "server_closed"
  | "header_timeout"
  | "idle_timeout"
  | "malformed"
  | "upstream_unavailable"
  | "evicted"
  | "shutdown";

export interface ConnectionHooks {
  /** Opens this client's connection to the HTTP server; registers its port as this client's. */
  connectUpstream(conn: FrontConnection): Promise<Deno.TcpConn>;
  closed(conn: FrontConnection, reason: CloseReason): void;
  /** A whole response for `head` to send from here, or null to pass it to the HTTP server. */
  answerHere?(head: RequestHead): Uint8Array | null;
}

const READ_BUFFER = 64 * 1024;
/** How long a refused client may take to read its error before the connection is cut. */
const LINGER_MS = 1000;
const CRLFCRLF = [13, 10, 13, 10];
/** Quiet from the server after its last response ended, taken as that response written out. */
const SERVER_QUIET_MS = 50;

export class FrontConnection {
  readonly remoteAddr: Deno.NetAddr;
  /** Requests forwarded whose responses have not ended. */
  inFlight = 0;
  /** Requests forwarded so far. */
  requests = 0;
  /** performance.now() when the connection opened or its last response ended. */
  idleSince = performance.now();
  #mode: "head" | "body" | "opaque" | "refusing" | "refused" = "head";
  /** A refusal waiting for the responses already in flight to be written out. */
  #refusal: { status: number; message: string; code: string } | null = null;
  /** performance.now() of the last bytes from the server. */
  #lastFromServer = 0;
  #head: Uint8Array = new Uint8Array(0);
  #body: BodyTracker | null = null;
  #upstream: Deno.TcpConn | null = null;
  /** The local port of the loopback connection to the HTTP server, once there is one. */
  upstreamPort: number | null = null;
  #lingerUntil = 0;
  #closed = false;
  /** The server is shutting down: close as soon as nothing is in flight. */
  #draining = false;
  #delivered: Promise<void> = Promise.resolve();
  /** The loopback's write side was closed: the server has been told no more requests come. */
  #upstreamEnded = false;

  constructor(
    private readonly client: Deno.TcpConn,
    private readonly limits: ConnectionLimits,
    private readonly hooks: ConnectionHooks,
  ) {
    this.remoteAddr = client.remoteAddr;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Not a byte of a request sent since it opened: closing it loses nobody any work. (A connection
   * that has been used is a client's, kept alive; the keep-alive timeout bounds it instead.)
   */
  get unused(): boolean {
    return !this.#closed && this.requests === 0 && this.#head.length === 0;
  }

  /** Reads the client until it or the server ends the connection. */
  async run(): Promise<void> {
    const buffer = new Uint8Array(READ_BUFFER);
    try {
      for (;;) {
        const n = await this.client.read(buffer);
        if (n === null) return this.close("client_closed");
        if (this.#mode !== "refused" && this.#mode !== "refusing") {
          await this.#take(buffer.subarray(0, n));
        }
        if (this.#closed) return;
      }
    } catch {
      this.close("client_closed"); // reset by the client, or closed under the read
    }
  }

  /** Closes the connection once its responses in flight have been written out. */
  drain(): void {
    this.#draining = true;
    this.checkDeadline(performance.now());
  }

  /**
   * Settles once every byte the HTTP server wrote for this connection has been passed to the client
   * (or can no longer be): the server has closed its side, or either side failed.
   */
  get delivered(): Promise<void> {
    return this.#delivered;
  }

  /** The HTTP server finished writing one of this connection's responses. */
  responseEnded(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.inFlight === 0) this.idleSince = performance.now();
  }

  /** Called periodically by the front door: enforces the header and keep-alive timeouts. */
  checkDeadline(now: number): void {
    if (this.#closed) return;
    if (this.#mode === "refused") {
      if (now >= this.#lingerUntil) this.close("malformed");
      return;
    }
    if (this.inFlight > 0) return;
    if (this.#draining) {
      if (now - this.#lastFromServer >= SERVER_QUIET_MS) this.#endDrained();
      return;
    }
    if (this.#mode === "refusing") {
      // The last response has been handed over; once its bytes stop coming, ours can follow.
      if (now - this.#lastFromServer >= SERVER_QUIET_MS) {
        const { status, message, code } = this.#refusal!;
        this.#mode = "head";
        void this.refuse(status, message, code);
      }
      return;
    }
    const partial = this.#head.length > 0 || this.#mode === "body";
    const limit = this.requests === 0 || partial
      ? this.limits.headerTimeoutMs
      : this.limits.keepAliveTimeoutMs;
    if (now - this.idleSince <= limit) return;
    if (this.#head.length > 0) {
      void this.refuse(
        408,
        `The request head did not arrive within ${this.limits.headerTimeoutMs / 1000} s`,
        "request_timeout",
      );
    } else this.close(this.requests === 0 ? "header_timeout" : "idle_timeout");
  }

  /**
   * Ends a draining connection with nothing in flight. Its last response may still be on its way
   * through the loopback (inFlight drops when the server has made a response, not when the client
   * has it), so the server is told this client is done (the loopback's write side closes), and the
   * pump, once it has passed on the rest and read the server's end of stream, closes it.
   */
  #endDrained(): void {
    if (!this.#upstream) return this.close("shutdown");
    if (this.#upstreamEnded) return;
    this.#upstreamEnded = true;
    this.#upstream.closeWrite().catch(() => this.close("shutdown"));
  }

  /** Answers with an error envelope and closes, once the client had a moment to read it. */
  async refuse(status: number, message: string, code: string): Promise<void> {
    if (this.#closed || this.#mode === "refused" || this.#mode === "refusing") return;
    // Responses of the server's (pipelined requests) are on their way: ours goes after them.
    if (this.inFlight > 0) {
      this.#refusal = { status, message, code };
      this.#mode = "refusing";
      return;
    }
    this.#mode = "refused";
    this.#lingerUntil = performance.now() + LINGER_MS;
    try {
      await writeAll(this.client, errorResponseBytes(status, message, code));
      await this.client.closeWrite();
    } catch {
      this.close("client_closed");
    }
  }

  close(reason: CloseReason): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const conn of [this.client, this.#upstream]) {
      try {
        conn?.close();
      } catch {
        // already closed
      }
    }
    this.hooks.closed(this, reason);
  }

  /** Handles bytes from the client: heads are checked, bodies measured, all forwarded. */
  async #take(bytes: Uint8Array): Promise<void> {
    let at = 0;
    while (
      at < bytes.length && !this.#closed && this.#mode !== "refused" && this.#mode !== "refusing"
    ) {
      if (this.#mode === "opaque") return await this.#forward(bytes.subarray(at));
      if (this.#mode === "body") {
        const n = this.#body!.consume(bytes, at);
        // Broken chunked framing: the server will see it too; past here nothing is checked.
        if (this.#body!.broken) this.#mode = "opaque";
        await this.#forward(bytes.subarray(at, at + n));
        at += n;
        if (this.#body!.done) this.#mode = "head";
        continue;
      }
      const rest = await this.#takeHead(bytes.subarray(at));
      if (rest === null) return;
      bytes = rest;
      at = 0;
    }
  }

  /**
   * Adds bytes to the head being collected; once it is whole, checks and forwards it and returns
   * the bytes after it (null: all taken, or the connection was refused).
   */
  async #takeHead(bytes: Uint8Array): Promise<Uint8Array | null> {
    const searchFrom = Math.max(0, this.#head.length - 3);
    this.#head = concat(this.#head, bytes);
    // Empty lines before a request line are ignored (RFC 9112 §2.2).
    let start = 0;
    while (this.#head[start] === 13 || this.#head[start] === 10) start++;
    const end = indexOf(this.#head, CRLFCRLF, Math.max(start, searchFrom));
    if (end < 0) {
      if (this.#head.length - start > this.limits.maxHeadBytes) {
        await this.refuse(
          431,
          `Request head over ${this.limits.maxHeadBytes} bytes`,
          "request_headers_too_large",
        );
      }
      return null;
    }
    const headBytes = this.#head.subarray(start, end + 4);
    const rest = this.#head.slice(end + 4);
    this.#head = new Uint8Array(0);
    if (headBytes.length > this.limits.maxHeadBytes) {
      await this.refuse(
        431,
        `Request head over ${this.limits.maxHeadBytes} bytes`,
        "request_headers_too_large",
      );
      return null;
    }
    const head = checkRequestHead(new TextDecoder("latin1").decode(headBytes.subarray(0, -4)));
    if (isHeadProblem(head)) {
      await this.refuse(head.status, head.message, head.code);
      return null;
    }
    // A probe the door can answer (GET /health) is answered at once, without the hops to the HTTP
    // server and back: each waits its turn on this thread behind whatever else is being read.
    // Only between responses, so that pipelined answers keep their order.
    const bodyless = head.body.kind === "length" && head.body.bytes === 0;
    const here = this.inFlight === 0 && bodyless ? this.hooks.answerHere?.(head) ?? null : null;
    if (here) {
      this.requests++;
      try {
        await writeAll(this.client, here);
      } catch {
        this.close("client_closed");
        return null;
      }
      this.idleSince = performance.now();
      if (head.closeAfter) {
        this.close("server_closed");
        return null;
      }
      return rest;
    }
    if (!this.#upstream) {
      try {
        this.#upstream = await this.hooks.connectUpstream(this);
        this.upstreamPort = this.#upstream.localAddr.port;
      } catch {
        await this.refuse(503, "The server cannot take this connection now", "server_busy");
        return null;
      }
      this.#delivered = this.#pumpBack(this.#upstream);
    }
    this.inFlight++;
    this.requests++;
    await this.#forward(headBytes);
    this.#body = new BodyTracker(head.body);
    this.#mode = this.#body.done ? "head" : "body";
    return rest;
  }

  async #forward(bytes: Uint8Array): Promise<void> {
    if (bytes.length === 0 || this.#closed) return;
    try {
      await writeAll(this.#upstream!, bytes);
    } catch {
      this.close("server_closed");
    }
  }

  /** Copies the server's responses to the client; the server closing ends the connection. */
  async #pumpBack(upstream: Deno.TcpConn): Promise<void> {
    const buffer = new Uint8Array(READ_BUFFER);
    let reason: CloseReason = "server_closed";
    try {
      for (;;) {
        const n = await upstream.read(buffer);
        if (n === null) break;
        this.#lastFromServer = performance.now();
        try {
          await writeAll(this.client, buffer.subarray(0, n));
        } catch {
          reason = "client_closed";
          break;
        }
      }
    } catch {
      // closed under the read: whoever closed it gave the reason
    }
    this.close(this.#draining && reason === "server_closed" ? "shutdown" : reason);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b.slice();
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function indexOf(haystack: Uint8Array, needle: number[], from: number): number {
  outer: for (let i = from; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
