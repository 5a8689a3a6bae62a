// The only place the benchmark learns where to send traffic. A target is the IPv4 loopback address
// and a port the benchmark itself chose; anything else is refused before a socket is opened.

export const LOOPBACK_HOST = "127.0.0.1";

export interface LoopbackTarget {
  readonly host: typeof LOOPBACK_HOST;
  readonly port: number;
}

export class NotLoopbackError extends Error {}

/** Validates host and port; throws NotLoopbackError for any host but 127.0.0.1 (not even
 * "localhost", whose resolution is not ours to trust). */
export function loopbackTarget(host: string, port: number): LoopbackTarget {
  if (host !== LOOPBACK_HOST) {
    throw new NotLoopbackError(
      `refusing to send traffic to ${host}: only ${LOOPBACK_HOST} is allowed`,
    );
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new NotLoopbackError(`refusing port ${port}: not a TCP port`);
  }
  return Object.freeze({ host: LOOPBACK_HOST, port });
}

/** Parses "http://127.0.0.1:PORT" into a target, refusing anything else (other hosts, https,
 * credentials, paths). */
export function targetFromUrl(url: string): LoopbackTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new NotLoopbackError(`refusing ${url}: not a URL`);
  }
  if (
    u.protocol !== "http:" || u.username || u.password || (u.pathname !== "/" && u.pathname !== "")
  ) {
    throw new NotLoopbackError(`refusing ${url}: expected http://${LOOPBACK_HOST}:PORT`);
  }
  return loopbackTarget(u.hostname, Number(u.port || 80));
}

/** Re-checks a target at the moment of connecting, so a target object forged elsewhere (or
 * mutated) still cannot reach another host. */
export function assertLoopback(t: LoopbackTarget): void {
  loopbackTarget(t.host, t.port);
}

/** A port that was free a moment ago: bind port 0 on loopback, read the port, close. */
export function freeLoopbackPort(): number {
  const l = Deno.listen({ hostname: LOOPBACK_HOST, port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}
