/**
 * Two kernel edges that need the clock or an interleaving in hand, so the kernel runs
 * in-process on a real SQLite file with a manual clock and no periodic sweeper:
 * - a compensation failing `connector_quarantined` spends no attempt (decisions §6);
 * - the budget check of a completion reads derived remits' reservations inside the run's
 *   transaction, so a derive racing it is either seen or refused (decisions §8, 8.3).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import type { Kernel } from '../../src/kernel/kernel.js';
import { COMPENSATION_QUARANTINE_WAIT_MS } from '../../src/kernel/leases.js';
import { openInProcessKernel, type InProcessKernel } from '../helpers/in-process-kernel.js';

const REQUESTER = { id: 'ana', role: 'agent', manager: 'lead' };
const RETRY = { max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 4000 };
const BUNDLE = {
  name: 'edges',
  version: '1.0.0',
  description: 'a write with a compensation; a single read',
  department: 'ops',
  tools: { 'test.write': { writes: true }, 'test.echo': { writes: false } },
  workflows: {
    compensated: {
      input_schema: { type: 'object' },
      steps: [
        { id: 'w', kind: 'tool', tool: 'test.write', args: {}, compensate: { tool: 'test.write', args: { undo: true } }, retry: RETRY },
        { id: 'b', kind: 'tool', tool: 'test.echo', args: {} },
      ],
    },
    one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] },
  },
};

let opened: InProcessKernel;
let kernel: Kernel;
let clock: ManualClock;
let bundleId: string;

beforeAll(async () => {
  opened = await openInProcessKernel(BUNDLE, 'svc-kernel-edges-');
  ({ kernel, clock, bundleId } = opened);
});
afterAll(async () => {
  await opened.close();
});

async function newRun(workflow: string): Promise<{ runId: string; remitId: string }> {
  const remit = await kernel.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
  const runId = (await kernel.runs.create({ bundle_id: bundleId, workflow, input: {}, remit_id: remit.remit_id, requested_by: REQUESTER })).run_id;
  return { runId, remitId: remit.remit_id };
}

const acquire = (kind: 'tool' | 'compensation') => kernel.runs.leases.acquire({ worker_id: 'w', kinds: [kind], ttl_seconds: 60, wait_seconds: 0 });

describe('a compensation failing connector_quarantined (D §6)', () => {
  it('spends no attempt: retried at the same attempt, 5 minutes apart or more, until the connector is back', async () => {
    const { runId } = await newRun('compensated');
    const first = await acquire('tool');
    await kernel.runs.leases.complete(first!.lease_id, { output: { id: 'x' }, usage: { tokens: 0, usd: 0 } });
    expect((await kernel.runs.abandon(runId, 'stop', { id: 'op', role: 'ops' })).compensations_scheduled).toBe(1);

    // More quarantined answers than max_attempts: none gives the compensation up.
    for (let i = 0; i < RETRY.max_attempts + 2; i++) {
      const comp = await acquire('compensation');
      expect(comp, `compensation lease ${i + 1}`).toMatchObject({ run_id: runId, step: 'w', kind: 'compensation', attempt: 1 });
      const failed = await kernel.runs.leases.fail(comp!.lease_id, { error: { code: 'connector_quarantined', message: 'connector test is quarantined' }, deterministic: false });
      expect(failed).toMatchObject({ outcome: 'retry_scheduled', run_state: 'abandoning' });
      // The longest retry delay, but never under COMPENSATION_QUARANTINE_WAIT_MS (here: 4 s < 5 min).
      expect(failed.delay_ms).toBeGreaterThanOrEqual(COMPENSATION_QUARANTINE_WAIT_MS); // jitter above the floor only
      expect(failed.delay_ms).toBeLessThanOrEqual(COMPENSATION_QUARANTINE_WAIT_MS * 1.2);
      expect(await acquire('compensation')).toBeNull(); // waits out the delay
      clock.advance(failed.delay_ms!);
    }
    // The connector is released: the compensation runs, the run is abandoned with it done.
    const comp = await acquire('compensation');
    expect(comp).toMatchObject({ run_id: runId, attempt: 1 });
    await kernel.runs.leases.complete(comp!.lease_id, { output: { undone: true }, usage: { tokens: 0, usd: 0 } });
    const run = await kernel.runs.get(runId);
    expect({ state: run.state, error: run.error }).toEqual({ state: 'abandoned', error: null });
    expect(await kernel.runs.replay(runId)).toMatchObject({ chain_valid: true, state_matches: true });
  });

  it('any other failure of a compensation still spends its attempts (the control)', async () => {
    const { runId } = await newRun('compensated');
    const first = await acquire('tool');
    await kernel.runs.leases.complete(first!.lease_id, { output: { id: 'x' }, usage: { tokens: 0, usd: 0 } });
    await kernel.runs.abandon(runId, 'stop', { id: 'op', role: 'ops' });
    const attempts: number[] = [];
    for (let i = 0; i < RETRY.max_attempts; i++) {
      const comp = await acquire('compensation');
      expect(comp?.run_id).toBe(runId);
      attempts.push(comp!.attempt);
      const failed = await kernel.runs.leases.fail(comp!.lease_id, { error: { code: 'upstream_error', message: '503' }, deterministic: false });
      clock.advance(failed.delay_ms ?? 0);
    }
    expect(attempts).toEqual([1, 2, 3]);
    expect(await kernel.runs.get(runId)).toMatchObject({ state: 'abandoned', error: { code: 'compensation_failed' } });
  });
});

describe("a derive racing a completion's budget check (D §8, 8.3)", () => {
  it('a derive asked while the completion runs is seen by its check or refused: usage and reservations never pass the spend', async () => {
    const { runId, remitId } = await newRun('one');
    const lease = await acquire('tool');
    // The derive is asked as the completion reads the reservations, and commits next (until
    // 2026-11-29 that read was outside the run's transaction, so the check missed the derive).
    let derive: Promise<unknown> | undefined;
    const spy = vi.spyOn(kernel.runs, 'reservedOf');
    spy.mockImplementationOnce(async (...args) => {
      spy.mockRestore();
      const read = await kernel.runs.reservedOf(...args);
      derive = kernel.remits.derive(remitId, { spend: { tokens: 1000, usd: 0 } }).then(
        () => 'derived',
        (err: { code?: string }) => err.code,
      );
      return read;
    });
    const done = await kernel.runs.leases.complete(lease!.lease_id, { output: {}, usage: { tokens: 600, usd: 0 } });
    const derived = await derive;
    const run = await kernel.runs.get(runId);
    const reserved = await kernel.remits.reserved(remitId);
    // Either the run ends within its spend and the derive is refused, or the derive landed
    // first and the completion failed the run for its budget.
    if (done.run_state === 'completed') {
      expect(derived).not.toBe('derived');
      expect(run.usage.tokens + reserved.tokens).toBeLessThanOrEqual(run.budget.tokens);
    } else {
      expect({ derived, state: run.state, error: run.error?.code }).toEqual({ derived: 'derived', state: 'failed', error: 'budget_exhausted' });
    }
  });
});
