// Standalone SVG line charts: axes with ticks, axis labels, a title and a legend. No dependencies;
// the output opens in any browser and renders inline in Markdown viewers.

export interface Series {
  name: string;
  /** [x, y] in data units, in drawing order. */
  points: [number, number][];
  /** Draw as a step function (value holds until the next point). */
  step?: boolean;
  dashed?: boolean;
  color?: string;
}

export interface ChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  width?: number;
  height?: number;
  /** Fixed axis ranges; otherwise from the data (y always includes 0). */
  xRange?: [number, number];
  yRange?: [number, number];
  /** Legend entries beyond this are summarised as "+N more". */
  legendLimit?: number;
  /** A line of small print under the title. */
  note?: string;
}

export const PALETTE = [
  "#1f77b4",
  "#d62728",
  "#2ca02c",
  "#ff7f0e",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#bcbd22",
  "#17becf",
];

export function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(
    /"/g,
    "&quot;",
  );
}

/** About `count` round tick values (1, 2, 5 × 10^k steps) from one at or below lo to one at or
 * above hi, so the frame can start and end on a tick. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  const first = Math.floor(lo / step + 1e-9);
  for (let k = first; out.length < 4 * count + 2; k++) {
    const v = Number((k * step).toPrecision(12));
    out.push(v);
    if (v >= hi - step * 1e-9) break;
  }
  return out;
}

function fmt(v: number): string {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(1);
  return Number(v.toPrecision(4)).toString();
}

const r1 = (v: number) => Math.round(v * 10) / 10;

export function lineChart(spec: ChartSpec): string {
  const W = spec.width ?? 720;
  const H = spec.height ?? 420;
  const m = { left: 70, right: 190, top: spec.note ? 58 : 44, bottom: 56 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const all = spec.series.flatMap((s) => s.points).filter(([x, y]) =>
    Number.isFinite(x) && Number.isFinite(y)
  );
  let [x0, x1] = spec.xRange ?? extent(all, 0);
  let [y0, y1] = spec.yRange ?? extent(all, 1);
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  const xt = niceTicks(x0, x1);
  const yt = niceTicks(y0, y1);
  // Stretch the ranges to the outer ticks so the frame starts and ends on a tick.
  [x0, x1] = [Math.min(x0, xt[0]), Math.max(x1, xt[xt.length - 1])];
  [y0, y1] = [Math.min(y0, yt[0]), Math.max(y1, yt[yt.length - 1])];
  const sx = (x: number) => m.left + ((x - x0) / (x1 - x0)) * pw;
  const sy = (y: number) => m.top + ph - ((y - y0) / (y1 - y0)) * ph;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="sans-serif" font-size="12">`,
  );
  out.push(`<title>${escapeXml(spec.title)}</title>`);
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${
      escapeXml(spec.title)
    }</text>`,
  );
  if (spec.note) {
    out.push(
      `<text x="${W / 2}" y="40" text-anchor="middle" font-size="11" fill="#555">${
        escapeXml(spec.note)
      }</text>`,
    );
  }

  // Grid, ticks and tick labels.
  out.push(`<g class="grid" stroke="#e5e5e5">`);
  for (const v of xt) {
    out.push(`<line x1="${r1(sx(v))}" y1="${m.top}" x2="${r1(sx(v))}" y2="${m.top + ph}"/>`);
  }
  for (const v of yt) {
    out.push(`<line x1="${m.left}" y1="${r1(sy(v))}" x2="${m.left + pw}" y2="${r1(sy(v))}"/>`);
  }
  out.push(`</g>`);
  out.push(`<g class="axes" stroke="black">`);
  out.push(`<line x1="${m.left}" y1="${m.top + ph}" x2="${m.left + pw}" y2="${m.top + ph}"/>`);
  out.push(`<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + ph}"/>`);
  out.push(`</g>`);
  out.push(`<g class="x-ticks" text-anchor="middle">`);
  for (const v of xt) out.push(`<text x="${r1(sx(v))}" y="${m.top + ph + 18}">${fmt(v)}</text>`);
  out.push(`</g>`);
  out.push(`<g class="y-ticks" text-anchor="end">`);
  for (const v of yt) out.push(`<text x="${m.left - 6}" y="${r1(sy(v) + 4)}">${fmt(v)}</text>`);
  out.push(`</g>`);
  out.push(
    `<text class="x-label" x="${m.left + pw / 2}" y="${H - 14}" text-anchor="middle">${
      escapeXml(spec.xLabel)
    }</text>`,
  );
  out.push(
    `<text class="y-label" x="18" y="${m.top + ph / 2}" text-anchor="middle" ` +
      `transform="rotate(-90 18 ${m.top + ph / 2})">${escapeXml(spec.yLabel)}</text>`,
  );

  // Series, clipped to the plot area.
  out.push(
    `<defs><clipPath id="plot"><rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}"/></clipPath></defs>`,
  );
  out.push(`<g clip-path="url(#plot)" fill="none" stroke-width="1.6">`);
  spec.series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length];
    const pts = stepped(s).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (pts.length === 0) return;
    const d = pts.map(([x, y]) => `${r1(sx(x))},${r1(sy(y))}`).join(" ");
    out.push(
      `<polyline class="series" data-name="${escapeXml(s.name)}" stroke="${color}"` +
        `${s.dashed ? ` stroke-dasharray="6 4"` : ""} points="${d}"/>`,
    );
    if (pts.length === 1) {
      out.push(
        `<circle cx="${r1(sx(pts[0][0]))}" cy="${r1(sy(pts[0][1]))}" r="2.5" fill="${color}"/>`,
      );
    }
  });
  out.push(`</g>`);
  if (all.length === 0) {
    out.push(
      `<text x="${m.left + pw / 2}" y="${
        m.top + ph / 2
      }" text-anchor="middle" fill="#888">no data</text>`,
    );
  }

  // Legend.
  const limit = spec.legendLimit ?? 16;
  out.push(`<g class="legend">`);
  spec.series.slice(0, limit).forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length];
    const y = m.top + 8 + i * 18;
    const x = m.left + pw + 14;
    out.push(
      `<line x1="${x}" y1="${y}" x2="${x + 22}" y2="${y}" stroke="${color}" stroke-width="2.5"` +
        `${s.dashed ? ` stroke-dasharray="6 4"` : ""}/>`,
    );
    out.push(`<text x="${x + 28}" y="${y + 4}">${escapeXml(s.name)}</text>`);
  });
  if (spec.series.length > limit) {
    out.push(
      `<text x="${m.left + pw + 14}" y="${m.top + 12 + limit * 18}" fill="#555">+${
        spec.series.length - limit
      } more</text>`,
    );
  }
  out.push(`</g>`);
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}

/** [min, max] of one coordinate, always including 0 (a loop: spreading 10^5 points overflows). */
function extent(points: [number, number][], k: 0 | 1): [number, number] {
  let lo = 0;
  let hi = 0;
  for (const p of points) {
    if (p[k] < lo) lo = p[k];
    if (p[k] > hi) hi = p[k];
  }
  return [lo, hi];
}

function stepped(s: Series): [number, number][] {
  if (!s.step) return s.points;
  const out: [number, number][] = [];
  s.points.forEach(([x, y], i) => {
    if (i > 0) out.push([x, s.points[i - 1][1]]);
    out.push([x, y]);
  });
  return out;
}
