// DNS-rebinding protection. A web page at http://evil.example:8080 can make its own name resolve
// to 127.0.0.1 and then talk to a local server as if same-origin; the one thing it cannot change is
// the Host header, which still says evil.example. So every request's Host must name this server:
// the address it is bound to, the loopback names when bound to loopback, or a name the operator
// allowed with --allowed-hosts (`*` allows any). Anything else gets 403 before it reaches a route.
//
// Bound to every interface (0.0.0.0 or ::), a Host that is an IP address is accepted as well:
// rebinding needs a name the attacker controls, and the machine's own addresses are many. Names
// (a LAN hostname, the name a proxy sends) must be allowed explicitly. The port is not compared:
// a rebinding attack is told apart by the name alone.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

export interface HostPolicy {
  /** Host names accepted, lower-case, IPv6 in brackets; "*" accepts any. */
  names: Set<string>;
  /** Also accept any IP-address Host (bound to every interface). */
  anyAddress: boolean;
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];

/** The hosts a server bound to `bind` answers to, plus those the operator allowed. */
export function hostPolicy(bind: string, allowed: readonly string[] = []): HostPolicy {
  const host = normalizeHost(bind);
  const names = new Set([host, ...allowed.map(normalizeHost)]);
  if (isLoopback(host) || isWildcard(host)) { for (const n of LOOPBACK_NAMES) names.add(n); }
  return { names, anyAddress: isWildcard(host) };
}

export function checkHost(policy: HostPolicy): MiddlewareHandler {
  return async (c, next) => {
    // A request without a Host header (HTTP/1.0) has the address it came in on in its URL.
    const host = c.req.header("host") ?? new URL(c.req.url).host;
    if (!hostAllowed(policy, host)) {
      throw new ApiError(
        403,
        `Host '${host}' is not a name of this server (start it with --allowed-hosts to add one)`,
        null,
        "host_not_allowed",
        "permission_error",
      );
    }
    await next();
  };
}

/** Whether a Host header value (name or address, with or without a port) names this server. */
export function hostAllowed(policy: HostPolicy, hostHeader: string): boolean {
  if (policy.names.has("*")) return true;
  const name = hostName(hostHeader);
  if (name === null) return false;
  return policy.names.has(name) || (policy.anyAddress && isAddress(name));
}

/** The name part of `host[:port]` or `[v6]:port`, lower-case; null if it is not of that form. */
function hostName(hostHeader: string): string | null {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]\s]+)(?::\d*)?$/i.exec(hostHeader.trim());
  return m ? m[1].toLowerCase() : null;
}

/** A bind address or allowed name as a Host header names it: lower-case, IPv6 bracketed, no port. */
function normalizeHost(host: string): string {
  const h = host.trim().toLowerCase();
  if (!h.startsWith("[") && (h.match(/:/g) ?? []).length >= 2) return `[${h}]`; // a bare IPv6
  return hostName(h) ?? h;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "[::]" || host === "";
}

function isAddress(name: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(name) || /^\[[0-9a-f:.]+\]$/.test(name);
}
