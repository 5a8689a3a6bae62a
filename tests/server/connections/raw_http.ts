// A raw TCP client for the connection tests: sends exact bytes (malformed framing included, which
// no HTTP client library will send) and reads what comes back, every wait bounded.

export interface RawReply {
  /** Everything read, as latin1 text. */
  text: string;
  /** The connection was closed by the server (EOF or reset) before the wait ended. */
  closed: boolean;
}

export async function connect(port: number): Promise<Deno.TcpConn> {
  return await Deno.connect({ hostname: "127.0.0.1", port });
}

export async function send(conn: Deno.Conn, text: string | Uint8Array): Promise<void> {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

/** Reads until the server closes or `waitMs` passes (or `until` matches what was read). */
export async function readReply(
  conn: Deno.Conn,
  waitMs: number,
  until?: (text: string) => boolean,
): Promise<RawReply> {
  let text = "";
  const buffer = new Uint8Array(64 * 1024);
  const deadline = performance.now() + waitMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) return { text, closed: false };
      const timeout = new Promise<"timeout">((r) => timer = setTimeout(() => r("timeout"), left));
      const n = await Promise.race([conn.read(buffer), timeout]).catch(() => null);
      clearTimeout(timer);
      if (n === "timeout") return { text, closed: false };
      if (n === null) return { text, closed: true };
      text += new TextDecoder("latin1").decode(buffer.subarray(0, n));
      if (until?.(text)) return { text, closed: false };
    }
  } finally {
    clearTimeout(timer);
  }
}

/** Sends one request on a fresh connection and reads until the server closes it. */
export async function exchange(port: number, request: string, waitMs = 5000): Promise<RawReply> {
  const conn = await connect(port);
  try {
    await send(conn, request);
    return await readReply(conn, waitMs);
  } finally {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** The status code and the JSON body of a whole HTTP/1.1 response in `text`. */
export function parseResponse(text: string): { status: number; headers: string; body: string } {
  const end = text.indexOf("\r\n\r\n");
  const head = end < 0 ? text : text.slice(0, end);
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? NaN),
    headers: head.toLowerCase(),
    body: end < 0 ? "" : text.slice(end + 4),
  };
}
