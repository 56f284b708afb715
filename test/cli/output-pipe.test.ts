/**
 * Output through a pipe read slowly (svc(1) DESCRIPTION and EXIT STATUS; decisions §11): every
 * byte `svc` writes to stdout and stderr reaches the reader before it exits, with the command's
 * exit status, and a reader that goes away (`svc … | head -1`) ends it quietly. Writes to a
 * pipe are asynchronous in Node: an exit that does not wait for them cuts the output at the
 * pipe's 64 KiB. Run `npx tsc -p tsconfig.json` first.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, startTestDaemon, tempDir } from '../helpers/daemon.js';

interface SlowResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `svc` with stdout and stderr as pipes nobody reads for `pauseMs`, so the
 * child's writes queue up behind full pipes, then reads them to the end ('close', not 'exit').
 */
function runSvcSlowReader(args: string[], pauseMs = 800): Promise<SlowResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), ...args], {
      env: { ...process.env, SVC_KERNEL_URL: '', SVC_ACTOR: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    // Listeners first, then paused: Node resumes a child's pipes when it exits, and a pipe
    // with no listener would then drop what it held.
    child.stdout.on('data', (d: Buffer) => out.push(d)).pause();
    child.stderr.on('data', (d: Buffer) => err.push(d)).pause();
    setTimeout(() => {
      child.stdout.resume();
      child.stderr.resume();
    }, pauseMs);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

/** A policy of `rules` rules, each after a comment line of about 250 characters. */
function bigPolicy(rules: number): string {
  let s = '';
  for (let i = 0; i < rules; i++) s += `# rule ${i}: ${'wide comment '.repeat(19)}\nallow rule_${i}\n  when action.tool == "billing.refund_${i}"\n`;
  return s;
}

describe('svc(1) DESCRIPTION, EXIT STATUS; D §11: output through a slow pipe is complete', () => {
  it('policy show of a 200 KB policy: all of stdout arrives, exit 0', async () => {
    await using d = await startTestDaemon();
    const file = join(tempDir(), 'big.policy');
    writeFileSync(file, bigPolicy(750));
    const source = readFileSync(file, 'utf8');
    expect(source.length).toBeGreaterThan(180_000);
    const push = await runSvcSlowReader(['--kernel-url', d.kernelUrl!, 'policy', 'push', file, '--name', 'big', '--version', '1'], 0);
    expect(push.code, push.stderr).toBe(0);

    const show = await runSvcSlowReader(['--kernel-url', d.kernelUrl!, 'policy', 'show', 'big']);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/^# big@1 \(pol_/);
    expect(show.stdout.length).toBe(show.stdout.indexOf('\n') + 1 + source.length);
    expect(show.stdout.endsWith(source)).toBe(true);

    const json = await runSvcSlowReader(['--kernel-url', d.kernelUrl!, '--json', 'policy', 'show', 'big']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: 'big', version: '1', source });
  });

  it('an error path: lint with 3000 problems prints all of them on stdout, its summary on stderr, exit 1', async () => {
    const file = join(tempDir(), 'bad.policy');
    writeFileSync(file, Array.from({ length: 3000 }, (_, i) => `permit x${i} when true`).join('\n') + '\n');
    const r = await runSvcSlowReader(['policy', 'lint', file]);
    expect(r.code).toBe(1);
    const lines = r.stdout.split('\n');
    expect(r.stdout.length).toBeGreaterThan(200_000);
    expect(lines).toHaveLength(3001);
    expect(lines[2999]).toBe(`${file}:3000:1: unknown effect "permit"; a rule starts with allow, deny or require_approval`);
    expect(lines[3000]).toBe('');
    expect(r.stderr).toMatch(/^svc: 3000 problems in .*bad\.policy\n$/);
  });

  it('an error path on stderr: svcd refuses a push, all 3000 problems arrive on stderr, exit 1', async () => {
    await using d = await startTestDaemon();
    const file = join(tempDir(), 'bad.policy');
    writeFileSync(file, Array.from({ length: 3000 }, (_, i) => `permit x${i} when true`).join('\n') + '\n');
    const r = await runSvcSlowReader(['--kernel-url', d.kernelUrl!, 'policy', 'push', file, '--name', 'bad', '--version', '1']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^svc: policy_invalid: svcd refused /);
    expect(lines).toHaveLength(3001);
    expect(lines[3000]).toBe(`${file}:3000:1: unknown effect "permit"; a rule starts with allow, deny or require_approval`);
  });

  it('a reader that goes away after the first chunk (`| head -1`) ends svc quietly with 0, without hanging', async () => {
    await using d = await startTestDaemon();
    const file = join(tempDir(), 'big.policy');
    writeFileSync(file, bigPolicy(750));
    expect((await runSvcSlowReader(['--kernel-url', d.kernelUrl!, 'policy', 'push', file, '--name', 'big', '--version', '1'], 0)).code).toBe(0);
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), '--kernel-url', d.kernelUrl!, 'policy', 'show', 'big'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    expect(stderr).toBe('');
  });
});
