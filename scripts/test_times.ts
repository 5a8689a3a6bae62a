// Per-file and per-test durations from `deno test --junit-path` reports, as Markdown: the table a
// change to the suite is judged by (bench/results/suite-times-*.md).
//
//   deno run -A scripts/test_times.ts REPORT.xml [BEFORE.xml] [--slowest N]
//
// With two reports, each file's seconds before and after sit side by side (files that exist in
// only one report show "—"). A file's seconds are the sum of its test cases' durations: Deno's
// JUnit report times test bodies, not module loading, so a file's own top-level work (a GPU device
// opened at import) is charged to its first test that awaits it.

interface Case {
  name: string;
  seconds: number;
  failed: boolean;
  /** A t.step() inside another case ("parent > step"): its time is inside its parent's. */
  step: boolean;
}

interface Suite {
  file: string;
  cases: Case[];
}

function attr(tag: string, name: string): string | undefined {
  const m = tag.match(new RegExp(`\\s${name}="([^"]*)"`));
  return m ? unescape(m[1]) : undefined;
}

function unescape(s: string): string {
  return s.replaceAll("&quot;", '"').replaceAll("&apos;", "'").replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">").replaceAll("&amp;", "&");
}

/** The suites of one JUnit report: one per test file. */
export function parseJunit(xml: string): Suite[] {
  const suites: Suite[] = [];
  const suiteRe = /<testsuite\s[^>]*>([\s\S]*?)<\/testsuite>/g;
  for (const m of xml.matchAll(suiteRe)) {
    const open = m[0].slice(0, m[0].indexOf(">") + 1);
    const file = (attr(open, "name") ?? "?").replace(/^\.\//, "");
    let cases: Case[] = [];
    const caseRe = /<testcase\s[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g;
    for (const c of m[1].matchAll(caseRe)) {
      const tag = c[0].slice(0, c[0].indexOf(">") + 1);
      cases.push({
        name: attr(tag, "name") ?? "?",
        seconds: Number(attr(tag, "time") ?? 0),
        failed: /<failure|<error/.test(c[2] ?? ""),
        step: false,
      });
    }
    const names = cases.map((c) => c.name);
    cases = cases.map((c) => ({
      ...c,
      step: names.some((n) => n !== c.name && c.name.startsWith(n + " > ")),
    }));
    suites.push({ file, cases });
  }
  return suites;
}

/** A file's seconds: its top-level tests' (each step's time is inside its test's). */
const total = (s: Suite) => s.cases.reduce((a, c) => a + (c.step ? 0 : c.seconds), 0);
const tests = (s: Suite) => s.cases.filter((c) => !c.step).length;
const fmt = (s: number | undefined) => s === undefined ? "—" : s.toFixed(1);

export function timesMarkdown(after: Suite[], before?: Suite[], slowest = 25): string {
  const lines: string[] = [];
  const sum = (suites: Suite[]) => suites.reduce((a, s) => a + total(s), 0);
  const count = (suites: Suite[]) => suites.reduce((a, s) => a + tests(s), 0);
  const steps = (suites: Suite[]) => suites.reduce((a, s) => a + s.cases.length - tests(s), 0);
  const failed = (suites: Suite[]) =>
    suites.reduce((a, s) => a + s.cases.filter((c) => c.failed).length, 0);
  const head = (label: string, s: Suite[]) =>
    `${label}: ${s.length} files, ${count(s)} tests and ${steps(s)} steps (${failed(s)} failed), ` +
    `${fmt(sum(s))} s in test bodies`;
  if (before) lines.push(`- ${head("before", before)}`);
  lines.push(`- ${head(before ? "after" : "report", after)}`, "");

  const files = new Map<string, { after?: number; before?: number; tests: number }>();
  for (const s of after) files.set(s.file, { after: total(s), tests: tests(s) });
  for (const s of before ?? []) {
    const row = files.get(s.file) ?? { tests: tests(s) };
    row.before = total(s);
    files.set(s.file, row);
  }
  const rows = [...files.entries()].sort((a, b) =>
    Math.max(b[1].after ?? 0, b[1].before ?? 0) - Math.max(a[1].after ?? 0, a[1].before ?? 0)
  );
  lines.push(
    before ? "| file | tests | before s | after s |" : "| file | tests | s |",
    before ? "| --- | ---: | ---: | ---: |" : "| --- | ---: | ---: |",
  );
  for (const [file, r] of rows) {
    lines.push(
      before
        ? `| ${file} | ${r.tests} | ${fmt(r.before)} | ${fmt(r.after)} |`
        : `| ${file} | ${r.tests} | ${fmt(r.after)} |`,
    );
  }
  const cases = after.flatMap((s) => s.cases.map((c) => ({ file: s.file, ...c })))
    .sort((a, b) => b.seconds - a.seconds).slice(0, slowest);
  lines.push(
    "",
    `Slowest ${cases.length} tests:`,
    "",
    "| s | file | test |",
    "| ---: | --- | --- |",
  );
  for (const c of cases) {
    const name = (c.step ? "(step) " : "") + c.name.replaceAll("|", "\\|");
    lines.push(`| ${fmt(c.seconds)} | ${c.file} | ${name} |`);
  }
  return lines.join("\n") + "\n";
}

if (import.meta.main) {
  const args = [...Deno.args];
  let slowest = 25;
  const i = args.indexOf("--slowest");
  if (i >= 0) {
    slowest = Number(args[i + 1]);
    args.splice(i, 2);
  }
  if (args.length < 1 || args.length > 2) {
    console.error("usage: scripts/test_times.ts REPORT.xml [BEFORE.xml] [--slowest N]");
    Deno.exit(2);
  }
  const after = parseJunit(await Deno.readTextFile(args[0]));
  const before = args[1] ? parseJunit(await Deno.readTextFile(args[1])) : undefined;
  console.log(timesMarkdown(after, before, slowest));
}
