// llama.cpp for the benches that compare against it (bench llamacpp, embeddings-llamacpp): the npm
// package node-llama-cpp, pinned below, installed on first use into the bench cache with npm and
// run under Node (a native addon) as a subprocess (../llamacpp_node.mjs) that answers one JSON
// request per line. Its prebuilt CPU binaries come from the registry package, never built or
// downloaded elsewhere.

import { benchCacheDir } from "./smol_model.ts";

/** The node-llama-cpp release the benches run; its prebuilt binaries pin llama.cpp's version. */
export const NODE_LLAMA_CPP_VERSION = "3.22.1";

/** The CPU-only prebuilt package for this platform (the GPU ones are never installed). */
function prebuiltPackage(): string {
  const key = `${Deno.build.os}-${Deno.build.arch}`;
  const name = ({
    "linux-x86_64": "linux-x64",
    "linux-aarch64": "linux-arm64",
    "darwin-x86_64": "mac-x64",
    "darwin-aarch64": "mac-arm64-metal",
    "windows-x86_64": "win-x64",
    "windows-aarch64": "win-arm64",
  } as Record<string, string>)[key];
  if (!name) throw new Error(`node-llama-cpp has no prebuilt binaries for ${key}`);
  return `@node-llama-cpp/${name}`;
}

/** Installs the pinned node-llama-cpp (once) and returns the path of its entry module. */
export async function installNodeLlamaCpp(): Promise<string> {
  const dir = `${benchCacheDir()}/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}`;
  const pkg = `${dir}/node_modules/node-llama-cpp`;
  const installed = async () => {
    try {
      return JSON.parse(await Deno.readTextFile(`${pkg}/package.json`)).version ===
        NODE_LLAMA_CPP_VERSION;
    } catch {
      return false;
    }
  };
  if (!(await installed())) {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(`${dir}/package.json`, '{ "private": true }\n');
    const spec = [
      `node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`,
      `${prebuiltPackage()}@${NODE_LLAMA_CPP_VERSION}`,
    ];
    console.error(`installing ${spec.join(" ")} into ${dir} ...`);
    // --ignore-scripts: its postinstall may build llama.cpp from downloaded sources; the prebuilt
    // package is all this needs. --omit=optional: the CUDA and Vulkan builds stay out.
    const { success } = await new Deno.Command("npm", {
      args: [
        "install",
        "--no-save",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--omit=optional",
        ...spec,
      ],
      cwd: dir,
      stdout: "inherit",
      stderr: "inherit",
    }).output().catch((e) => {
      throw new Error(`bench llamacpp needs npm on PATH (${(e as Error).message})`);
    });
    if (!success || !(await installed())) {
      throw new Error(`npm install of ${spec.join(" ")} failed`);
    }
  }
  return `${pkg}/dist/index.js`;
}

/** The Node subprocess: one JSON request per line in, one reply line out. */
export class LlamaCppProcess {
  private lines: AsyncIterator<string>;
  private stdin: WritableStreamDefaultWriter<Uint8Array>;

  private constructor(private child: Deno.ChildProcess) {
    this.lines = readLines(child.stdout)[Symbol.asyncIterator]();
    this.stdin = child.stdin.getWriter();
  }

  static async start(entry: string): Promise<LlamaCppProcess> {
    const script = new URL("../llamacpp_node.mjs", import.meta.url).pathname;
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command("node", {
        args: [script, entry],
        stdin: "piped",
        stdout: "piped",
        stderr: "inherit",
        env: { NODE_LLAMA_CPP_SKIP_DOWNLOAD: "true" },
      }).spawn();
    } catch (e) {
      throw new Error(`bench llamacpp needs node (≥ 20) on PATH (${(e as Error).message})`);
    }
    const p = new LlamaCppProcess(child);
    await p.reply(); // "ready"
    return p;
  }

  /** Sends one request; its reply, whose fields the caller names (llamacpp_node.mjs's ops). */
  async request<T = Record<string, unknown>>(body: Record<string, unknown>): Promise<T> {
    await this.stdin.write(new TextEncoder().encode(JSON.stringify(body) + "\n"));
    return this.reply() as Promise<T>;
  }

  private async reply(): Promise<Record<string, unknown>> {
    for (;;) {
      const { value, done } = await this.lines.next();
      if (done) {
        throw new Error(`llama.cpp's Node process ended (${(await this.child.status).code})`);
      }
      if (!value.startsWith(REPLY)) {
        console.error(`[node] ${value}`);
        continue;
      }
      const r = JSON.parse(value.slice(REPLY.length));
      if (!r.ok) throw new Error(`llama.cpp: ${r.error}`);
      return r;
    }
  }

  async close(): Promise<void> {
    await this.stdin.close().catch(() => {});
    await this.child.status;
  }
}

/** Must match llamacpp_node.mjs. */
const REPLY = "@llamacpp ";

async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let held = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    held += text;
    let nl;
    while ((nl = held.indexOf("\n")) >= 0) {
      yield held.slice(0, nl);
      held = held.slice(nl + 1);
    }
  }
  if (held) yield held;
}
