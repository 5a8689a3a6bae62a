// `deno task bundle`: one archive that runs Sluice's `serve` and `bench` on a machine with no
// network and no Deno: air-gapped edge hosts, and wherever `deno compile` cannot fetch its runtime
// base (denort comes from dl.deno.land: see tests/deploy/compile_test.ts). Unpacked, it is:
//
//   sluice-bundle-<os>-<arch>/
//     sluice      the launcher: `deno run -A --cached-only --frozen main.ts "$@"` on the files below
//     deno        this Deno (Deno.execPath(), the npm package's binary)
//     main.ts cli/ engine/ runtime/ server/ bench/ shaders/  what runs (no bench results)
//     deno.json   the repository's, with only the npm imports those sources use
//     deno.lock   pruned to match, by deno itself
//     .npmrc      the registry they came from, over any in $HOME (Deno files packages by registry)
//     deno_dir/   a DENO_DIR holding exactly those npm packages
//
// The packages are copied from this machine's Deno cache, so building needs no network either.
// --cached-only makes a missing package an error rather than a download, and --frozen keeps the
// lock as shipped. Tests and their packages (openai, playwright-core, fake timers) stay out.
//
//   deno task bundle [--format xz|gz] [--output FILE]

import { basename, dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");
/** What runs: the CLI, the three layers, the benchmarks and the WGSL they load. */
const SOURCES = ["main.ts", "cli", "engine", "runtime", "server", "bench", "shaders"];
/** Under SOURCES but not needed to run: benchmark reports, past and in progress. */
const LEFT_OUT = ["bench/results", "bench/reports"];

export const USAGE = `usage: deno task bundle [--format xz|gz] [--output FILE]

Writes an archive that runs \`sluice serve\` and \`sluice bench\` offline, with no Deno installed:
its own Deno binary, the sources, and the npm packages they use.

  --format xz|gz   compression (default xz: smaller, slower to build)
  --output FILE    default dist/sluice-bundle-<os>-<arch>.tar.<format>

Unpack and run:  tar -xf FILE && sluice-bundle-<os>-<arch>/sluice serve --model demo`;

/** The launcher. `bench` runs in the bundle: benchmarks start `main.ts serve` relative to it. */
const LAUNCHER = `#!/bin/sh
# Sluice from this bundle: its own Deno, sources and npm packages, never the network. A package
# missing from deno_dir/ is an error (--cached-only), not a download. \`sluice bench ...\` runs in
# this directory: benchmarks start \`main.ts serve\` from it and write bench/reports/ here.
set -e
here=$(dirname -- "$(readlink -f -- "$0")")
export DENO_DIR="$here/deno_dir" DENO_NO_UPDATE_CHECK=1
# deno_dir/npm/ is filed by registry: another one named here would find none of it.
unset NPM_CONFIG_REGISTRY npm_config_registry
if [ "$1" = bench ]; then cd "$here"; fi
exec "$here/deno" run -A --cached-only --frozen --config "$here/deno.json" "$here/main.ts" "$@"
`;

export interface Bundle {
  path: string;
  /** The archive's size. */
  bytes: number;
  /** Its unpacked contents' size. */
  unpackedBytes: number;
}

export async function buildBundle(
  { format = "xz", output }: { format?: "xz" | "gz"; output?: string } = {},
): Promise<Bundle> {
  const name = `sluice-bundle-${Deno.build.os}-${Deno.build.arch}`;
  const path = resolve(output ?? join(ROOT, "dist", `${name}.tar.${format}`));
  const stage = await Deno.makeTempDir({ prefix: "sluice-bundle-" });
  try {
    const app = join(stage, name);
    const files = sourceFiles();
    for (const file of files) {
      await Deno.mkdir(dirname(join(app, file)), { recursive: true });
      await Deno.copyFile(join(ROOT, file), join(app, file));
    }
    const deno = join(app, "deno");
    await Deno.copyFile(Deno.execPath(), deno);
    await Deno.chmod(deno, 0o755);
    await Deno.writeTextFile(join(app, "sluice"), LAUNCHER, { mode: 0o755 });

    const packages = await npmPackages(stage, files);
    await writeConfig(app, packages);
    await copyPackages(app, packages);
    await writeNpmrc(app, packages);
    await selfCheck(app);

    await Deno.mkdir(dirname(path), { recursive: true });
    await run("tar", ["-C", stage, format === "xz" ? "-cJf" : "-czf", path, name], {
      XZ_OPT: "-6 -T0",
    });
    return { path, bytes: (await Deno.stat(path)).size, unpackedBytes: await duBytes(app) };
  } finally {
    await Deno.remove(stage, { recursive: true });
  }
}

/** Repo-relative paths of every file under SOURCES, LEFT_OUT skipped. */
function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    if (LEFT_OUT.includes(path)) return;
    const info = Deno.statSync(join(ROOT, path));
    if (info.isFile) out.push(path);
    if (info.isDirectory) {
      for (const e of Deno.readDirSync(join(ROOT, path))) walk(join(path, e.name));
    }
  };
  SOURCES.forEach(walk);
  return out.sort();
}

/** An npm package in Deno's cache, as `deno info --json` lists it. */
interface NpmPackage {
  name: string;
  version: string;
  dependencies: string[];
  registryUrl: string;
  localPath: string;
}

/**
 * The npm packages that the sources' module graph reaches, dependencies included, by id
 * ("name@version"). One graph for every module shipped, so the Workers and benchmarks count.
 */
async function npmPackages(stage: string, files: string[]): Promise<Map<string, NpmPackage>> {
  const entry = join(stage, "graph.ts");
  const imports = files.filter((f) => f.endsWith(".ts"))
    .map((f) => `import ${JSON.stringify(new URL(`file://${join(ROOT, f)}`).href)};`);
  await Deno.writeTextFile(entry, imports.join("\n") + "\n");
  const info = JSON.parse(
    await run(Deno.execPath(), ["info", "--json", "--config", join(ROOT, "deno.json"), entry]),
  ) as {
    modules: { kind?: string; npmPackage?: string }[];
    npmPackages: Record<string, NpmPackage>;
  };
  await Deno.remove(entry);
  const reached = new Map<string, NpmPackage>();
  const visit = (id: string) => {
    if (reached.has(id)) return;
    const pkg = info.npmPackages[id];
    if (!pkg) throw new Error(`deno info lists no npm package ${id}`);
    reached.set(id, pkg);
    pkg.dependencies.forEach(visit);
  };
  for (const m of info.modules) if (m.kind === "npm" && m.npmPackage) visit(m.npmPackage);
  return reached;
}

/**
 * deno.json with only the imports the sources reach (Deno installs every npm import the config
 * names, used or not) and no tasks, then deno.lock pruned to it by `deno install`.
 */
async function writeConfig(app: string, packages: Map<string, NpmPackage>): Promise<void> {
  const config = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
  const names = new Set([...packages.values()].map((p) => p.name));
  config.imports = Object.fromEntries(
    Object.entries(config.imports as Record<string, string>).filter(([, target]) => {
      const npm = target.match(/^npm:\/?((?:@[^/@]+\/)?[^/@]+)@/);
      return npm === null || names.has(npm[1]);
    }),
  );
  delete config.tasks;
  await Deno.writeTextFile(join(app, "deno.json"), JSON.stringify(config, null, 2) + "\n");
  await Deno.copyFile(join(ROOT, "deno.lock"), join(app, "deno.lock"));
  // From this machine's cache, where `deno info` above found every package.
  await run(Deno.execPath(), ["install", "--quiet"], {}, app);
}

/** Copies each package the pruned lock names from Deno's npm cache into the bundle's DENO_DIR. */
async function copyPackages(app: string, packages: Map<string, NpmPackage>): Promise<void> {
  const lock = JSON.parse(await Deno.readTextFile(join(app, "deno.lock")));
  const cache = JSON.parse(await run(Deno.execPath(), ["info", "--json"])).npmCache as string;
  for (const id of Object.keys(lock.npm ?? {})) {
    const pkg = packages.get(id);
    if (!pkg) throw new Error(`deno.lock names ${id}, which the sources never reach`);
    await copyTree(pkg.localPath, join(app, "deno_dir", "npm", relative(cache, pkg.localPath)));
  }
}

/**
 * Names the registry the packages came from, for every scope among them: Deno looks for a package
 * in the cache folder of the registry it would fetch from, and merges a user's ~/.npmrc (say a
 * mirror, or "@huggingface:registry=...") with this one, which wins where both name a key.
 */
async function writeNpmrc(app: string, packages: Map<string, NpmPackage>): Promise<void> {
  const lines = new Set<string>();
  for (const p of packages.values()) {
    const scope = p.name.startsWith("@") ? p.name.split("/")[0] : null;
    lines.add(`${scope ? `${scope}:` : ""}registry=${p.registryUrl}`);
  }
  const sorted = [...lines].sort((a, b) => Number(a.startsWith("@")) - Number(b.startsWith("@")));
  await Deno.writeTextFile(join(app, ".npmrc"), sorted.join("\n") + "\n");
}

/** Runs the launcher with no network and nothing but the bundle: every package must be there. */
async function selfCheck(app: string): Promise<void> {
  const dead = "http://127.0.0.1:9";
  await run(join(app, "sluice"), ["--help"], {
    HTTP_PROXY: dead,
    HTTPS_PROXY: dead,
    NPM_CONFIG_REGISTRY: `${dead}/`,
  });
  // What the run cached besides the packages is keyed by this staging path: useless once unpacked.
  for await (const e of Deno.readDir(join(app, "deno_dir"))) {
    if (e.name !== "npm") await Deno.remove(join(app, "deno_dir", e.name), { recursive: true });
  }
}

async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if (e.isDirectory) await copyTree(join(from, e.name), join(to, e.name));
    else if (e.isFile) await Deno.copyFile(join(from, e.name), join(to, e.name));
  }
}

async function duBytes(path: string): Promise<number> {
  let total = 0;
  for await (const e of Deno.readDir(path)) {
    const p = join(path, e.name);
    total += e.isDirectory ? await duBytes(p) : (await Deno.lstat(p)).size;
  }
  return total;
}

/** Runs a command to completion; its stdout, or an error with its output. */
async function run(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
  cwd = ROOT,
): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, cwd, stdin: "null" }).output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(
      `${basename(cmd)} ${args.join(" ")} failed (${out.code}):\n` +
        dec.decode(out.stdout) + dec.decode(out.stderr),
    );
  }
  return dec.decode(out.stdout);
}

if (import.meta.main) {
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        format: { type: "string" },
        output: { type: "string" },
        help: { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${USAGE}`);
    Deno.exit(2);
  }
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const format = values.format ?? "xz";
  if (format !== "xz" && format !== "gz") {
    console.error(`--format must be xz or gz, not "${format}"\n\n${USAGE}`);
    Deno.exit(2);
  }
  const t0 = performance.now();
  const bundle = await buildBundle({ format, output: values.output });
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  const shown = relative(Deno.cwd(), bundle.path);
  console.log(
    `${shown.startsWith("..") ? bundle.path : shown}: ${mib(bundle.bytes)} MiB ` +
      `(${mib(bundle.unpackedBytes)} MiB unpacked), built in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
}
