// `deno task bundle` (deploy/bundle.ts) gives an archive that runs where there is no Deno and no
// network: built here (gzip, the quick format), unpacked into an empty directory and run from
// another one with PATH holding no deno, HOME, XDG_CACHE_HOME and DENO_DIR empty, every proxy and
// the npm registry pointed at a dead address. It must print the bench usage, serve the demo model
// until /health is ready, answer a chat completion, and stop cleanly on SIGTERM. The first start
// compiles shaders on an empty Mesa cache, so the server gets a few minutes.

import { join, resolve } from "node:path";
import { assert, assertEquals } from "../helpers/testing.ts";
import { chatDemo } from "../cli/sluice_process.ts";
import { isRunning, waitGone } from "./processes.ts";

const ROOT = resolve(new URL("../..", import.meta.url).pathname);
/** The bundle's size goal, compressed (xz is smaller still: bench/results/dependencies.md). */
const MAX_BYTES = 64 * 2 ** 20;
const DEAD = "http://127.0.0.1:9";

async function run(cmd: string, args: string[], options: Deno.CommandOptions = {}) {
  const out = await new Deno.Command(cmd, { args, stdin: "null", ...options }).output();
  const dec = new TextDecoder();
  return { code: out.code, text: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** A bare machine: only the tools the launcher uses on PATH, empty homes, no way out. */
async function bareEnvironment(tmp: string): Promise<Record<string, string>> {
  const bin = join(tmp, "bin");
  await Deno.mkdir(bin);
  for (const tool of ["dirname", "readlink"]) {
    const path = (await run("sh", ["-c", `command -v ${tool}`])).text.trim();
    await Deno.symlink(path, join(bin, tool));
  }
  const env: Record<string, string> = { PATH: bin, NO_COLOR: "1" };
  for (const key of ["HOME", "XDG_CACHE_HOME", "DENO_DIR"]) {
    env[key] = join(tmp, key.toLowerCase());
    await Deno.mkdir(env[key]);
  }
  for (const key of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) env[key] = DEAD;
  return { ...env, NPM_CONFIG_REGISTRY: `${DEAD}/`, HF_ENDPOINT: DEAD };
}

Deno.test("bundle: unpacked anywhere, serves the demo model with no Deno and no network", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "sluice-bundle-test-" });
  try {
    const archive = join(tmp, "sluice.tar.gz");
    const built = await run(
      Deno.execPath(),
      ["run", "-A", "deploy/bundle.ts", "--format", "gz", "--output", archive],
      { cwd: ROOT },
    );
    assertEquals(built.code, 0, built.text);
    const bytes = (await Deno.stat(archive)).size;
    assert(bytes <= MAX_BYTES, `${(bytes / 2 ** 20).toFixed(1)} MiB, more than 64 MiB`);

    const unpacked = join(tmp, "unpacked");
    await Deno.mkdir(unpacked);
    const untar = await run("tar", ["-xzf", archive, "-C", unpacked]);
    assertEquals(untar.code, 0, untar.text);
    const [top, ...others] = [...Deno.readDirSync(unpacked)].map((e) => e.name);
    assertEquals(others, [], "one directory at the top");
    const app = join(unpacked, top);

    // Only what serve and bench use: no test packages in the config or the cache.
    const config = await Deno.readTextFile(join(app, "deno.json"));
    const npm = join(app, "deno_dir", "npm", "registry.npmjs.org");
    for (const testOnly of ["openai", "playwright-core", "@sinonjs"]) {
      assert(!config.includes(`npm:${testOnly}`), `${testOnly} in the bundle's deno.json`);
      assert(!(await exists(join(npm, testOnly))), `${testOnly} in the bundle's DENO_DIR`);
    }

    const env = await bareEnvironment(tmp);
    const cwd = join(tmp, "elsewhere");
    await Deno.mkdir(cwd);
    const sluice = join(app, "sluice");
    const help = await run(sluice, ["bench", "--help"], { cwd, env, clearEnv: true });
    assertEquals(help.code, 0, help.text);
    assert(help.text.includes("usage: deno task bench"), help.text);

    await serveAndChat(sluice, cwd, env);
    assertEquals([...Deno.readDirSync(env.DENO_DIR)], [], "the user's DENO_DIR is left alone");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/** `sluice serve --model demo --port 0` until /health is ready, one chat completion, SIGTERM. */
async function serveAndChat(sluice: string, cwd: string, env: Record<string, string>) {
  const server = new Deno.Command(sluice, {
    args: ["serve", "--model", "demo", "--host", "127.0.0.1", "--port", "0"],
    cwd,
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let stderr = "";
  const reading = (async () => {
    const dec = new TextDecoder();
    for await (const bytes of server.stderr) stderr += dec.decode(bytes, { stream: true });
  })();
  try {
    const deadline = performance.now() + 240_000;
    let port = 0;
    let status = 0;
    while (status !== 200 && performance.now() < deadline && isRunning(server.pid)) {
      await new Promise((r) => setTimeout(r, 250));
      port ||= Number(stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)?.[1] ?? 0);
      if (!port) continue;
      status = await fetch(`http://127.0.0.1:${port}/health`)
        .then(async (r) => (await r.body?.cancel(), r.status), () => 0);
    }
    assertEquals(status, 200, `/health ready:\n${stderr}`);

    const res = await chatDemo(port, { max_tokens: 4, ignore_eos: true });
    const body = await res.json();
    assertEquals(res.status, 200, JSON.stringify(body));
    assertEquals(body.choices[0].finish_reason, "length");
    assertEquals(typeof body.choices[0].message.content, "string");
    assertEquals(body.usage.completion_tokens, 4);

    server.kill("SIGTERM");
    assertEquals((await waitGone([server.pid], 20_000)).length, 0, "stops on SIGTERM");
    assertEquals((await server.status).code, 0, stderr);
  } finally {
    if (isRunning(server.pid)) server.kill("SIGKILL");
    await server.status;
    await reading;
  }
}
