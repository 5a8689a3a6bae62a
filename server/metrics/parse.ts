// Reads Prometheus exposition text back into samples: the tests check what /metrics serves with
// it. (The benchmark has its own parser, bench/serve/prometheus.ts, so that it shares nothing with
// the server it measures.)

import type { Labels } from "./exposition.ts";

export interface Sample {
  labels: Labels;
  value: number;
}

function parseValue(text: string, lineNo: number): number {
  switch (text) {
    case "+Inf":
    case "Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  const value = Number(text);
  if (text === "" || Number.isNaN(value)) throw new Error(`line ${lineNo}: bad value ${text}`);
  return value;
}

/**
 * Parses exposition text into samples by sample name (a histogram gives name_bucket, name_sum and
 * name_count). Comments and blank lines are skipped; timestamps are ignored. Throws on a malformed
 * line, naming it.
 */
export function parsePrometheusText(text: string): Map<string, Sample[]> {
  const out = new Map<string, Sample[]>();
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n].trim();
    const lineNo = n + 1;
    if (line === "" || line.startsWith("#")) continue;
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) throw new Error(`line ${lineNo}: no metric name in ${JSON.stringify(line)}`);
    const name = nameMatch[0];
    let pos = name.length;
    const labels: Labels = {};
    if (line[pos] === "{") {
      pos++;
      for (;;) {
        while (line[pos] === " ") pos++;
        if (line[pos] === "}") {
          pos++;
          break;
        }
        const labelMatch = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(pos));
        if (!labelMatch) throw new Error(`line ${lineNo}: bad label at column ${pos + 1}`);
        pos += labelMatch[0].length;
        let value = "";
        for (;;) {
          const ch = line[pos++];
          if (ch === undefined) throw new Error(`line ${lineNo}: unterminated label value`);
          if (ch === '"') break;
          if (ch === "\\") {
            const esc = line[pos++];
            if (esc === "n") value += "\n";
            else if (esc === "\\" || esc === '"') value += esc;
            else throw new Error(`line ${lineNo}: bad escape \\${esc ?? ""}`);
          } else {
            value += ch;
          }
        }
        labels[labelMatch[1]] = value;
        while (line[pos] === " ") pos++;
        if (line[pos] === ",") pos++;
        else if (line[pos] !== "}") throw new Error(`line ${lineNo}: expected , or }`);
      }
    }
    const rest = line.slice(pos).trim().split(/\s+/);
    if (rest.length < 1 || rest.length > 2) {
      throw new Error(`line ${lineNo}: expected a value and an optional timestamp`);
    }
    const sample = { labels, value: parseValue(rest[0], lineNo) };
    const list = out.get(name);
    if (list) list.push(sample);
    else out.set(name, [sample]);
  }
  return out;
}

/**
 * The value of the sample called `name` whose labels include `labels` (undefined when none
 * matches). Where several match, they are summed: asking sluice_requests_total with no labels
 * gives the total over every status.
 */
export function sampleValue(
  samples: Map<string, Sample[]>,
  name: string,
  labels: Labels = {},
): number | undefined {
  const matching = (samples.get(name) ?? []).filter((s) =>
    Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  if (matching.length === 0) return undefined;
  return matching.reduce((sum, s) => sum + s.value, 0);
}
