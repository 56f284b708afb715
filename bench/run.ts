#!/usr/bin/env node
/**
 * `npm run bench` runs every benchmark; `npm run bench -- NAME [NAME…]` runs some.
 * BENCH_ROUNDS sets the rounds per measure (default 5); BENCH_QUICK=1 shrinks workloads.
 * Never part of CI: numbers are measured, not asserted.
 */
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { packageRoot, VERSION } from '../src/version.js';
import { printTable, summarize, writeResults, type Benchmark, type BenchContext } from './lib/harness.js';
import { BENCHMARKS } from './registry.js';

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const unknown = wanted.filter((w) => !BENCHMARKS.some((b) => b.name === w));
  if (unknown.length) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(', ')}\navailable: ${BENCHMARKS.map((b) => b.name).join(', ')}\n`);
    process.exit(2);
  }
  const chosen: Benchmark[] = wanted.length ? BENCHMARKS.filter((b) => wanted.includes(b.name)) : BENCHMARKS;
  const ctx: BenchContext = {
    rounds: Number(process.env.BENCH_ROUNDS ?? 5),
    quick: process.env.BENCH_QUICK === '1',
    log: (m) => process.stderr.write(`  ${m}\n`),
  };
  const meta = { version: VERSION, node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, mem_gib: Math.round(totalmem() / 2 ** 30), rounds: ctx.rounds, quick: ctx.quick };
  process.stdout.write(`svc ${VERSION} benchmarks on ${meta.cpus}× ${meta.cpu}, node ${meta.node}\n`);
  let failed = false;
  for (const b of chosen) {
    process.stderr.write(`\n${b.name}: ${b.description}\n`);
    try {
      const results = summarize(await b.run(ctx));
      process.stdout.write(printTable(b.name, results) + '\n');
      const file = writeResults(join(packageRoot(), 'bench', 'results'), b.name, results, meta);
      process.stdout.write(`results: ${file}\n`);
    } catch (err) {
      failed = true;
      process.stderr.write(`${b.name} failed: ${(err as Error).stack ?? String(err)}\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
