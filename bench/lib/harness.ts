/**
 * The benchmark harness: every benchmark measures its subject and a baseline in the same run
 * on the same machine, repeats each several rounds, and reports medians, p99 and the ratio to
 * the baseline. Results are printed as a table and written as JSON to bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median, nowMs, p99 } from './stats.js';

/** One measured row: a throughput (higher is better) or a latency (lower is better). */
export interface Row {
  label: string;
  unit: string;
  /** Per-round values (throughput rounds) or per-operation samples (latency). */
  samples: number[];
  /** Label of the row in the same benchmark this one is compared with. */
  baseline?: string;
  better: 'higher' | 'lower';
  /** A target stated by the issue, shown and checked, e.g. {ratio: 0.5} or {max: 5}. */
  target?: { ratioAtLeast?: number; medianAtMost?: number; medianAtLeast?: number; note: string };
  /** Further rows to compare with; each yields a ratio line ("a ÷ b"). */
  compare?: Array<{ label: string; ratioAtLeast?: number }>;
}

export interface BenchContext {
  rounds: number;
  /** Scales workloads down for a quick run (BENCH_QUICK=1). */
  quick: boolean;
  log(msg: string): void;
}

export interface Benchmark {
  name: string;
  description: string;
  run(ctx: BenchContext): Promise<Row[]>;
}

/**
 * Operations per second over `rounds` rounds of `fn`, which performs `ops` operations. One
 * unmeasured round first, so the JIT has warmed up before anything counts.
 */
export async function throughput(rounds: number, ops: number, fn: () => Promise<void>, setup?: () => Promise<void>): Promise<number[]> {
  if (setup) await setup();
  await fn();
  const out: number[] = [];
  for (let r = 0; r < rounds; r++) {
    if (setup) await setup();
    const t0 = nowMs();
    await fn();
    out.push((ops / (nowMs() - t0)) * 1000);
  }
  return out;
}

/**
 * Per-call latencies in ms of `n` sequential calls of `fn`, after `warmup` unmeasured calls
 * (a quarter of `n`, at most 500: enough for V8 to optimise the path being measured, so that
 * whichever variant runs first is not charged for the JIT).
 */
export async function latencies(n: number, fn: (i: number) => Promise<void>, warmup = Math.min(500, Math.ceil(n / 4))): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = nowMs();
    await fn(i);
    out.push(nowMs() - t0);
  }
  return out;
}

export interface RowResult {
  label: string;
  unit: string;
  median: number;
  p99: number;
  n: number;
  baseline: string | null;
  ratio: number | null;
  target: string | null;
  met: boolean | null;
}

export function summarize(rows: Row[]): RowResult[] {
  const byLabel = new Map(rows.map((r) => [r.label, r]));
  const main = rows.map((r) => {
    const m = median(r.samples);
    const base = r.baseline ? byLabel.get(r.baseline) : undefined;
    const ratio = base ? m / median(base.samples) : null;
    let met: boolean | null = null;
    if (r.target) {
      met = true;
      if (r.target.ratioAtLeast !== undefined) met &&= ratio !== null && ratio >= r.target.ratioAtLeast;
      if (r.target.medianAtMost !== undefined) met &&= m <= r.target.medianAtMost;
      if (r.target.medianAtLeast !== undefined) met &&= m >= r.target.medianAtLeast;
    }
    return { label: r.label, unit: r.unit, median: m, p99: r.better === 'lower' ? p99(r.samples) : quantileLow(r.samples), n: r.samples.length, baseline: r.baseline ?? null, ratio, target: r.target?.note ?? null, met };
  });
  const ratios: RowResult[] = [];
  for (const r of rows) {
    for (const c of r.compare ?? []) {
      const other = byLabel.get(c.label);
      if (!other) continue;
      const ratio = median(r.samples) / median(other.samples);
      const met = c.ratioAtLeast === undefined ? null : ratio >= c.ratioAtLeast;
      ratios.push({ label: `${r.label} ÷ ${c.label}`, unit: 'ratio', median: ratio, p99: NaN, n: r.samples.length, baseline: c.label, ratio, target: c.ratioAtLeast === undefined ? null : `≥ ${c.ratioAtLeast}×`, met });
    }
  }
  return [...main, ...ratios];
}

/** For throughput, the "p99" column is the 1st percentile round (the slow tail). */
function quantileLow(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.floor(0.01 * sorted.length))]!;
}

function fmt(n: number | null): string {
  if (n === null || Number.isNaN(n)) return '';
  if (Math.abs(n) >= 1000) return n.toFixed(0);
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(3);
}

export function printTable(name: string, results: RowResult[]): string {
  const head = ['measure', 'unit', 'median', 'p99/p1', 'n', 'ratio', 'vs', 'target', 'met'];
  const rows = results.map((r) => [r.label, r.unit, fmt(r.median), fmt(r.p99), String(r.n), r.ratio === null ? '' : `${fmt(r.ratio)}×`, r.baseline ?? '', r.target ?? '', r.met === null ? '' : r.met ? 'yes' : 'NO']);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [`\n== ${name}`, line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function writeResults(dir: string, name: string, results: RowResult[], meta: Record<string, unknown>): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ name, at: new Date().toISOString(), meta, results }, null, 2) + '\n');
  return file;
}
