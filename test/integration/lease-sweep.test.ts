/**
 * Expired leases and acquire (decisions §6: "An expired lease makes the step ready again with
 * attempt + 1"): a lease request sweeps expired leases first, so the step is handed out again
 * at once, but no more often than every ACQUIRE_SWEEP_MS of the kernel's clock (bench/README.md
 * item 22). Runs the kernel in-process on a real SQLite file with a manual clock and without the
 * periodic sweeper (sweepIntervalMs 0), so every sweep counted here is one acquire made.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Kernel } from '../../src/kernel/kernel.js';
import { ACQUIRE_SWEEP_MS } from '../../src/kernel/leases.js';
import { silentLogger } from '../../src/log/logger.js';
import { tempDir } from '../helpers/daemon.js';
import { openInProcessKernel, type InProcessKernel } from '../helpers/in-process-kernel.js';

const REQUESTER = { id: 'ana', role: 'agent', manager: 'lead' };
const BUNDLE = {
  name: 'sweep',
  version: '1.0.0',
  description: 'one tool step',
  department: 'ops',
  tools: { 'test.echo': { writes: false } },
  workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } },
};

let opened: InProcessKernel;
let kernel: Kernel;
let clock: ManualClock;
let bundleId: string;

beforeAll(async () => {
  opened = await openInProcessKernel(BUNDLE, 'svc-lease-sweep-');
  ({ kernel, clock, bundleId } = opened);
});
afterAll(async () => {
  await opened.close();
});

async function newRun(): Promise<string> {
  const remit = await kernel.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
  return (await kernel.runs.create({ bundle_id: bundleId, workflow: 'one', input: {}, remit_id: remit.remit_id, requested_by: REQUESTER })).run_id;
}

const acquire = (ttl = 1) => kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['tool'], ttl_seconds: ttl, wait_seconds: 0 });

describe('acquire and expired leases (D §6)', () => {
  it('hands an expired lease\'s step out again at once, with attempt + 1', async () => {
    const runId = await newRun();
    const first = await acquire(1);
    expect(first).toMatchObject({ run_id: runId, step: 'a', attempt: 1 });
    expect(await acquire()).toBeNull(); // still leased
    clock.advance(1_000); // expires_at is reached
    const again = await acquire();
    expect(again).toMatchObject({ run_id: runId, step: 'a', attempt: 2 });
    const kinds = (await kernel.runs.events(runId)).events.map((e) => e.kind);
    expect(kinds).toEqual(['run.created', 'step.leased', 'lease.expired', 'step.leased']);
    await kernel.runs.leases.complete(again!.lease_id, { output: {}, usage: { tokens: 0, usd: 0 } });
  });

  it('sweeps at most every ACQUIRE_SWEEP_MS of the clock, however many requests come', async () => {
    const sweep = vi.spyOn(kernel.runs.leases, 'sweep');
    clock.advance(ACQUIRE_SWEEP_MS);
    for (let i = 0; i < 20; i++) expect(await acquire()).toBeNull();
    expect(sweep).toHaveBeenCalledTimes(1); // the first request's
    clock.advance(ACQUIRE_SWEEP_MS - 1);
    await acquire();
    expect(sweep).toHaveBeenCalledTimes(1); // not yet due
    clock.advance(1);
    await acquire();
    expect(sweep).toHaveBeenCalledTimes(2);
    sweep.mockRestore();
  });

  it('a clock set back does not stop the sweeps', async () => {
    const t = clock.now();
    clock.set(t + 50_000);
    expect(await acquire()).toBeNull(); // a sweep at t + 50 s
    clock.set(t); // set back
    const runId = await newRun();
    expect(await acquire(1)).toMatchObject({ run_id: runId, attempt: 1 });
    clock.set(t + 1_000); // expired, and still before the last sweep's time
    expect(await acquire()).toMatchObject({ run_id: runId, attempt: 2 });
  });

  it('a lease that cannot be expired is logged and skipped: the leases after it still expire', async () => {
    const first = await newRun();
    const second = await newRun();
    const a = await acquire(1);
    const b = await acquire(1);
    expect([a?.run_id, b?.run_id].sort()).toEqual([first, second].sort());
    clock.advance(1_000);
    const leases = kernel.runs.leases;
    const real = leases.expire.bind(leases);
    const expire = vi.spyOn(leases, 'expire').mockImplementation(async (lease) => {
      if (lease.run_id === first) throw new Error('a damaged run');
      return real(lease);
    });
    const expired = async (runId: string) => (await kernel.runs.events(runId)).events.some((e) => e.kind === 'lease.expired');
    try {
      await leases.sweep();
      expect([await expired(first), await expired(second)]).toEqual([false, true]);
      await leases.sweep(); // not tried again at once (nor logged again)
      expect(expire.mock.calls.filter(([l]) => l.run_id === first)).toHaveLength(1);
    } finally {
      expire.mockRestore();
    }
    await leases.sweep();
    expect(await expired(first)).toBe(false); // its minute has not passed
    clock.advance(60_000);
    await leases.sweep();
    expect(await expired(first)).toBe(true); // the one skipped, a minute later
  });

  it('sweepIntervalMs sets the background sweeper: 0 runs none, 20 runs one every 20 ms', async () => {
    const idle = vi.spyOn(kernel.runs.leases, 'sweep');
    await new Promise((r) => setTimeout(r, 650)); // past the default interval (500 ms)
    expect(idle).not.toHaveBeenCalled();
    idle.mockRestore();

    const dir = tempDir('svc-lease-sweep-20ms-');
    const other = await Kernel.open({ dataDir: join(dir, 'k'), clock: new ManualClock(), logger: silentLogger, sweepIntervalMs: 20 });
    try {
      const ticking = vi.spyOn(other.runs.leases, 'sweep');
      await new Promise((r) => setTimeout(r, 120));
      expect(ticking.mock.calls.length).toBeGreaterThanOrEqual(2);
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a wall clock stepped back and live leases (D §6 ttl_seconds)', () => {
  it('a lease set before the step ends a ttl after the sweep that finds it, not a ttl plus the step', async () => {
    const own = await openInProcessKernel(BUNDLE, 'svc-lease-step-back-');
    try {
      const k = own.kernel;
      const remit = await k.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 86_400, policy_set: [], requested_by: REQUESTER });
      const { run_id: runId } = await k.runs.create({ bundle_id: own.bundleId, workflow: 'one', input: {}, remit_id: remit.remit_id, requested_by: REQUESTER });
      const take = () => k.runs.leases.acquire({ worker_id: 'w', kinds: ['tool'], ttl_seconds: 60, wait_seconds: 0 });
      expect(await take()).toMatchObject({ run_id: runId, attempt: 1 });
      own.clock.set(own.clock.now() - 3_600_000); // the step back, an hour
      expect(await take()).toBeNull(); // still leased: its holder keeps its ttl
      own.clock.advance(60_000);
      expect(await take()).toMatchObject({ run_id: runId, attempt: 2 });
    } finally {
      await own.close();
    }
  });
});
