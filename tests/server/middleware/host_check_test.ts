// The Host check: which Host headers name the server for each kind of bind address and
// --allowed-hosts, and the 403 envelope every route gives a DNS-rebinding request.

import { hostAllowed, hostPolicy } from "../../../server/middleware/host_check.ts";
import { createApp, type ServerConfig } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { startingState } from "../../helpers/model_router.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

Deno.test("host check: which Host headers name the server", () => {
  const cases: [string, string[], string[], string[]][] = [
    // [bind, --allowed-hosts, accepted, refused]
    [
      "127.0.0.1",
      [],
      ["127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LocalHost", "[::1]:8080", "[::1]"],
      [
        "evil.example:8080",
        "evil.example",
        "127.0.0.1.nip.io:8080",
        "localhost.evil.example",
        "192.168.1.5:8080",
        "",
        "127.0.0.1:8080:9",
        "user@127.0.0.1",
      ],
    ],
    ["localhost", [], ["localhost:1", "127.0.0.1:1", "[::1]:1"], ["evil.example"]],
    ["::1", [], ["[::1]:8080", "localhost:8080"], ["[::2]:8080", "evil.example"]],
    ["192.168.1.5", [], ["192.168.1.5:8080"], ["localhost:8080", "127.0.0.1", "10.0.0.1"]],
    [
      "0.0.0.0",
      [],
      ["192.168.1.5:8080", "10.0.0.1", "[fe80::1]:8080", "localhost:8080", "127.0.0.1"],
      ["myhost:8080", "evil.example:8080", "1.2.3.4.evil.example"],
    ],
    ["0.0.0.0", ["MyHost", "api.lan"], ["myhost:8080", "API.LAN"], ["evil.example"]],
    ["127.0.0.1", ["sluice-pool"], ["sluice-pool", "127.0.0.1:1"], ["sluice-pool.evil"]],
    ["127.0.0.1", ["*"], ["evil.example:8080", "anything"], []],
    // Allowed with a port or as a bare IPv6 address: the name is what counts.
    ["127.0.0.1", ["gpu-box:8080", "fd00::5"], ["gpu-box:9000", "[fd00::5]:8080"], ["[fd00::6]"]],
    ["::", [], ["[fd00::5]:8080", "10.0.0.1:1", "[::1]:1"], ["gpu-box"]],
  ];
  for (const [bind, allowed, accepted, refused] of cases) {
    const policy = hostPolicy(bind, allowed);
    for (const h of accepted) assert(hostAllowed(policy, h), `${bind} ${allowed}: ${h} accepted`);
    for (const h of refused) assert(!hostAllowed(policy, h), `${bind} ${allowed}: ${h} refused`);
  }
});

function app(config: Partial<ServerConfig> = {}) {
  return createApp(startingState(), { maxBodyBytes: 1024, ...config }, new ServerMetrics());
}

Deno.test("host check: a rebinding Host gets 403 on every route, before the API key", async () => {
  const a = app({ apiKey: "k" });
  for (
    const [method, path] of [
      ["GET", "/health"],
      ["GET", "/v1/models"],
      ["POST", "/v1/completions"],
      ["GET", "/"],
      ["GET", "/metrics"],
    ]
  ) {
    const res = await a.request(path, { method, headers: { host: "evil.example:8080" } });
    assertEquals(res.status, 403, `${method} ${path}`);
    const { error } = await res.json();
    assertEquals(error.code, "host_not_allowed");
    assertEquals(error.type, "permission_error");
  }
  // The server's own names pass the check (and meet the next one: the API key).
  const own = await a.request("/v1/models", { headers: { host: "127.0.0.1:8080" } });
  assertEquals(own.status, 401);
  const health = await a.request("/health", { headers: { host: "localhost:8080" } });
  assertEquals(health.status, 503); // loading
  await health.body?.cancel();
  await own.body?.cancel();
});

Deno.test("host check: --allowed-hosts and the bind address are honoured", async () => {
  const a = app({ bindHost: "0.0.0.0", allowedHosts: ["gpu-box"] });
  const status = async (host: string) => {
    const res = await a.request("/health", { headers: { host } });
    await res.body?.cancel();
    return res.status;
  };
  assertEquals(await status("gpu-box:8080"), 503);
  assertEquals(await status("10.1.2.3:8080"), 503);
  assertEquals(await status("evil.example:8080"), 403);
});
