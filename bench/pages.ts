/**
 * The kernel store's page size: step cycles over HTTP on svcd's own store (created with the
 * page size svcd chooses, `KERNEL_PAGE_SIZE`) against the same svcd on a store created
 * beforehand with SQLite's default of 4 KiB (the baseline), for one-step runs and for runs
 * whose input and output carry a padding string (a bigger run model, which smaller pages
 * spread over overflow pages). The two svcd are measured round by round in turn, so the
 * disk's drift over minutes falls on both.
 */
import { KERNEL_PAGE_SIZE } from '../src/kernel/kernel.js';
import { measureCycles } from './baselines/workload.js';
import type { Benchmark, BenchContext, Row } from './lib/harness.js';
import { startKernelFixture, type KernelFixture } from './lib/kernel-fixture.js';
import { svcAdapter, type CycleShape } from './kernel.js';

const SQLITE_DEFAULT_PAGE_SIZE = 4096;

/** Run shapes: the kernel benchmark's one-step run, and the same with padding of n bytes. */
function shapes(): Array<{ name: string; shape: CycleShape }> {
  const padded = (n: number): CycleShape => ({ workflow: 'padded', input: (i) => ({ i, pad: 'x'.repeat(n) }) });
  return [
    { name: 'one-step run', shape: { workflow: 'cycle', input: (i) => ({ i }) } },
    { name: 'run with 1 KiB padding', shape: padded(1024) },
    { name: 'run with 8 KiB padding', shape: padded(8192) },
  ];
}

const kib = (n: number) => `${n / 1024} KiB pages`;

export const pagesBenchmark: Benchmark = {
  name: 'pages',
  description: `kernel step cycles on svcd's store (${kib(KERNEL_PAGE_SIZE)}) vs one created with SQLite's default ${kib(SQLITE_DEFAULT_PAGE_SIZE)}`,
  async run(ctx: BenchContext): Promise<Row[]> {
    const jobs = ctx.quick ? 200 : 1000;
    const rounds = Math.max(3, ctx.rounds);
    const rows: Row[] = [];
    const ours: KernelFixture = await startKernelFixture('FULL');
    const baseline: KernelFixture = await startKernelFixture('FULL', SQLITE_DEFAULT_PAGE_SIZE);
    try {
      // Unmeasured: both processes' JIT warmed up on the path before anything counts.
      for (const k of [ours, baseline]) for (const { shape } of shapes()) await measureCycles(svcAdapter(k, () => jobs / 2, shape), 8, jobs / 2);
      for (const { name, shape } of shapes()) {
        for (const c of [1, 8]) {
          ctx.log(`${name} c=${c}`);
          const a = svcAdapter(ours, () => jobs, shape);
          const b = svcAdapter(baseline, () => jobs, shape);
          const mine: number[] = [];
          const theirs: number[] = [];
          for (let r = 0; r < rounds; r++) {
            // Alternate which goes first, so neither always follows the other's checkpoint.
            if (r % 2 === 0) {
              theirs.push(await measureCycles(b, c, jobs));
              mine.push(await measureCycles(a, c, jobs));
            } else {
              mine.push(await measureCycles(a, c, jobs));
              theirs.push(await measureCycles(b, c, jobs));
            }
          }
          const base = `${kib(SQLITE_DEFAULT_PAGE_SIZE)}, ${name}, c=${c}`;
          rows.push({ label: base, unit: 'cycles/s', samples: theirs, better: 'higher' });
          rows.push({ label: `${kib(KERNEL_PAGE_SIZE)}, ${name}, c=${c}`, unit: 'cycles/s', samples: mine, better: 'higher', baseline: base });
        }
      }
    } finally {
      await ours.close();
      await baseline.close();
    }
    return rows;
  },
};
