// The server's public port. Deno's HTTP server cannot bound how long a connection may take to send
// its request head, and it stops listening for good when accepting a connection fails for want of
// file descriptors: a few hundred idle sockets took the whole process down. So the port is ours:
// this accept loop admits at most `maxConnections` connections; when full, the oldest connection
// that has sent nothing is closed to make room, and only when every one has been used does a new
// connection get a 503 (as it does out of descriptors). Each admitted one is a
// FrontConnection that checks request heads and enforces the header and keep-alive timeouts, and
// requests reach Deno's server (InnerServer) over loopback. Connections with work in flight are
// served throughout.

import { errorResponseBytes, writeAll } from "./error_response.ts";
import { type CloseReason, type ConnectionLimits, FrontConnection } from "./front_connection.ts";
import { type ClientHandler, InnerServer } from "./inner_server.ts";
import type { RequestHead } from "./request_head.ts";

export interface FrontDoorOptions extends ConnectionLimits {
  hostname: string;
  port: number;
  /** Connections admitted at once; more are answered 503 and closed. */
  maxConnections: number;
  onListen?: (addr: Deno.NetAddr) => void;
  /**
   * Answers some requests at the door (whole responses, or null to pass a request on): for probes
   * that must stay quick while the HTTP thread is busy with large bodies.
   */
  answerHere?: (head: RequestHead) => Uint8Array | null;
  /** Told of every connection refused at the door and every connection that ends. */
  onConnectionEvent?: (event: ConnectionEvent) => void;
}

export type ConnectionEvent =
  | { kind: "opened" }
  | { kind: "closed"; reason: CloseReason }
  | { kind: "refused"; reason: "capacity" | "descriptors" };

/** How often connection deadlines are checked: often enough that none is late by much. */
const SWEEP_MS = 100;
/** How long shutdown waits for the server's last bytes to reach clients that are slow to read. */
const DELIVER_MS = 1000;

export class FrontDoor {
  readonly addr: Deno.NetAddr;
  /** Settles once shutdown() has closed everything. */
  readonly finished: Promise<void>;
  readonly #listener: Deno.TcpListener;
  readonly #inner: InnerServer;
  readonly #connections = new Set<FrontConnection>();
  readonly #sweep: ReturnType<typeof setInterval>;
  #reserve: Deno.FsFile | null = null;
  #closing = false;
  #finish!: () => void;

  constructor(handler: ClientHandler, private readonly options: FrontDoorOptions) {
    this.#listener = Deno.listen({ hostname: options.hostname, port: options.port });
    this.addr = this.#listener.addr;
    this.#inner = new InnerServer(handler, Math.round(options.keepAliveTimeoutMs / 1000));
    this.#reserve = openReserve();
    this.finished = new Promise((resolve) => this.#finish = resolve);
    this.#sweep = setInterval(() => {
      const now = performance.now();
      for (const conn of this.#connections) conn.checkDeadline(now);
    }, SWEEP_MS);
    options.onListen?.(this.addr);
    void this.#acceptLoop();
  }

  /** Connections open now. */
  get connections(): number {
    return this.#connections.size;
  }

  /**
   * Stops accepting, closes each connection once its responses under way are written out (the
   * HTTP server would otherwise wait on idle keep-alive connections), then closes the rest.
   */
  async shutdown(): Promise<void> {
    if (this.#closing) return await this.finished;
    this.#closing = true;
    this.#listener.close();
    for (const conn of this.#connections) conn.drain();
    await this.#inner.shutdown();
    // The server has written its last bytes (a cut stream's error event among them) to the
    // loopback sockets: they reach the clients before the connections close, unless a client
    // does not read them within DELIVER_MS.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all([...this.#connections].map((conn) => conn.delivered)),
      new Promise((r) => timer = setTimeout(r, DELIVER_MS)),
    ]);
    clearTimeout(timer);
    for (const conn of this.#connections) conn.close("shutdown");
    clearInterval(this.#sweep);
    this.#reserve?.close();
    this.#finish();
  }

  async #acceptLoop(): Promise<void> {
    for (;;) {
      let client: Deno.TcpConn;
      try {
        client = await this.#listener.accept();
      } catch (err) {
        if (this.#closing) return;
        if (outOfDescriptors(err)) await this.#shedOne();
        else await delay(10); // a connection reset before it was accepted, and the like
        continue;
      }
      if (this.#connections.size >= this.options.maxConnections && !this.#evictIdlest()) {
        void this.#turnAway(client, "capacity");
        continue;
      }
      this.#admit(client);
    }
  }

  #admit(client: Deno.TcpConn): void {
    client.setNoDelay(true);
    const conn = new FrontConnection(client, this.options, {
      connectUpstream: async (c) => {
        const upstream = await this.#inner.connect(c);
        if (c.closed) { // timed out while connecting
          this.#inner.release(upstream.localAddr.port);
          upstream.close();
          throw new Error("connection closed");
        }
        return upstream;
      },
      answerHere: this.options.answerHere,
      closed: (c, reason) => {
        this.#connections.delete(c);
        this.#inner.release(c.upstreamPort);
        this.options.onConnectionEvent?.({ kind: "closed", reason });
      },
    });
    this.#connections.add(conn);
    this.options.onConnectionEvent?.({ kind: "opened" });
    void conn.run();
  }

  /**
   * Full: the oldest connection that has not sent a byte of a request makes room for the new
   * one, so a flood of idle sockets cannot lock out clients with work to do. False when every
   * connection has been used.
   */
  #evictIdlest(): boolean {
    let idlest: FrontConnection | null = null;
    for (const conn of this.#connections) {
      if (conn.unused && (!idlest || conn.idleSince < idlest.idleSince)) idlest = conn;
    }
    idlest?.close("evicted");
    return idlest !== null;
  }

  /**
   * Out of descriptors, the pending connection cannot even be accepted to be told so: the one
   * descriptor held in reserve is given up to accept it, answer 503 and close it, then taken
   * back. Without this the listener would spin on the error while clients wait unanswered.
   */
  async #shedOne(): Promise<void> {
    this.#reserve?.close();
    this.#reserve = null;
    const accepted = this.#listener.accept().then(
      (client) => this.#turnAway(client, "descriptors"),
      () => {},
    );
    await Promise.race([accepted, delay(50)]);
    this.#reserve = openReserve();
  }

  async #turnAway(client: Deno.TcpConn, reason: "capacity" | "descriptors"): Promise<void> {
    this.options.onConnectionEvent?.({ kind: "refused", reason });
    const message = reason === "capacity"
      ? "The server is at its connection limit; try again shortly"
      : "The server is out of file descriptors; try again shortly";
    try {
      await writeAll(client, errorResponseBytes(503, message, "server_busy"));
    } catch {
      // the client is gone already
    } finally {
      client.close();
    }
  }
}

function outOfDescriptors(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === "EMFILE" || code === "ENFILE" || /too many open files/i.test(String(err));
}

function openReserve(): Deno.FsFile | null {
  try {
    return Deno.openSync(Deno.build.os === "windows" ? "NUL" : "/dev/null");
  } catch {
    return null;
  }
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
