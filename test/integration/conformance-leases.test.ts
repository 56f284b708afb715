/**
 * Conformance of the lease endpoints to interface 2.6 / 4.1 and decisions §6, found by a
 * black-box review: the long-poll race (a worker killed while waiting must not be handed a
 * lease it never sees), lease defaults and bounds, and 410 after release.
 */
import { describe, expect, it } from 'vitest';
import type { LeaseObject, LeaseRequest } from '../../src/kernel/leases.js';
import { allEvents, getRun, lease, pushBundle, sleep, startRun, startRunDaemon } from './run-fixtures.js';

describe('D §6 wait_seconds: a long poll whose client died hands out no lease', () => {
  it('work that arrives while the dead client is not yet noticed is released at once, same attempt', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const leases = d.kernel!.runs.leases;
    // Widen the window between "work found" and "response sent" so the client's close is
    // certainly seen inside it, as happens when the close races the notifier.
    const acquire = leases.acquire.bind(leases);
    leases.acquire = async (req: LeaseRequest, signal?: AbortSignal): Promise<LeaseObject | null> => {
      const got = await acquire(req, signal);
      if (got) await sleep(400);
      return got;
    };
    const gone = new AbortController();
    const req = fetch(`${d.kernelUrl}/v1/leases`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ worker_id: 'doomed', kinds: ['model'], wait_seconds: 20, ttl_seconds: 600 }),
      signal: gone.signal,
    }).catch(() => null);
    await sleep(200);
    const { run_id } = await startRun(d, bundleId); // wakes the long poll: the lease is taken
    await sleep(100);
    gone.abort(); // the worker dies before the response reaches it
    await req;
    await sleep(600);
    leases.acquire = acquire;

    const run = await getRun(d, run_id);
    expect(run.steps.triage).toMatchObject({ state: 'pending', attempt: 1 });
    const events = await allEvents(d, run_id);
    const released = events.find((e) => e.kind === 'lease.expired');
    expect(released?.payload).toMatchObject({ step: 'triage', attempt: 1, next_attempt: 1, reason: 'undelivered' });
    // The next worker gets the step at once, with the attempt not spent (ttl was 600 s).
    const next = await lease(d, ['model']);
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ run_id, step: 'triage', attempt: 1 });
    // The undelivered lease is gone for good (D §6: 410 on a released lease).
    const leased = events.find((e) => e.kind === 'step.leased');
    const hb = await d.kernel_(`/leases/${leased.payload.lease_id}/heartbeat`, { method: 'POST' });
    expect(hb.status).toBe(410);
    expect(hb.body.error.code).toBe('lease_expired');
    // Not an expiry of the ttl: svc_leases_expired_total stays 0.
    const metrics = await d.kernel_('/metrics');
    expect(metrics.body).toMatch(/^svc_leases_expired_total 0$/m);
    // Replay folds the release like the live path (D §7).
    const replay = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
  });
});

describe('D §6 lease defaults (I 2.6 response members)', () => {
  it('ttl_seconds defaults to 60, heartbeat_seconds is ttl/3 floored and at least 1, expires_at is ISO with ms', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    await startRun(d, bundleId);
    await startRun(d, bundleId);
    await startRun(d, bundleId);
    const t0 = Date.now();
    const a = await lease(d, ['model']);
    expect(a.status).toBe(200);
    for (const k of ['lease_id', 'run_id', 'step', 'attempt', 'expires_at', 'heartbeat_seconds', 'step_def', 'context']) expect(a.body).toHaveProperty(k);
    expect(a.body.heartbeat_seconds).toBe(20);
    expect(a.body.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Math.abs(Date.parse(a.body.expires_at) - (t0 + 60_000))).toBeLessThan(2000);
    expect((await lease(d, ['model'], { ttl_seconds: 2 })).body.heartbeat_seconds).toBe(1);
    expect((await lease(d, ['model'], { ttl_seconds: 10 })).body.heartbeat_seconds).toBe(3);
  });
});

describe('D §10: usage numbers never yield a 500 (I 4.1 complete/fail usage)', () => {
  it('a usd of 1e308 is 400 request_invalid with details.path, on complete and on fail', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    await startRun(d, bundleId);
    const l = await lease(d, ['model']);
    for (const op of ['complete', 'fail']) {
      const body = op === 'complete' ? { output: { amount: 1 }, usage: { tokens: 1, usd: 1e308 } } : { error: { code: 'x', message: 'y' }, usage: { tokens: 1, usd: 1e308 } };
      const res = await d.kernel_(`/leases/${l.body.lease_id}/${op}`, { body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/usage/usd' } });
    }
    const ok = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 1 }, usage: { tokens: 1, usd: 0.5 } } });
    expect(ok.status).toBe(200);
  });
});

describe('D §6: every call on an ended lease is 410, whatever its body', () => {
  it('heartbeat, complete, fail and actions on a completed lease answer 410 lease_expired even with a malformed body or one that is not JSON; an unknown lease is 404', async () => {
    await using d = await startRunDaemon();
    await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    expect(l.status).toBe(200);
    const id = l.body.lease_id as string;
    expect((await d.kernel_(`/leases/${id}/complete`, { body: { output: { amount: 1 }, usage: { tokens: 1, usd: 0 } } })).status).toBe(200);
    for (const [path, body] of [
      ['complete', { output: 'x', usage: 'lots' }],
      ['fail', {}],
      ['actions', { action: 'refund' }],
      ['heartbeat', '{"cut off'],
      ['complete', '{"output": '],
      ['fail', 'not json at all'],
      ['actions', '\u00ff'],
    ] as const) {
      const r = await d.kernel_(`/leases/${id}/${path}`, { body });
      expect(r.status, path).toBe(410);
      expect(r.body.error.code, path).toBe('lease_expired');
    }
    const unknown = await d.kernel_('/leases/lse_01JAAAAAAAAAAAAAAAAAAAAAAA/fail', { body: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.details).toEqual({ resource: 'lease', id: 'lse_01JAAAAAAAAAAAAAAAAAAAAAAA' });
  });
});
