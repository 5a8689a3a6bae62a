// Prometheus text exposition (format 0.0.4) without a dependency: counters, gauges, histograms
// and a registry that renders them. Series render in the order their label sets were first used.

export type Labels = Record<string, string>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function checkMetricName(name: string): void {
  if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name ${JSON.stringify(name)}`);
}

function checkLabelNames(metric: string, names: readonly string[], reserved: string[]): void {
  const seen = new Set<string>();
  for (const name of names) {
    // Names starting with "__" are reserved for Prometheus itself.
    if (!LABEL_NAME.test(name) || name.startsWith("__") || reserved.includes(name)) {
      throw new Error(`${metric}: invalid label name ${JSON.stringify(name)}`);
    }
    if (seen.has(name)) throw new Error(`${metric}: duplicate label name ${name}`);
    seen.add(name);
  }
}

/** Label value escaping of the text format: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** HELP text escaping: backslash and line feed (quotes stay as they are). */
function escapeHelp(help: string): string {
  return help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** Sample values: shortest round-trip decimal, and the format's spellings of the infinities. */
export function formatValue(value: number): string {
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  if (Number.isNaN(value)) return "NaN";
  return String(value);
}

function renderLabels(pairs: [string, string][]): string {
  if (pairs.length === 0) return "";
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}`;
}

interface MetricOptions {
  name: string;
  help: string;
  labelNames?: readonly string[];
}

/** Per-label-set state shared by the three metric kinds; the key is the values in name order. */
abstract class Metric<S> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  abstract readonly type: "counter" | "gauge" | "histogram";
  protected series = new Map<string, { values: string[]; state: S }>();

  constructor(options: MetricOptions, reserved: string[] = []) {
    checkMetricName(options.name);
    this.name = options.name;
    this.help = options.help;
    this.labelNames = [...(options.labelNames ?? [])];
    checkLabelNames(this.name, this.labelNames, reserved);
  }

  protected abstract fresh(): S;

  /** The state for a label set, created on first use; the set must name exactly labelNames. */
  protected seriesFor(labels: Labels | undefined): S {
    const given = labels ?? {};
    const keys = Object.keys(given);
    if (
      keys.length !== this.labelNames.length ||
      !this.labelNames.every((n) => Object.hasOwn(given, n))
    ) {
      throw new Error(
        `${this.name}: labels {${keys.join(",")}} must be exactly {${this.labelNames.join(",")}}`,
      );
    }
    const values = this.labelNames.map((n) => String(given[n]));
    const key = JSON.stringify(values);
    let entry = this.series.get(key);
    if (!entry) {
      entry = { values, state: this.fresh() };
      this.series.set(key, entry);
    }
    return entry.state;
  }

  /** Makes a label set appear (at zero) before anything happens to it. */
  ensure(labels?: Labels): void {
    this.seriesFor(labels);
  }

  protected labelPairs(values: string[]): [string, string][] {
    return this.labelNames.map((n, i) => [n, values[i]]);
  }

  /** The sample lines, without HELP/TYPE. An unlabelled metric always shows its zero state. */
  abstract samples(): string[];

  render(): string {
    if (this.labelNames.length === 0) this.seriesFor(undefined);
    const head = [
      `# HELP ${this.name} ${escapeHelp(this.help)}`,
      `# TYPE ${this.name} ${this.type}`,
    ];
    return [...head, ...this.samples()].join("\n") + "\n";
  }
}

/** Splits the optional leading labels argument from the number after it. */
function labelsAndNumber(a: Labels | number | undefined, b: number | undefined, fallback: number) {
  return typeof a === "number" || a === undefined
    ? { labels: undefined, value: a ?? fallback }
    : { labels: a, value: b ?? fallback };
}

export class Counter extends Metric<{ value: number }> {
  readonly type = "counter";

  protected fresh() {
    return { value: 0 };
  }

  inc(value?: number): void;
  inc(labels: Labels, value?: number): void;
  inc(a?: Labels | number, b?: number): void {
    const { labels, value } = labelsAndNumber(a, b, 1);
    if (!(value >= 0) || !Number.isFinite(value)) {
      throw new RangeError(`${this.name}: a counter only goes up by finite amounts, got ${value}`);
    }
    this.seriesFor(labels).value += value;
  }

  get(labels?: Labels): number {
    return this.seriesFor(labels).value;
  }

  samples(): string[] {
    return [...this.series.values()].map(({ values, state }) =>
      `${this.name}${renderLabels(this.labelPairs(values))} ${formatValue(state.value)}`
    );
  }
}

export class Gauge extends Metric<{ value: number }> {
  readonly type = "gauge";
  #collect: ((gauge: Gauge) => void) | undefined;

  constructor(options: MetricOptions & { collect?: (gauge: Gauge) => void }) {
    super(options);
    this.#collect = options.collect;
  }

  protected fresh() {
    return { value: 0 };
  }

  /**
   * A callback run at each scrape, before rendering, that set()s current values (queue depth,
   * KV blocks in use). Replaces any earlier one; undefined removes it.
   */
  setCollect(collect: ((gauge: Gauge) => void) | undefined): void {
    this.#collect = collect;
  }

  set(value: number): void;
  set(labels: Labels, value: number): void;
  set(a: Labels | number, b?: number): void {
    const { labels, value } = labelsAndNumber(a, b, NaN);
    this.seriesFor(labels).value = value;
  }

  inc(value?: number): void;
  inc(labels: Labels, value?: number): void;
  inc(a?: Labels | number, b?: number): void {
    const { labels, value } = labelsAndNumber(a, b, 1);
    this.seriesFor(labels).value += value;
  }

  dec(value?: number): void;
  dec(labels: Labels, value?: number): void;
  dec(a?: Labels | number, b?: number): void {
    const { labels, value } = labelsAndNumber(a, b, 1);
    this.seriesFor(labels).value -= value;
  }

  get(labels?: Labels): number {
    return this.seriesFor(labels).value;
  }

  /** Runs the scrape-time callback, if any. Called by Registry.render(). */
  collect(): void {
    this.#collect?.(this);
  }

  samples(): string[] {
    return [...this.series.values()].map(({ values, state }) =>
      `${this.name}${renderLabels(this.labelPairs(values))} ${formatValue(state.value)}`
    );
  }
}

interface HistogramState {
  /** counts[i] = observations in (bounds[i-1], bounds[i]]; the last slot is (last bound, +Inf). */
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram extends Metric<HistogramState> {
  readonly type = "histogram";
  /** Finite upper bounds, ascending; the +Inf bucket is implicit. */
  readonly buckets: readonly number[];

  constructor(options: MetricOptions & { buckets: readonly number[] }) {
    super(options, ["le"]); // "le" names the bucket bound
    const finite = options.buckets.filter((b) => b !== Infinity);
    for (let i = 0; i < finite.length; i++) {
      if (!Number.isFinite(finite[i]) || (i > 0 && !(finite[i] > finite[i - 1]))) {
        throw new Error(`${this.name}: buckets must be finite and strictly increasing`);
      }
    }
    this.buckets = finite;
  }

  protected fresh(): HistogramState {
    return { counts: new Array(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  observe(value: number): void;
  observe(labels: Labels, value: number): void;
  observe(a: Labels | number, b?: number): void {
    const { labels, value } = labelsAndNumber(a, b, NaN);
    if (Number.isNaN(value)) throw new RangeError(`${this.name}: cannot observe NaN`);
    const state = this.seriesFor(labels);
    let i = 0;
    while (i < this.buckets.length && value > this.buckets[i]) i++; // le: bound is inclusive
    state.counts[i]++;
    state.sum += value;
    state.count++;
  }

  /** Count and sum of one label set, for tests and in-process readers. */
  get(labels?: Labels): { count: number; sum: number } {
    const { count, sum } = this.seriesFor(labels);
    return { count, sum };
  }

  samples(): string[] {
    const lines: string[] = [];
    for (const { values, state } of this.series.values()) {
      const pairs = this.labelPairs(values);
      let cumulative = 0;
      const bounds = [...this.buckets, Infinity];
      bounds.forEach((bound, i) => {
        cumulative += state.counts[i];
        const le = renderLabels([...pairs, ["le", formatValue(bound)]]);
        lines.push(`${this.name}_bucket${le} ${cumulative}`);
      });
      lines.push(`${this.name}_sum${renderLabels(pairs)} ${formatValue(state.sum)}`);
      lines.push(`${this.name}_count${renderLabels(pairs)} ${state.count}`);
    }
    return lines;
  }
}

type AnyMetric = Counter | Gauge | Histogram;

/** A set of metrics rendered together, in registration order. */
export class Registry {
  #metrics = new Map<string, AnyMetric>();

  register<M extends AnyMetric>(metric: M): M {
    // A histogram also owns name_bucket, name_sum and name_count.
    const owned = (m: AnyMetric) =>
      m.type === "histogram" ? [m.name, `${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`] : [
        m.name,
      ];
    const taken = new Set([...this.#metrics.values()].flatMap(owned));
    for (const name of owned(metric)) {
      if (taken.has(name)) throw new Error(`metric name ${name} is already registered`);
    }
    this.#metrics.set(metric.name, metric);
    return metric;
  }

  counter(options: MetricOptions): Counter {
    return this.register(new Counter(options));
  }

  gauge(options: MetricOptions & { collect?: (gauge: Gauge) => void }): Gauge {
    return this.register(new Gauge(options));
  }

  histogram(options: MetricOptions & { buckets: readonly number[] }): Histogram {
    return this.register(new Histogram(options));
  }

  get(name: string): AnyMetric | undefined {
    return this.#metrics.get(name);
  }

  /** The exposition text served at /metrics (Content-Type: text/plain; version=0.0.4). */
  render(): string {
    for (const metric of this.#metrics.values()) {
      if (metric instanceof Gauge) metric.collect();
    }
    return [...this.#metrics.values()].map((m) => m.render()).join("");
  }
}

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
