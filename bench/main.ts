// `deno task bench kernels|decode|kv|serve [flags]`: prints a Markdown report and saves it under bench/reports/.

const [which, ...rest] = Deno.args;
const benches: Record<string, () => Promise<string>> = {
  kernels: async () => {
    const { openGpu } = await import("../engine/gpu/device.ts");
    const { benchKernels } = await import("./kernels.ts");
    return benchKernels(await openGpu());
  },
  decode: async () => (await import("./decode.ts")).benchDecode(rest),
  kv: async () => (await import("./kv.ts")).benchKv(rest),
  // `--clients 1,4,16` measures concurrency scaling; otherwise the workload replayer runs.
  serve: async () =>
    rest.some((a) => a.startsWith("--clients"))
      ? (await import("./serve/concurrency.ts")).benchConcurrency(rest)
      : (await import("./serve.ts")).benchServe(rest),
  responsiveness: async () => (await import("./responsiveness.ts")).benchResponsiveness(rest),
};

const run = benches[which];
if (!run) {
  console.error(`usage: deno task bench ${Object.keys(benches).join("|")}`);
  Deno.exit(2);
}
const report = await run();
console.log(report);
await Deno.mkdir("bench/reports", { recursive: true });
await Deno.writeTextFile(`bench/reports/${which}.md`, report + "\n");
