// `deno task compile` must give a binary that needs nothing from the source tree: every module it
// loads at run time (the engine Worker, started from a URL that deno compile cannot see), every
// text import (shaders, the playground page) embedded, and no file read relative to the sources.
// The runtime binary deno compile builds on (denort) is downloaded from dl.deno.land, which these
// machines cannot reach, so the build test here uses /bin/true as the base (DENORT_BIN): the
// embedded payload is complete, the result does not run. Where DENORT_BIN names a real denort, the
// test also runs the binary: --help, and `serve --model demo` until /health is ready.

import { join, relative, resolve } from "node:path";
import { assert, assertEquals } from "../helpers/testing.ts";
import { isRunning, waitGone } from "./processes.ts";

const ROOT = resolve(new URL("../..", import.meta.url).pathname);
const RUNTIME_SOURCES = ["main.ts", "cli", "engine", "runtime", "server"];

/** The compile task's arguments after `deno`, from deno.json. */
function compileArgs(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json")));
  const words = String(config.tasks.compile).split(/\s+/);
  assertEquals(words.slice(0, 2), ["deno", "compile"]);
  return words.slice(1);
}

function flagValues(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
}

/** Every .ts file the server runs from (tests and benches excluded), repo-relative. */
function runtimeSources(): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    const info = Deno.statSync(join(ROOT, path));
    if (info.isFile && path.endsWith(".ts")) out.push(path);
    if (info.isDirectory) {
      for (const e of Deno.readDirSync(join(ROOT, path))) walk(join(path, e.name));
    }
  };
  RUNTIME_SOURCES.forEach(walk);
  return out;
}

const WORKER = /new Worker\(\s*new URL\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url\s*\)/g;
const META_PATH = /import\.meta\.(?:url|dirname|filename|resolve)/;
const LITERAL_READ =
  /Deno\.(?:readFile|readTextFile|readFileSync|readTextFileSync|open|openSync|readDir|readDirSync)\(\s*["'`]|fetch\(\s*(?:new URL|["'`]file:)/;

/** Repo-relative paths of the modules `source` (repo-relative) starts as Workers. */
function workerModules(source: string, text: string): string[] {
  return [...text.matchAll(WORKER)].map((m) => relative(ROOT, resolve(ROOT, source, "..", m[1])));
}

/** The Worker entry modules that the runtime sources start. */
function allWorkerModules(): string[] {
  return runtimeSources().flatMap((s) => workerModules(s, Deno.readTextFileSync(join(ROOT, s))));
}

/** Repo-relative paths of the local files in `entry`'s module graph (deno info). */
async function moduleGraph(entry: string): Promise<string[]> {
  const info = await run(Deno.execPath(), ["info", "--json", entry]);
  assertEquals(info.code, 0, info.text);
  const modules: { specifier: string }[] = JSON.parse(info.text).modules;
  return modules.filter((m) => m.specifier.startsWith("file:"))
    .map((m) => relative(ROOT, new URL(m.specifier).pathname));
}

Deno.test("compile: every Worker module is --included, and nothing reads the source tree", () => {
  const includes = flagValues(compileArgs(), "--include");
  const problems: string[] = [];
  let workers = 0;
  for (const source of runtimeSources()) {
    const text = Deno.readTextFileSync(join(ROOT, source));
    for (const worker of workerModules(source, text)) {
      workers++;
      if (!includes.includes(worker)) problems.push(`${source}: Worker ${worker} not --included`);
    }
    text.split("\n").forEach((line, i) => {
      const startsWorker = /new Worker\(\s*new URL\(/.test(line);
      if (META_PATH.test(line) && !startsWorker) {
        problems.push(`${source}:${i + 1}: a path relative to the source: ${line.trim()}`);
      }
      if (LITERAL_READ.test(line)) problems.push(`${source}:${i + 1}: reads ${line.trim()}`);
    });
  }
  assert(workers >= 1, "the engine Worker is found");
  assertEquals(problems, []);
});

/** The longest line of a file: a marker to look for in the binary. */
function marker(path: string): string {
  return Deno.readTextFileSync(join(ROOT, path)).split("\n").map((l) => l.trim())
    .reduce((a, b) => (b.length > a.length ? b : a), "");
}

/** Which of `markers` occur in the file, read in chunks (the binary is hundreds of MB). */
async function findInFile(path: string, markers: string[]): Promise<Set<string>> {
  // latin1 maps every byte to one character, so the same decoding of the UTF-8 markers matches.
  const latin1 = new TextDecoder("latin1");
  const wanted = markers.map((m) => ({ m, as: latin1.decode(new TextEncoder().encode(m)) }));
  const overlap = Math.max(...wanted.map((w) => w.as.length));
  const found = new Set<string>();
  using file = await Deno.open(path);
  const chunk = new Uint8Array(32 << 20);
  let tail = "";
  for (let n; (n = await file.read(chunk)) !== null;) {
    const text = tail + latin1.decode(chunk.subarray(0, n));
    for (const w of wanted) if (text.includes(w.as)) found.add(w.m);
    tail = text.slice(-overlap);
  }
  return found;
}

async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, { args, cwd: ROOT, env, stdin: "null" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text };
}

Deno.test("compile: the binary embeds the engine Worker and every text import", async () => {
  const denort = Deno.env.get("DENORT_BIN");
  const dir = await Deno.makeTempDir({ prefix: "sluice-compile-" });
  try {
    const args = compileArgs();
    const output = join(dir, "sluice");
    args[args.indexOf("--output") + 1] = output;
    const built = await run(Deno.execPath(), args, { DENORT_BIN: denort ?? "/bin/true" });
    assertEquals(built.code, 0, built.text);

    // What must be inside: the Worker entries (invisible to deno compile without --include) and
    // every file that is not a module (shaders, the page) in the graphs of main.ts and the Workers.
    const workers = allWorkerModules();
    const graphs = await Promise.all(["main.ts", ...workers].map(moduleGraph));
    const needed = new Set([...workers, ...graphs.flat().filter((p) => !p.endsWith(".ts"))]);
    assert(
      [...needed].some((p) => p.startsWith("shaders/")),
      `shaders in the graph: ${[...needed]}`,
    );
    const markers = new Map([...needed].map((p) => [marker(p), p]));
    const present = await findInFile(output, [...markers.keys()]);
    const missing = [...markers].filter(([m]) => !present.has(m)).map(([, p]) => p);
    assertEquals(missing, []);

    if (denort) await runBinary(output);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** With a real denort: the binary prints its usage, and serves the demo model from a bare dir. */
async function runBinary(binary: string): Promise<void> {
  const help = await run(binary, ["--help"]);
  assertEquals(help.code, 0, help.text);
  assert(help.text.includes("serve"), help.text);

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const cwd = await Deno.makeTempDir({ prefix: "sluice-bare-" }); // no source tree around it
  const server = new Deno.Command(binary, {
    args: ["serve", "--model", "demo", "--port", String(port)],
    cwd,
    env: { SLUICE_CACHE: join(cwd, "cache") },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const deadline = performance.now() + 180_000;
    let status = 0;
    while (status !== 200 && performance.now() < deadline && isRunning(server.pid)) {
      await new Promise((r) => setTimeout(r, 500));
      status = await fetch(`http://127.0.0.1:${port}/health`)
        .then(async (r) => (await r.body?.cancel(), r.status), () => 0);
    }
    assertEquals(status, 200, "the compiled binary serves --model demo");
  } finally {
    if (isRunning(server.pid)) server.kill("SIGTERM");
    if ((await waitGone([server.pid], 15_000)).length > 0) server.kill("SIGKILL");
    await server.status;
    await Deno.remove(cwd, { recursive: true });
  }
}
