// Starts one server process for one configuration on a loopback port of our choosing, waits until
// it is ready, and stops it (SIGTERM, then SIGKILL after a grace period). Every wait is bounded.

import { getText } from "./http.ts";
import {
  freeLoopbackPort,
  LOOPBACK_HOST,
  type LoopbackTarget,
  loopbackTarget,
} from "./loopback.ts";

export interface ServerSpec {
  /** Program and leading arguments; `--host 127.0.0.1 --port P --model M` and the flags follow. */
  command: string[];
  model: string;
  flags: string[];
  cwd?: string;
  /** Until "listening on" is logged and /health says ready. */
  startTimeoutMs: number;
  /** stdout and stderr of the server are appended here when set. */
  logPath?: string;
  /** SIGTERM to SIGKILL. */
  stopGraceMs?: number;
}

export interface RunningServer {
  target: LoopbackTarget;
  pid: number;
  /** Idempotent; resolves once the process has exited. */
  stop(): Promise<Deno.CommandStatus>;
  /** The last few KiB of the server's output, for error messages. */
  logTail(): string;
}

/** Flags that would move the server off the loopback port we chose are not allowed in a config. */
export function assertSafeFlags(flags: string[]): void {
  for (const f of flags) {
    if (/^--(host|port)(=|$)/.test(f)) {
      throw new Error(`config flag ${f} is not allowed: the benchmark picks host and port`);
    }
  }
}

const TAIL_BYTES = 8192;

export async function startServer(spec: ServerSpec): Promise<RunningServer> {
  assertSafeFlags(spec.flags);
  const port = freeLoopbackPort();
  const target = loopbackTarget(LOOPBACK_HOST, port);
  const [program, ...lead] = spec.command;
  const child = new Deno.Command(program, {
    args: [
      ...lead,
      "--host",
      LOOPBACK_HOST,
      "--port",
      String(port),
      "--model",
      spec.model,
      ...spec.flags,
    ],
    cwd: spec.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const log = spec.logPath
    ? await Deno.open(spec.logPath, { create: true, append: true })
    : undefined;
  let tail = "";
  let listening = false;
  const readyLine = `listening on http://${LOOPBACK_HOST}:${port}`;
  const dec = new TextDecoder();
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let pending = "";
    for await (const bytes of stream) {
      await log?.write(bytes);
      const text = dec.decode(bytes, { stream: true });
      tail = (tail + text).slice(-TAIL_BYTES);
      pending += text;
      if (!listening && pending.includes(readyLine)) listening = true;
      pending = pending.slice(-readyLine.length);
    }
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]).catch(() => {});
  let status: Deno.CommandStatus | undefined;
  const exited = child.status.then((s) => (status = s));

  let stopping: Promise<Deno.CommandStatus> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (!status) {
        try {
          child.kill("SIGTERM");
        } catch { /* exited meanwhile */ }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const graceful = await Promise.race([
          exited.then(() => true),
          new Promise<boolean>((
            r,
          ) => (timer = setTimeout(() => r(false), spec.stopGraceMs ?? 10_000))),
        ]);
        clearTimeout(timer);
        if (!graceful) {
          try {
            child.kill("SIGKILL");
          } catch { /* exited meanwhile */ }
        }
      }
      const s = await exited;
      await pumps;
      log?.close();
      return s;
    })();
    return stopping;
  };
  const server: RunningServer = { target, pid: child.pid, stop, logTail: () => tail };

  try {
    const deadline = performance.now() + spec.startTimeoutMs;
    const left = () => deadline - performance.now();
    // Wait for the log line, then for /health to say ready (the model may still be loading).
    while (!listening) {
      if (status) throw new Error(`server exited (code ${status.code}) before listening`);
      if (left() <= 0) {
        throw new Error(`server did not log "${readyLine}" within ${spec.startTimeoutMs} ms`);
      }
      await sleep(50);
    }
    for (;;) {
      if (status) throw new Error(`server exited (code ${status.code}) before it was ready`);
      if (left() <= 0) {
        throw new Error(`server not ready (/health) within ${spec.startTimeoutMs} ms`);
      }
      try {
        const h = await getText(target, "/health", Math.max(1, Math.min(2000, left())));
        if (h.status === 200 && JSON.parse(h.text)?.status === "ready") break;
      } catch { /* not accepting yet, or a half-written answer */ }
      await sleep(200);
    }
    return server;
  } catch (e) {
    await stop();
    throw new Error(`${e instanceof Error ? e.message : e}\n--- server output (tail) ---\n${tail}`);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
