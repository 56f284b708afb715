// `svc worker` (the built binary): flag validation (usage errors exit 2), logs on stderr only,
// a step run against a fake kernel and gateway (I 4.1, 4.2), and SIGINT finishing cleanly.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseWorkerFlags } from '../../cli/commands/worker.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { ROOT } from '../helpers/daemon.js';
import { FakeGateway, FakeKernel, makeLease, until } from './fakes.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

describe('svc worker flags', () => {
  it('parses defaults and lists', () => {
    expect(parseWorkerFlags({})).toEqual({ kinds: ['model', 'tool', 'action', 'compensation'], provider: 'mock', concurrency: 1, workerId: undefined, ttlSeconds: 60, waitSeconds: 20, graceMs: 30_000, maxTurns: 16 });
    expect(parseWorkerFlags({ kinds: 'tool, action,tool', provider: 'openai', concurrency: '4', workerId: 'w-1', graceSeconds: '0' })).toMatchObject({ kinds: ['tool', 'action'], provider: 'openai', concurrency: 4, workerId: 'w-1', graceMs: 0 });
  });

  it.each([
    [['--kinds', 'tool,bogus'], 'unknown kind "bogus"'],
    [['--kinds', 'model,,tool'], '--kinds has an empty entry in "model,,tool"'],
    [['--kinds', ' '], '--kinds needs at least one kind'],
    [['--provider', 'claude'], '--provider must be one of mock, openai'],
    [['--concurrency', '0'], '--concurrency must be between 1 and 256'],
    [['--concurrency', 'two'], '--concurrency must be a whole number'],
    [['--wait-seconds', '31'], '--wait-seconds must be between 0 and 30'],
    [['--worker-id', 'has space'], '--worker-id may use'],
  ])('svc worker %j exits 2 with a one-line reason', async (args, reason) => {
    const r = await runSvc(['worker', ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(reason);
    expect(r.stdout).toBe('');
  });

  // A set but unusable variable is refused before the worker starts, never read as a default
  // (a price of "xyz" read as 0 would let every call spend nothing against the USD budget).
  it.each([
    [{ SVC_OPENAI_USD_PER_1M_INPUT: 'xyz' }, 'SVC_OPENAI_USD_PER_1M_INPUT "xyz" must be a non-negative number of dollars'],
    [{ SVC_OPENAI_USD_PER_1M_OUTPUT: '-1' }, 'SVC_OPENAI_USD_PER_1M_OUTPUT "-1" must be a non-negative number of dollars'],
    [{ SVC_OPENAI_USD_PER_1M_OUTPUT: '0x10' }, 'SVC_OPENAI_USD_PER_1M_OUTPUT "0x10" must be a non-negative number of dollars'], // Number() would read 16
    [{ SVC_OPENAI_TIMEOUT_MS: 'abc' }, 'SVC_OPENAI_TIMEOUT_MS "abc" must be a whole number of milliseconds from 1 to 3600000'],
    [{ SVC_OPENAI_BASE_URL: 'notaurl' }, 'SVC_OPENAI_BASE_URL must be an http:// or https:// URL'],
    // A URL that may carry a key is not echoed.
    [{ SVC_OPENAI_BASE_URL: 'ftp://u:sk-secret-42@host/v1', SVC_OPENAI_API_KEY: 'sk-secret-42' }, 'SVC_OPENAI_BASE_URL must be an http:// or https:// URL'],
    [{ SVC_LOG_LEVEL: 'bogus' }, 'SVC_LOG_LEVEL "bogus" must be one of debug, info, warn, error'],
  ])('svc worker --provider openai with %j exits 2 naming the variable', async (env, reason) => {
    const r = await runSvc(['--kernel-url', NO_DAEMON, 'worker', '--provider', 'openai'], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`svc: ${reason}${reason.endsWith('URL') ? ', such as https://api.openai.com/v1' : ''}`);
  });
});

/** A fake kernel and gateway, closed after the test. */
async function fakePeers(): Promise<{ kernel: FakeKernel; gateway: FakeGateway }> {
  const kernel = await new FakeKernel().start();
  const gateway = await new FakeGateway().start();
  cleanups.push(async () => {
    await kernel.close();
    await gateway.close();
  });
  return { kernel, gateway };
}

describe('svc worker process', () => {
  it('runs a leased step, logs JSON lines to stderr, and exits 0 on SIGINT', async () => {
    const { kernel, gateway } = await fakePeers();
    gateway.define('billing.lookup_invoice', () => ({ rows: [{ id: 'INV-1' }] }));
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), 'worker', '--kinds', 'tool', '--worker-id', 'cli-w', '--wait-seconds', '1', '--kernel-url', kernel.url, '--gateway-url', gateway.url], {
      env: { ...process.env, SVC_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(lease);
    await until(() => kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`).length === 1, 10_000, 'complete');
    expect(kernel.calls('POST', '/v1/leases')[0]!.body).toMatchObject({ worker_id: 'cli-w', kinds: ['tool'] });
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(stdout).toBe('');
    const lines = stderr.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['worker started', 'step started', 'step completed', 'worker stopped']));
    expect(lines.find((l) => l.msg === 'step completed')).toMatchObject({ svc: 'worker', step: 'lookup', run_state: 'completed' });
    // Idle when signalled: it says it stops, not that it is finishing steps it does not have.
    expect(lines.find((l) => l.signal === 'SIGINT')).toMatchObject({ msg: 'stopping now', in_flight: 0 });
  });

  it('calls itself svc worker in ps, global options and all, and stops cleanly on SIGHUP mid-step: the step finishes and is reported (svc-worker(1) SIGNALS)', async () => {
    const { kernel, gateway } = await fakePeers();
    gateway.define('billing.lookup_invoice', async () => {
      await new Promise((r) => setTimeout(r, 600));
      return { rows: [{ id: 'INV-2' }] };
    });
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), '--kernel-url', kernel.url, 'worker', '--kinds', 'tool', '--worker-id', 'hup-w', '--wait-seconds', '1', '--gateway-url', gateway.url], {
      env: { ...process.env, SVC_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<[number | null, string | null]>((r) => child.on('exit', (code, signal) => r([code, signal])));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    await until(() => kernel.calls('POST', '/v1/leases').length > 0, 10_000, 'a poll');
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8')).toMatch(/^svc worker --kernel-url http:\/\/127\.0\.0\.1:\d+ --kinds tool --worker-id hup-w/);
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(lease);
    await until(() => gateway.toolCalls('billing.lookup_invoice').length === 1, 10_000, 'the tool call');
    child.kill('SIGHUP');
    expect(await exited).toEqual([0, null]);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)).toHaveLength(1);
    expect(stderr).toContain('"signal":"SIGHUP"');
  });

  it('keeps working when its log reader goes away (a closed stderr pipe), and still serves steps', async () => {
    const { kernel, gateway } = await fakePeers();
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), 'worker', '--kinds', 'tool', '--wait-seconds', '1', '--kernel-url', kernel.url, '--gateway-url', gateway.url], {
      env: { ...process.env, SVC_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    await new Promise<void>((r) => child.stderr.once('data', () => r())); // it logged "worker started"
    child.stderr.destroy(); // `svc worker 2>&1 | head -1`: the reader is gone
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(lease); // its lines now hit the closed pipe (EPIPE)
    await until(() => kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`).length === 1, 10_000, 'complete');
    expect(child.exitCode).toBeNull();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
