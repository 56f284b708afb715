/**
 * CLI start-up: wall time of one `svc` process, from spawn to exit, for the commands an operator
 * types most (--version, --help, a read of svcd, here unreachable so that only the CLI's own
 * time counts) and the offline checks (bundle validate, policy lint), and the approvals inbox's
 * time to its first frame on a pseudo-terminal; against bare Node start (`node -e 0`) in the same
 * run. The commands run in turn, one process of each a round, so a slow minute of the machine
 * falls on all of them. `BENCH_CLI_COMPARE=DIR` measures the built CLI of another checkout too
 * (its `DIR/dist/cli/index.js`), in the same rounds, for a before/after.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../src/version.js';
import type { Benchmark, Row } from './lib/harness.js';
import { nowMs } from './lib/stats.js';
import { inRounds, startupRows, type ProcessMeasure } from './lib/rounds.js';

/** An address nothing answers on (port 2: fetch does not refuse it, as it does 1). */
const NO_DAEMON = 'http://127.0.0.1:2';

/** Milliseconds from spawn until the process exits (or, with `until`, until its output contains it; then it is sent `q`). */
function timeProcess(cmd: string, args: string[], cwd: string, until?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = nowMs();
    const child = spawn(cmd, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, SVC_KERNEL_URL: '', SVC_ACTOR: '', SVC_TOKEN: '' } });
    let out = '';
    let seen: number | undefined;
    child.stdout.on('data', (d: Buffer) => {
      if (!until || seen !== undefined) return;
      out += d.toString();
      if (out.includes(until)) {
        seen = nowMs() - t0;
        child.stdin.end('q');
      }
    });
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => {
      if (until) return seen === undefined ? reject(new Error(`${args.join(' ')}: exited ${code} before "${until}"`)) : resolve(seen);
      resolve(nowMs() - t0);
    });
    if (!until) child.stdin.end();
  });
}

interface Case {
  label: string;
  /** The process to run and when it counts as started: its exit, or a text on its screen. */
  argv: (cli: string) => string[];
  until?: string;
  /** Run through `script`, for a pseudo-terminal. */
  tty?: boolean;
  /** The row this one is compared with. */
  baseline: string;
}

const NODE_BARE = 'node -e 0 (bare Node start)';
const NODE_BARE_TTY = 'node -e 0 on a pty (script)';

export const cliStartupBenchmark: Benchmark = {
  name: 'cli-startup',
  description: 'svc CLI start-up, spawn to exit: --version, --help, an unreachable svcd, bundle validate, policy lint, the inbox to its first frame; against bare `node -e 0`',
  async run(ctx): Promise<Row[]> {
    const root = packageRoot();
    const fixtures = join(root, 'fixtures');
    const cases: Case[] = [
      { label: '--version', argv: (cli) => [cli, '--version'], baseline: NODE_BARE },
      { label: '--help', argv: (cli) => [cli, '--help'], baseline: NODE_BARE },
      { label: 'run list, svcd unreachable (exit 3)', argv: (cli) => [cli, 'run', 'list', '--kernel-url', NO_DAEMON], baseline: NODE_BARE },
      { label: 'bundle validate refunds.yaml', argv: (cli) => [cli, 'bundle', 'validate', join(fixtures, 'bundles/refunds.yaml')], baseline: NODE_BARE },
      { label: 'policy lint refunds-v1.policy', argv: (cli) => [cli, 'policy', 'lint', join(fixtures, 'policies/refunds-v1.policy')], baseline: NODE_BARE },
      {
        label: 'approvals inbox, first frame',
        argv: (cli) => [cli, 'approvals', '--actor', 'ana:support-lead', '--kernel-url', NO_DAEMON],
        until: 'Connecting to svcd',
        tty: true,
        baseline: NODE_BARE_TTY,
      },
    ];
    const builds: Array<{ suffix: string; root: string }> = [{ suffix: '', root }];
    if (process.env.BENCH_CLI_COMPARE) builds.push({ suffix: ` (${process.env.BENCH_CLI_COMPARE})`, root: process.env.BENCH_CLI_COMPARE });
    const n = ctx.quick ? 5 : Math.max(20, ctx.rounds * 4);
    // `script -qfec CMD /dev/null`: CMD on a pseudo-terminal, its screen on our stdout.
    const onTty = (argv: string[]): [string, string[]] => ['script', ['-qfec', argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' '), '/dev/null']];
    const measures: ProcessMeasure[] = [
      { label: NODE_BARE, run: () => timeProcess(process.execPath, ['-e', '0'], root) },
      { label: NODE_BARE_TTY, run: () => timeProcess(...onTty([process.execPath, '-e', 'process.stdout.write("ready")']), root, 'ready') },
    ];
    for (const b of builds) {
      const cli = join(b.root, 'dist/cli/index.js');
      for (const c of cases) {
        const argv = [process.execPath, ...c.argv(cli)];
        measures.push({
          label: c.label + b.suffix,
          baseline: c.baseline,
          run: () => (c.tty ? timeProcess(...onTty(argv), b.root, c.until) : timeProcess(argv[0]!, argv.slice(1), b.root, c.until)),
        });
      }
    }
    return startupRows(measures, await inRounds(measures, n, ctx), builds[1]?.suffix);
  },
};
