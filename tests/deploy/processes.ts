// What the deploy tests ask Linux about the processes they started: whether a pid still runs and
// which children it has (nginx's workers). Read from /proc, so a leak check needs nothing but the
// pids the test itself started.

/** State letter and parent of a pid from /proc/PID/stat, or null when there is no such process. */
function stat(pid: number): { state: string; ppid: number } | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return null;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
  const [state, ppid] = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state, ppid: Number(ppid) };
}

/** True while the process exists and is not a zombie (exited, not yet reaped). */
export function isRunning(pid: number): boolean {
  const s = stat(pid);
  return s !== null && s.state !== "Z" && s.state !== "X";
}

/** The running processes whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    const child = Number(entry.name);
    if (!Number.isInteger(child)) continue;
    const s = stat(child);
    if (s !== null && s.ppid === pid && s.state !== "Z") out.push(child);
  }
  return out;
}

/** Polls until none of `pids` runs or `timeoutMs` passes; returns the ones still running. */
export async function waitGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = performance.now() + timeoutMs;
  let left = pids.filter(isRunning);
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = left.filter(isRunning);
  }
  return left;
}
