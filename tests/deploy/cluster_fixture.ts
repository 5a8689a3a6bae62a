// Runs deploy/cluster.sh for a test: N Sluice instances behind nginx on free loopback ports. It
// parses the script's lines for the pids and ports it started (so the test can kill an instance and
// check for leaks by pid), bounds every wait, and stops the cluster with SIGTERM, falling back to
// SIGKILL of each pid it knows.

import { childrenOf, isRunning, waitGone } from "./processes.ts";

const SCRIPT = new URL("../../deploy/cluster.sh", import.meta.url).pathname;

export interface Instance {
  pid: number;
  port: number;
  /** host:port, as nginx's $upstream_addr names it. */
  addr: string;
}

export interface Cluster {
  /** nginx's base URL. */
  url: string;
  instances: Instance[];
  nginxPid: number;
  /** Every line the script printed so far. */
  lines: string[];
  /** Resolves with the first printed line that matches, or null after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string | null>;
  /** Stops the cluster; returns the pids still running afterwards (a leak) and its exit code. */
  stop(): Promise<{ leaked: number[]; code: number | null }>;
}

export interface ClusterOptions {
  nginx: string;
  instances: number;
  model: string;
  serveFlags?: string[];
  readyTimeoutMs: number;
  stateDir: string;
}

/** The nginx to use: $NGINX if it names a file, else the one on PATH or Debian's; or null. */
export function findNginx(): string | null {
  const configured = Deno.env.get("NGINX");
  if (configured !== undefined) return isFile(configured) ? configured : null;
  for (const dir of (Deno.env.get("PATH") ?? "").split(":").concat("/usr/sbin")) {
    if (isFile(`${dir}/nginx`)) return `${dir}/nginx`;
  }
  return null;
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** A run of `count` consecutive ports free on 127.0.0.1 (checked by listening on each). */
export function freePortRun(count: number): number {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20000 + Math.floor(Math.random() * 40000);
    const held: Deno.Listener[] = [];
    try {
      for (let i = 0; i < count; i++) {
        held.push(Deno.listen({ hostname: "127.0.0.1", port: base + i }));
      }
      return base;
    } catch {
      // taken: try another run
    } finally {
      for (const l of held) l.close();
    }
  }
  throw new Error(`no run of ${count} free loopback ports found`);
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const port = freePortRun(opts.instances + 1);
  const child = new Deno.Command("bash", {
    args: [
      SCRIPT,
      ...["--instances", String(opts.instances), "--port", String(port), "--model", opts.model],
      ...["--state-dir", opts.stateDir],
      ...["--ready-timeout-s", String(Math.ceil(opts.readyTimeoutMs / 1000))],
      "--",
      ...(opts.serveFlags ?? []),
    ],
    env: { DENO: Deno.execPath(), NGINX: opts.nginx },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();

  const lines: string[] = [];
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const onLine = (line: string) => {
    lines.push(line);
    for (const w of waiters.filter((w) => w.pattern.test(line))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  };
  const reading = readLines(child.stderr, onLine);
  const waitForLine = (pattern: RegExp, timeoutMs: number) => {
    const seen = lines.find((l) => pattern.test(l));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<string | null>((resolve) => {
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        resolve(null);
      }, timeoutMs);
      const waiter = {
        pattern,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      waiters.push(waiter);
    });
  };

  const instances = () =>
    lines.flatMap((l) => {
      const m = l.match(/instance \d+ pid (\d+) on http:\/\/(127\.0\.0\.1:(\d+))/);
      return m ? [{ pid: Number(m[1]), addr: m[2], port: Number(m[3]) }] : [];
    });
  const nginxPid = () => Number(lines.join("\n").match(/nginx pid (\d+)/)?.[1] ?? 0);

  let stopped: Promise<{ leaked: number[]; code: number | null }> | null = null;
  const stop = () =>
    stopped ??= (async () => {
      // The pids to account for: the instances, nginx and its workers (read before nginx stops).
      const known = [...instances().map((i) => i.pid), nginxPid()].filter((p) => p > 0);
      if (nginxPid() > 0) known.push(...childrenOf(nginxPid()));
      try {
        child.kill("SIGTERM");
      } catch { /* already exited */ }
      const exited = await Promise.race([
        child.status,
        new Promise<null>((r) => setTimeout(() => r(null), 45_000)),
      ]);
      const leaked = known.filter(isRunning);
      if (exited === null) child.kill("SIGKILL");
      for (const pid of known.filter(isRunning)) Deno.kill(pid, "SIGKILL");
      await waitGone(known, 5_000);
      const status = await child.status;
      await reading;
      return { leaked, code: exited === null ? null : status.code };
    })();

  const ready = await Promise.race([
    waitForLine(/ready http/, opts.readyTimeoutMs + 15_000),
    child.status.then(() => null),
  ]);
  const cluster: Cluster = {
    url: `http://127.0.0.1:${port}`,
    instances: instances(),
    nginxPid: nginxPid(),
    lines,
    waitForLine,
    stop,
  };
  if (ready === null) {
    await stop();
    throw new Error(`cluster did not become ready:\n${lines.join("\n")}`);
  }
  return cluster;
}

async function readLines(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void) {
  let rest = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    const parts = (rest + text).split("\n");
    rest = parts.pop()!;
    parts.forEach(onLine);
  }
  if (rest) onLine(rest);
}
