// Sluice command line: `serve`, `generate`, `bench`. Their flags are the flag table's (cli/).
// Every command answers --help with its usage and nothing else (the modules that load models or
// open the GPU are imported only once a command runs); a bad flag gets one line naming it and the
// usage, exit 2. Other failures (a model that cannot be had or loaded) exit 1 with the message.

import { ensureRuntimeDir } from "./engine/util/runtime_dir.ts";
import {
  COMMAND_FLAGS,
  generateOptions,
  parseFlags,
  serveOptions,
  UsageError,
} from "./cli/commands.ts";

/** Each command's schema and usage (tests/cli/ checks every flag is documented). */
export { COMMAND_FLAGS };

/** Prints to stderr: logs never mix with a command's output on stdout. */
const log = (msg: string) => console.error(msg);

async function generate(args: string[]): Promise<void> {
  const flags = parseFlags(COMMAND_FLAGS.generate.schema, args);
  const { chooseModel } = await import("./engine/sources/default_model.ts");
  const { openRuntime } = await import("./runtime/open.ts");
  const { StreamDecoder } = await import("./engine/text/tokenizer.ts");
  const model = await chooseModel(flags.model?.[0], log);
  const { runtime, tokenizer: tok } = await openRuntime(model.dir, {
    ...generateOptions(flags),
    inProcess: true,
  });
  try {
    const ids = flags["prompt-ids"] ??
      (flags.chat
        ? tok.encodeChat([{ role: "user", content: flags.prompt! }])
        : tok.encode(flags.prompt!));
    const handle = runtime.submit({
      ids,
      maxTokens: flags["max-tokens"],
      sampling: {
        temperature: flags.temperature,
        topK: flags["top-k"],
        topP: flags["top-p"],
        seed: flags.seed ?? ((Math.random() * 2 ** 31) >>> 0),
      },
      topLogprobs: flags["top-logprobs"],
    });
    const tokens: number[] = [];
    const top: [number, number][][] = [];
    const decoder = new StreamDecoder(tok);
    const out = new TextEncoder();
    for await (const ev of handle.tokens) {
      tokens.push(ev.id);
      top.push(ev.top);
      if (!flags.json) await Deno.stdout.write(out.encode(decoder.push(ev.id)));
    }
    const finish = await handle.done;
    if (flags.json) {
      console.log(JSON.stringify({ tokens, top_logprobs: top, finish_reason: finish.reason }));
    } else {
      await Deno.stdout.write(out.encode(decoder.flush() + "\n"));
      console.error(`[${finish.completionTokens} tokens, finish: ${finish.reason}]`);
    }
  } finally {
    await runtime.close();
  }
}

async function serveCommand(args: string[]): Promise<void> {
  const flags = parseFlags(COMMAND_FLAGS.serve.schema, args);
  const { serve } = await import("./server/serve.ts");
  const { servedModels } = await import("./runtime/served_models.ts");
  await serve(flags, await servedModels(flags, serveOptions(flags), log));
}

async function benchCommand(args: string[]): Promise<void> {
  const { runBench } = await import("./bench/main.ts");
  Deno.exit(await runBench(args));
}

const USAGE = `usage: deno task <command> [flags]     (main.ts <command>)

commands:
  serve      an OpenAI-compatible HTTP server with streaming
  generate   one prompt in the terminal
  bench      benchmarks: kernels, decode, kv, serve, responsiveness, startup

"<command> --help" lists a command's flags.`;

const COMMANDS: Record<string, { usage: string; run: (args: string[]) => Promise<void> }> = {
  serve: { usage: COMMAND_FLAGS.serve.usage, run: serveCommand },
  generate: { usage: COMMAND_FLAGS.generate.usage, run: generate },
  bench: { usage: "", run: benchCommand },
};

/** --help or -h anywhere before a "--" terminator. */
function wantsHelp(args: string[]): boolean {
  const end = args.indexOf("--");
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === "--help" || a === "-h");
}

if (import.meta.main) {
  const [name, ...rest] = Deno.args;
  const command = name === undefined ? undefined : COMMANDS[name];
  if (!command) {
    const help = name === undefined || name === "--help" || name === "-h" || name === "help";
    if (help) console.log(USAGE);
    else console.error(`sluice: unknown command "${name}"\n\n${USAGE}`);
    Deno.exit(help ? 0 : 2);
  }
  // bench has its own usage and help (bench/main.ts).
  if (name !== "bench" && wantsHelp(rest)) {
    console.log(command.usage);
    Deno.exit(0);
  }
  // Before anything opens the GPU: Mesa's complaint about a missing runtime dir is noise.
  ensureRuntimeDir();
  try {
    await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      // One line: node's parseArgs explains some errors over several.
      console.error(`sluice ${name}: ${err.message.replace(/\s*\n\s*/g, " ")}\n\n${command.usage}`);
      Deno.exit(2);
    }
    console.error(`sluice: ${err instanceof Error ? err.message : err}`);
    Deno.exit(1);
  }
}
