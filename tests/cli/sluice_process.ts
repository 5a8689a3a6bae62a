// The CLI tests' fixture: runs `main.ts <command> ...` as a user would, in its own process, with an
// environment the test controls (a private cache, a hub address that fails fast, no
// XDG_RUNTIME_DIR), and gives back its exit status and output. For `serve`, the port is the one
// the server chose (--port 0) and read from its "listening on" line; every wait is bounded.

import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * A model cache shared by the CLI tests of this `deno test` process (every test file runs in it, in
 * parallel or not): the first `serve --model demo` generates the demo model and times the matmul
 * layouts into it, and later ones read both, as a user's second start would. Its name carries the
 * process id, so each run starts empty; those of runs that have ended are removed here.
 */
export async function sharedCache(): Promise<string> {
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  const prefix = "sluice-cli-cache-";
  for await (const entry of Deno.readDir(tmp)) {
    const pid = Number(entry.name.slice(prefix.length));
    if (!entry.name.startsWith(prefix) || pid === Deno.pid || !Number.isInteger(pid)) continue;
    if (!(await exists(`/proc/${pid}`))) {
      await Deno.remove(`${tmp}/${entry.name}`, { recursive: true }).catch(() => {});
    }
  }
  const dir = `${tmp}/${prefix}${Deno.pid}`;
  await Deno.mkdir(dir, { recursive: true });
  return dir;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * POSTs a one-message chat ("hi") for the demo model to a `serve` on `port`, with `fields` added
 * to the body (max_tokens, stream, ...).
 */
export function chatDemo(port: number, fields: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "hi" }], ...fields }),
  });
}

/** A hub address nothing listens on: downloads fail at once, offline or not. */
export const DEAD_HUB = "http://127.0.0.1:9";

export interface RunOptions {
  /** Variables to set; `null` removes one from the inherited environment. */
  env?: Record<string, string | null>;
  timeoutMs?: number;
  /** Run under this open-file limit (bash's `ulimit -n`): soft, and hard if given. */
  fileLimit?: { soft: number; hard?: number };
}

function environment(overrides: Record<string, string | null> = {}): Record<string, string> {
  const env = { ...Deno.env.toObject(), NO_COLOR: "1" };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === null) delete (env as Record<string, string>)[k];
    else (env as Record<string, string>)[k] = v;
  }
  return env;
}

function command(
  args: string[],
  env: Record<string, string>,
  fileLimit?: RunOptions["fileLimit"],
) {
  const deno = [Deno.execPath(), "run", "-A", "main.ts", ...args];
  const limits = fileLimit
    // Soft first: a hard limit cannot go below the soft one in force.
    ? [`ulimit -Sn ${fileLimit.soft}`, ...(fileLimit.hard ? [`ulimit -Hn ${fileLimit.hard}`] : [])]
    : [];
  const [program, ...rest] = limits.length
    ? ["bash", "-c", `${limits.join(" && ")} && exec "$@"`, "sluice", ...deno]
    : deno;
  return new Deno.Command(program, {
    args: rest,
    cwd: REPO_ROOT,
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  });
}

export interface Finished {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command that is expected to end by itself (killed after the timeout). */
export async function runSluice(args: string[], options: RunOptions = {}): Promise<Finished> {
  const t0 = performance.now();
  const child = command(args, environment(options.env), options.fileLimit).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    return {
      code: out.code,
      stdout: dec.decode(out.stdout),
      stderr: dec.decode(out.stderr),
      ms: performance.now() - t0,
    };
  } finally {
    clearTimeout(timer);
  }
}

export interface ServeProcess {
  /** The server's process id (bash, if any, exec'd into it). */
  pid: number;
  /** stderr so far. */
  stderr(): string;
  /** Resolves with the port once "listening on" was logged; rejects if the process ends first. */
  port: Promise<number>;
  /** Resolves with the exit code. */
  exited: Promise<number>;
  /** Polls /health until it answers 200, bounded. */
  ready(timeoutMs?: number): Promise<number>;
  /** SIGTERM (SIGKILL after 15 s); resolves with the exit code. */
  stop(): Promise<number>;
}

/** Starts `main.ts serve --host 127.0.0.1 --port 0 ...args`. */
export function startServe(args: string[], options: RunOptions = {}): ServeProcess {
  const child = command(
    ["serve", "--host", "127.0.0.1", "--port", "0", ...args],
    environment(options.env),
    options.fileLimit,
  ).spawn();
  let stderr = "";
  const { promise: port, resolve: settlePort, reject: failPort } = Promise.withResolvers<number>();
  port.catch(() => {});
  const readErr = (async () => {
    const dec = new TextDecoder();
    for await (const bytes of child.stderr) {
      stderr += dec.decode(bytes, { stream: true });
      const m = stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) settlePort(Number(m[1]));
    }
  })();
  const drainOut = child.stdout.pipeTo(new WritableStream());
  const killer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
  const exited = child.status.then(async (s) => {
    clearTimeout(killer);
    await Promise.all([readErr, drainOut]).catch(() => {});
    failPort(new Error(`serve exited (${s.code}) before listening:\n${stderr}`));
    return s.code;
  });
  let done = false;
  exited.then(() => done = true);

  return {
    pid: child.pid,
    stderr: () => stderr,
    port,
    exited,
    async ready(timeoutMs = 90_000) {
      const p = await port;
      const end = performance.now() + timeoutMs;
      while (performance.now() < end) {
        if (done) throw new Error(`serve exited before it was ready:\n${stderr}`);
        try {
          const res = await fetch(`http://127.0.0.1:${p}/health`);
          await res.body?.cancel();
          if (res.status === 200) return p;
        } catch { /* not yet */ }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`serve not ready within ${timeoutMs} ms:\n${stderr}`);
    },
    async stop() {
      if (!done) child.kill("SIGTERM");
      const hard = setTimeout(() => !done && child.kill("SIGKILL"), 15_000);
      const code = await exited;
      clearTimeout(hard);
      return code;
    },
  };
}
