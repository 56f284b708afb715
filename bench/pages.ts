/**
 * The kernel store's page size: step cycles over HTTP on stores created with 1 KiB and 2 KiB
 * pages against one with 4 KiB (SQLite's default, the baseline), for one-step runs and for
 * runs whose input and output carry a padding string (a bigger run model, which smaller pages
 * spread over overflow pages). The svcd are measured round by round in turn, so the disk's
 * drift over minutes falls on all of them. svcd's own choice is `KERNEL_PAGE_SIZE`.
 */
import { KERNEL_PAGE_SIZE } from '../src/kernel/kernel.js';
import { measureCycles } from './baselines/workload.js';
import type { Benchmark, BenchContext, Row } from './lib/harness.js';
import { startKernelFixture, type KernelFixture } from './lib/kernel-fixture.js';
import { svcAdapter, type CycleShape } from './kernel.js';

const BASELINE_PAGE_SIZE = 4096;
const CANDIDATES = [2048, 1024];

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
  description: `kernel step cycles on stores of ${CANDIDATES.map(kib).join(' and ')} vs ${kib(BASELINE_PAGE_SIZE)} (svcd creates ${kib(KERNEL_PAGE_SIZE)})`,
  async run(ctx: BenchContext): Promise<Row[]> {
    const jobs = ctx.quick ? 200 : 1000;
    const rounds = Math.max(3, ctx.rounds);
    const rows: Row[] = [];
    const sizes = [BASELINE_PAGE_SIZE, ...CANDIDATES];
    const fixtures: KernelFixture[] = [];
    try {
      for (const size of sizes) fixtures.push(await startKernelFixture('FULL', size));
      // Unmeasured: every process's JIT warmed up on the path before anything counts.
      for (const k of fixtures) for (const { shape } of shapes()) await measureCycles(svcAdapter(k, () => jobs / 2, shape), 8, jobs / 2);
      for (const { name, shape } of shapes()) {
        for (const c of [1, 8]) {
          ctx.log(`${name} c=${c}`);
          const adapters = fixtures.map((k) => svcAdapter(k, () => jobs, shape));
          const samples: number[][] = sizes.map(() => []);
          for (let r = 0; r < rounds; r++) {
            // Rotate which goes first, so none always follows another's checkpoint.
            for (let j = 0; j < sizes.length; j++) {
              const i = (j + r) % sizes.length;
              samples[i]!.push(await measureCycles(adapters[i]!, c, jobs));
            }
          }
          const base = `${kib(BASELINE_PAGE_SIZE)}, ${name}, c=${c}`;
          rows.push({ label: base, unit: 'cycles/s', samples: samples[0]!, better: 'higher' });
          sizes.slice(1).forEach((size, j) => rows.push({ label: `${kib(size)}, ${name}, c=${c}`, unit: 'cycles/s', samples: samples[j + 1]!, better: 'higher', baseline: base }));
        }
      }
    } finally {
      for (const k of fixtures) await k.close();
    }
    return rows;
  },
};
