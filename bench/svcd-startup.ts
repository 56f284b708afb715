/**
 * svcd start-up: wall time of one `svcd` process from spawn to its JSON ready line (kernel and
 * gateway on port 0, a fresh data directory each time, the store created), and to the exit of
 * `svcd --version` and of a config error (exit 1); against bare Node start (`node -e 0`) in
 * the same run. The processes run in turn, one of each a round. `BENCH_SVCD_COMPARE=DIR`
 * measures the built svcd of another checkout too (`DIR/dist/daemon/main.js`), in the same
 * rounds, for a before/after (bench/README.md item 29).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/version.js';
import type { Benchmark, Row } from './lib/harness.js';
import { nowMs } from './lib/stats.js';
import { inRounds, startupRows, type ProcessMeasure } from './lib/rounds.js';

/** Milliseconds from spawn until the process exits, or (`ready`) until it prints a line; then it is killed. */
function timeProcess(argv: string[], cwd: string, ready: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = nowMs();
    const child = spawn(argv[0]!, argv.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SVC_TOKEN: '', SVC_LOG_LEVEL: 'warn' } });
    let seen: number | undefined;
    let err = '';
    child.stdout.on('data', () => {
      if (!ready || seen !== undefined) return;
      seen = nowMs() - t0;
      child.kill('SIGKILL');
    });
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (ready) return seen === undefined ? reject(new Error(`${argv.join(' ')}: exited ${code} before its ready line: ${err}`)) : resolve(seen);
      resolve(nowMs() - t0);
    });
  });
}

const NODE_BARE = 'node -e 0 (bare Node start)';

export const svcdStartupBenchmark: Benchmark = {
  name: 'svcd-startup',
  description: 'svcd start-up: spawn to the ready line (kernel and gateway, fresh data dir), --version, a config error; against bare `node -e 0`',
  async run(ctx): Promise<Row[]> {
    const root = packageRoot();
    const scratch = mkdtempSync(join(tmpdir(), 'svc-bench-svcd-'));
    const badConfig = join(scratch, 'bad.yaml');
    writeFileSync(badConfig, 'kernel:\n  listen: 7401\n'); // a number where a string belongs: exit 1
    let dirs = 0;
    const builds: Array<{ suffix: string; root: string }> = [{ suffix: '', root }];
    if (process.env.BENCH_SVCD_COMPARE) builds.push({ suffix: ` (${process.env.BENCH_SVCD_COMPARE})`, root: process.env.BENCH_SVCD_COMPARE });
    const measures: ProcessMeasure[] = [{ label: NODE_BARE, run: () => timeProcess([process.execPath, '-e', '0'], scratch, false) }];
    for (const b of builds) {
      const svcd = join(b.root, 'dist/daemon/main.js');
      measures.push(
        { label: `--version${b.suffix}`, baseline: NODE_BARE, run: () => timeProcess([process.execPath, svcd, '--version'], scratch, false) },
        { label: `config error (exit 1)${b.suffix}`, baseline: NODE_BARE, run: () => timeProcess([process.execPath, svcd, '--config', badConfig], scratch, false) },
        {
          label: `ready line, kernel and gateway${b.suffix}`,
          baseline: NODE_BARE,
          run: () => timeProcess([process.execPath, svcd, '--data-dir', join(scratch, `data-${dirs++}`), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], scratch, true),
        },
      );
    }
    const n = ctx.quick ? 5 : Math.max(20, ctx.rounds * 4);
    try {
      return startupRows(measures, await inRounds(measures, n, ctx), builds[1]?.suffix);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  },
};
