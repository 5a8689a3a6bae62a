// Keep-alive durations as Ollama takes them: a number of seconds, or a Go duration string ("300ms",
// "1.5h", "2h45m", "0"); any negative value keeps the model loaded for good, 0 unloads it once the
// request ends. The Ollama routes' `keep_alive` and the server's --keep-alive take the same forms.

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Milliseconds of a Go duration string, or null if it is not one. */
export function goDurationMs(text: string): number | null {
  const sign = text.startsWith("-") ? -1 : 1;
  const body = text.replace(/^[-+]/, "");
  if (body === "0") return 0;
  if (body === "") return null;
  let ms = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < body.length) {
    const at = PART.lastIndex;
    const m = PART.exec(body);
    if (!m || m.index !== at) return null;
    ms += Number(m[1]) * UNIT_MS[m[2]];
  }
  return sign * ms;
}

/** A keep-alive in ms (Infinity: for good), from seconds or a duration; null if malformed. */
export function keepAliveMs(value: string | number): number | null {
  const ms = typeof value === "number"
    ? (Number.isFinite(value) ? value * 1000 : null)
    : /^[-+]?\d+(\.\d+)?$/.test(value.trim())
    ? Number(value.trim()) * 1000
    : goDurationMs(value.trim());
  if (ms === null) return null;
  return ms < 0 ? Infinity : ms;
}
