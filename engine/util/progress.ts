// A one-line progress bar on stderr, redrawn at most ~10 times a second.

export function progressBar(label: string): (done: number, total: number) => void {
  const enc = new TextEncoder();
  const tty = Deno.stderr.isTerminal();
  let last = 0;
  let finished = false;
  return (done, total) => {
    if (finished) return;
    const now = performance.now();
    const complete = done >= total;
    if (!complete && now - last < 100) return;
    last = now;
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    const width = 30;
    const filled = Math.round(frac * width);
    const line = `${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ` +
      `${(frac * 100).toFixed(0).padStart(3)}% ${mib(done)}/${mib(total)} MiB`;
    // Without a terminal, print only the end state so logs are not flooded.
    if (tty) Deno.stderr.writeSync(enc.encode(`\r${line}${complete ? "\n" : ""}`));
    else if (complete) Deno.stderr.writeSync(enc.encode(line + "\n"));
    if (complete) finished = true;
  };
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
