/**
 * Process start-up measures (cli-startup, svcd-startup): each measure is one process timed,
 * the measures run in turn round by round, so a slow minute of the machine falls on all of them.
 */
import type { BenchContext, Row } from './harness.js';

export interface ProcessMeasure {
  label: string;
  /** Starts one process; resolves to its time in ms. */
  run: () => Promise<number>;
  /** The row this one is compared with (bare Node start). */
  baseline?: string;
}

/** One unmeasured run of each first (the disk cache), then `n` rounds, each measure once a round. */
export async function inRounds(measures: ProcessMeasure[], n: number, ctx: BenchContext): Promise<Map<string, number[]>> {
  for (const m of measures) await m.run();
  const samples = new Map<string, number[]>(measures.map((m) => [m.label, []]));
  for (let i = 0; i < n; i++) {
    for (const m of measures) samples.get(m.label)!.push(await m.run());
    if ((i + 1) % 5 === 0) ctx.log(`${i + 1}/${n} rounds`);
  }
  return samples;
}

/**
 * The rows of `measures` in ms. With another build measured too (`compareSuffix`, the suffix of
 * its labels), each row of this build is also compared with the same row of the other.
 */
export function startupRows(measures: ProcessMeasure[], samples: Map<string, number[]>, compareSuffix?: string): Row[] {
  return measures.map((m) => ({
    label: m.label,
    unit: 'ms',
    better: 'lower' as const,
    samples: samples.get(m.label)!,
    baseline: m.baseline,
    compare: compareSuffix && !m.label.endsWith(compareSuffix) && m.baseline ? [{ label: m.label + compareSuffix }] : undefined,
  }));
}
