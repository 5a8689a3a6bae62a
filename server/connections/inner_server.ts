// The HTTP server behind the front door: Deno's own, listening on a loopback port that only the
// front door's connections use. Each of them is registered by its local port, so a request knows
// which client connection it came on: the handler gets that client's address, and the connection
// learns when each response has been written out (its keep-alive clock starts there). A request on
// a connection the front door did not open (another local process dialling the port) is refused.
//
// Deno's server ends for good if accepting fails (descriptor exhaustion): should that happen
// despite the front door's budget, a new one is started on a new port for the next connections.

import { ApiError } from "../openai/errors.ts";
import type { FrontConnection } from "./front_connection.ts";

export type ClientHandler = (
  request: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

export class InnerServer {
  /** Front door connections by the local port of their loopback connection. */
  readonly #byPort = new Map<number, FrontConnection>();
  #server!: Deno.HttpServer<Deno.NetAddr>;
  #closing = false;

  constructor(
    private readonly handler: ClientHandler,
    /** How long an idle keep-alive connection is kept, told to clients in `Keep-Alive`. */
    private readonly keepAliveS: number,
  ) {
    this.#start();
  }

  /** Opens `conn`'s loopback connection to the server and registers it. */
  async connect(conn: FrontConnection): Promise<Deno.TcpConn> {
    const upstream = await Deno.connect({ hostname: "127.0.0.1", port: this.#server.addr.port });
    upstream.setNoDelay(true); // tokens go out one small write at a time
    this.#byPort.set(upstream.localAddr.port, conn);
    return upstream;
  }

  /** Forgets a closed connection's loopback port. */
  release(port: number | null): void {
    if (port !== null) this.#byPort.delete(port);
  }

  async shutdown(): Promise<void> {
    this.#closing = true;
    await this.#server.shutdown();
  }

  #start(): void {
    this.#server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen: () => {},
    }, (request, info) => this.#serve(request, info));
    this.#server.finished.catch((err) => {
      if (this.#closing) return;
      console.error(`sluice: the HTTP server stopped (${err}); starting it again`);
      this.#start();
    });
  }

  async #serve(request: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>): Promise<Response> {
    const conn = this.#byPort.get(info.remoteAddr.port);
    if (!conn) {
      const refused = new ApiError(403, "Connect through the server's own port", null, "forbidden");
      return Response.json(refused.toJSON(), { status: 403 });
    }
    let response: Response;
    try {
      response = await this.handler(request, { ...info, remoteAddr: conn.remoteAddr });
    } catch (err) {
      conn.responseEnded();
      throw err;
    }
    const headers = new Headers(response.headers);
    if (!headers.has("connection")) headers.set("keep-alive", `timeout=${this.keepAliveS}`);
    const { status, statusText } = response;
    // A stream is followed to its end; any other body is whole already (JSON, a page, metrics)
    // and is sent as bytes, so it keeps its Content-Length rather than becoming chunked.
    if (response.body && headers.get("content-type")?.startsWith("text/event-stream")) {
      const body = endingWith(response.body, () => conn.responseEnded());
      return new Response(body, { status, statusText, headers });
    }
    try {
      const body = response.body ? new Uint8Array(await response.arrayBuffer()) : null;
      return new Response(body, { status, statusText, headers });
    } finally {
      conn.responseEnded();
    }
  }
}

/** `body`, calling `ended` once when it is read to its end, fails, or is cancelled. */
function endingWith(
  body: ReadableStream<Uint8Array>,
  ended: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let once = false;
  const end = () => {
    if (!once) once = true, ended();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          end();
          controller.close();
        } else controller.enqueue(value);
      } catch (err) {
        end();
        controller.error(err);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
