// A one-line progress bar on stderr (weights loading, model downloads), redrawn in place at most
// ~10 times a second on a terminal. Without a terminal (a log file, a supervisor) it prints only
// the end state, or with `quarters` a line per quarter, so logs are not flooded.

export interface ProgressOptions {
  /** Without a terminal, print a line at each quarter (long downloads), not only at the end. */
  quarters?: boolean;
}

/** Returns a reporter of (done, total) bytes; total null when unknown. Ends at done >= total. */
export function progressBar(
  label: string,
  options: ProgressOptions = {},
): (done: number, total: number | null) => void {
  const enc = new TextEncoder();
  const tty = Deno.stderr.isTerminal();
  let last = 0;
  let lastQuarter = -1;
  let finished = false;
  return (done, total) => {
    if (finished) return;
    const complete = total !== null && done >= total;
    const frac = total === null ? 0 : total > 0 ? Math.min(1, done / total) : 1;
    const width = 30;
    const filled = Math.round(frac * width);
    const line = `${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ` +
      `${(frac * 100).toFixed(0).padStart(3)}% ${mib(done)}/${
        total === null ? "?" : mib(total)
      } MiB`;
    if (tty) {
      const now = performance.now();
      if (!complete && now - last < 100) return;
      last = now;
      Deno.stderr.writeSync(enc.encode(`\r${line}${complete ? "\n" : ""}`));
    } else {
      const quarter = complete ? 4 : Math.floor(frac * 4);
      if (quarter !== lastQuarter && (complete || options.quarters)) {
        Deno.stderr.writeSync(enc.encode(line + "\n"));
      }
      lastQuarter = quarter;
    }
    if (complete) finished = true;
  };
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
