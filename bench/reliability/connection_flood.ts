// `deno task bench connection-flood [flags]`: what a flood of idle connections does to a real
// server (issue 17). For each descriptor limit, `main.ts serve` starts under `ulimit -n LIMIT`
// with its default connection flags; one client connects first and keeps its connection; then
// SOCKETS connections open and send nothing. Reported: how many were evicted to make room for
// newer ones and how many answered 503, /health latency on the old connection and on a new one during the flood, how long
// the server took to drop the admitted idle sockets (its header timeout), whether a new connection
// is served afterwards, and whether the process is still alive.

import { z } from "zod";
import { parseBenchFlags } from "../common/cli.ts";
import { splitFlags } from "../serve/flags.ts";
import { startServer } from "../serve/server_process.ts";
import { summarize } from "../responsiveness/stats.ts";

const Flags = z.object({
  model: z.string().min(1).default("demo"),
  flags: z.string().default(""),
  limits: z.string().regex(/^\d+(,\d+)*$/).default("256,1024"),
  /** Idle sockets per limit; default: the limit plus a quarter, so the flood outnumbers it. */
  sockets: z.coerce.number().int().min(1).max(20_000).optional(),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
});

export const USAGE = `usage: deno task bench connection-flood [flags]

Idle-connection floods against a real server started under each descriptor limit (ulimit -n).
Reports connections admitted and refused, /health latency during the flood, how fast idle
sockets are dropped, and whether the server recovers and survives.

  --model M              model to serve (default demo)
  --flags "..."          extra server flags (default none: --header-timeout-s 10 etc.)
  --limits N,...         descriptor limits to try (default 256,1024)
  --sockets N            idle sockets per limit (default: the limit × 1.25)
  --start-timeout-s S    server start bound (default 300)`;

const HEALTH = new TextEncoder().encode("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");

interface FloodResult {
  limit: number;
  sockets: number;
  /** Idle sockets closed during the flood, unanswered, to make room for newer ones. */
  evicted: number;
  refused: number;
  /** Connection attempts the kernel refused (listen backlog full): no answer at all. */
  unanswered: number;
  oldConnectionMs: number[];
  newConnectionMs: number[];
  /** Seconds from the flood's end until the last admitted idle socket was closed by the server. */
  droppedAfterS: number;
  recovered: boolean;
  alive: boolean;
}

export async function benchConnectionFlood(args: string[]): Promise<string> {
  const f = parseBenchFlags(Flags, args);
  const results: FloodResult[] = [];
  for (const limit of f.limits.split(",").map(Number)) {
    results.push(await flood(f, limit, f.sockets ?? Math.ceil(limit * 1.25)));
  }
  return report(results, f.flags);
}

async function flood(
  f: z.infer<typeof Flags>,
  limit: number,
  sockets: number,
): Promise<FloodResult> {
  const server = await startServer({
    command: [
      "bash",
      "-c",
      `ulimit -n ${limit} && exec "$@"`,
      "sluice",
      Deno.execPath(),
      "run",
      "-A",
      "main.ts",
      "serve",
    ],
    model: f.model,
    flags: splitFlags(f.flags),
    startTimeoutMs: f["start-timeout-s"] * 1000,
  });
  const port = server.target.port;
  const idle: Deno.TcpConn[] = [];
  try {
    const old = await Deno.connect({ hostname: "127.0.0.1", port });
    await health(old);
    let unanswered = 0;
    for (let i = 0; i < sockets; i++) {
      try {
        idle.push(await Deno.connect({ hostname: "127.0.0.1", port }));
      } catch {
        unanswered++;
      }
    }
    const floodEnd = performance.now();
    // Who got a 503 and was closed at once; the rest were admitted and wait for their timeout.
    const fates = idle.map((c) => firstRead(c));
    await new Promise((r) => setTimeout(r, 1000));
    const oldConnectionMs: number[] = [];
    const newConnectionMs: number[] = [];
    for (let i = 0; i < 20; i++) {
      oldConnectionMs.push(await health(old));
      const fresh = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => null);
      if (fresh) {
        const ms = await health(fresh).catch(() => NaN);
        if (!Number.isNaN(ms)) newConnectionMs.push(ms);
        fresh.close();
      }
    }
    const early = await Promise.all(fates.map((p) => Promise.race([p, delay(1, null)])));
    const refused = early.filter((r) => r !== null && r.status === 503).length;
    const evicted = early.filter((r) => r !== null && r.status === null).length;
    const closedAt = await Promise.all(fates);
    const lastClose = Math.max(...closedAt.map((r) => r.at));
    const fresh = await Deno.connect({ hostname: "127.0.0.1", port });
    const recovered = await health(fresh).then(() => true, () => false);
    fresh.close();
    old.close();
    const alive = await health(await Deno.connect({ hostname: "127.0.0.1", port }))
      .then(() => true, () => false);
    return {
      limit,
      sockets,
      evicted,
      refused,
      unanswered,
      oldConnectionMs,
      newConnectionMs,
      droppedAfterS: (lastClose - floodEnd) / 1000,
      recovered,
      alive,
    };
  } finally {
    for (const c of idle) {
      try {
        c.close();
      } catch { /* closed by the server */ }
    }
    await server.stop();
  }
}

/** Sends GET /health on `conn` and reads the answer; milliseconds taken. */
async function health(conn: Deno.TcpConn): Promise<number> {
  const t0 = performance.now();
  await conn.write(HEALTH);
  const buffer = new Uint8Array(4096);
  let text = "";
  while (!text.includes('"status"')) {
    const n = await conn.read(buffer);
    if (n === null) throw new Error("closed");
    text += new TextDecoder().decode(buffer.subarray(0, n));
  }
  return performance.now() - t0;
}

/** The first thing the server does with an idle socket: its status line (503) and when it closed. */
async function firstRead(conn: Deno.TcpConn): Promise<{ status: number | null; at: number }> {
  const buffer = new Uint8Array(4096);
  let text = "";
  try {
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
  } catch { /* reset */ }
  return {
    status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? NaN) || null,
    at: performance.now(),
  };
}

const delay = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

function report(results: FloodResult[], flags: string): string {
  const ms = (xs: number[]) => {
    const s = summarize(xs);
    return xs.length
      ? `${s.p50!.toFixed(1)} / ${s.p99!.toFixed(1)} / ${s.max!.toFixed(1)}`
      : "none";
  };
  const rows = results.map((r) =>
    `| ${r.limit} | ${r.sockets} | ${r.evicted} | ${r.refused} | ${r.unanswered} | ` +
    `${ms(r.oldConnectionMs)} | ${r.newConnectionMs.length} of 20: ${ms(r.newConnectionMs)} | ` +
    `${r.droppedAfterS.toFixed(1)} | ` +
    `${r.recovered ? "yes" : "NO"} | ${r.alive ? "yes" : "NO"} |`
  );
  return [
    `# Connection flood`,
    ``,
    `\`main.ts serve --model demo ${flags}\` under \`ulimit -n LIMIT\`; one client connected first,`,
    `then SOCKETS idle connections that send nothing. /health latency in ms (p50 / p99 / max, 20`,
    `requests each) on the first client's kept-alive connection and on new connections during the`,
    `flood. "evicted": idle sockets closed during the flood to admit newer ones; "dropped after":`,
    `seconds from the flood's end to the last idle socket closed (the header timeout).`,
    ``,
    `| limit | sockets | evicted | 503 | unanswered | /health, old conn. | /health, new conn. | dropped after (s) | new conn. served after | alive |`,
    `|---|---|---|---|---|---|---|---|---|---|`,
    ...rows,
    ``,
  ].join("\n");
}
