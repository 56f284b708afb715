/**
 * The wall clock stepped (NTP, a VM resumed, an operator setting the date) must not stretch
 * durations: waits measured in-process use the monotonic clock.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PacingGate } from '../../src/worker/pacing.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** A wall clock (Date.now) that can be stepped; returns the stepping function. */
function steppableWallClock(): (byMs: number) => void {
  const real = Date.now.bind(Date);
  let offset = 0;
  vi.spyOn(Date, 'now').mockImplementation(() => real() + offset);
  return (byMs) => {
    offset += byMs;
  };
}

describe('worker pacing (decisions §4 pacing) and a wall clock stepped back', () => {
  it('does not hold the next step for as long as the clock went back', async () => {
    const step = steppableWallClock();
    const gate = new PacingGate();
    const release = await gate.acquire('b\u0000action', undefined);
    release();
    step(-3_600_000);
    const t0 = performance.now();
    const next = await Promise.race([gate.acquire('b\u0000action', undefined), new Promise<null>((r) => setTimeout(() => r(null), 500))]);
    expect(next, 'the second step waited for its slot').not.toBeNull();
    expect(performance.now() - t0).toBeLessThan(400);
    next?.();
  });

  it('still spaces starts by min_interval_ms', async () => {
    const gate = new PacingGate();
    (await gate.acquire('k', { min_interval_ms: 150 }))();
    const t0 = performance.now();
    (await gate.acquire('k', { min_interval_ms: 150 }))();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
  });
});

describe('long polls (decisions §6 wait_seconds, max 30) and a wall clock stepped back', () => {
  it('an idle lease request still answers after wait_seconds', async () => {
    const { openInProcessKernel } = await import('../helpers/in-process-kernel.js');
    const step = steppableWallClock();
    const opened = await openInProcessKernel(
      { name: 'idle', version: '1.0.0', description: 'x', department: 'ops', tools: { 'test.echo': { writes: false } }, workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } } },
      'svc-wall-clock-',
    );
    try {
      const t0 = performance.now();
      const pending = opened.kernel.runs.leases.acquire({ worker_id: 'w', wait_seconds: 1 });
      step(-3_600_000);
      const got = await Promise.race([pending, new Promise<'held'>((r) => setTimeout(() => r('held'), 4000))]);
      expect(got, 'the poll was held past its wait_seconds').toBeNull();
      expect(performance.now() - t0).toBeLessThan(3000);
    } finally {
      vi.restoreAllMocks();
      await opened.close();
    }
  });
});

describe('log throttle fed a wall clock that stepped back', () => {
  it('a time before the window opened starts a new window rather than silencing the key', async () => {
    const { LogThrottle } = await import('../../src/log/throttle.js');
    const t = new LogThrottle(10_000);
    expect(t.pass('k', 3_600_000)).toBe(0);
    expect(t.pass('k', 3_600_001)).toBeNull();
    expect(t.pass('k', 5_000)).toBe(1); // back an hour: logged, with the one held back
  });
});

describe('GET /v1/health uptime_s (interface 4.1) and a wall clock stepped back', () => {
  it('is never negative', async () => {
    const { openInProcessKernel } = await import('../helpers/in-process-kernel.js');
    const opened = await openInProcessKernel(
      { name: 'up', version: '1.0.0', description: 'x', department: 'ops', tools: { 'test.echo': { writes: false } }, workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } } },
      'svc-wall-clock-up-',
    );
    try {
      opened.clock.set(opened.clock.now() - 3_600_000);
      expect(opened.kernel.uptimeSeconds()).toBeGreaterThanOrEqual(0);
      expect(opened.kernel.uptimeSeconds()).toBeLessThan(60);
    } finally {
      await opened.close();
    }
  });
});

describe('the worker\'s gateway client (interface 4.2, svc-worker(1) DESCRIPTION) and a wall clock stepped back', () => {
  it('the tool list (GET /v1/tools, cached cacheMs) is asked again after cacheMs, not after the step', async () => {
    const { GatewayClient } = await import('../../src/worker/gateway-client.js');
    const { FakeGateway } = await import('../worker/fakes.js');
    const fake = await new FakeGateway().start();
    try {
      const client = new GatewayClient({ baseUrl: fake.url }, 50);
      await client.tools();
      const step = steppableWallClock();
      step(-3_600_000);
      await new Promise((r) => setTimeout(r, 100));
      await client.tools();
      expect(fake.calls('GET', '/v1/tools')).toHaveLength(2);
    } finally {
      vi.restoreAllMocks();
      await fake.close();
    }
  });

  it('a call to a gateway out of reach gives up after unreachableWaitMs, not an hour later', async () => {
    const { GatewayClient } = await import('../../src/worker/gateway-client.js');
    const refused: typeof fetch = () => Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } }));
    const client = new GatewayClient({ baseUrl: 'http://127.0.0.1:59999', fetch: refused }, 30_000, 60_000, 1200);
    const step = steppableWallClock();
    setTimeout(() => step(-3_600_000), 100); // during the first wait (250 ms; tries at 0, 250, 750 ms)
    const t0 = performance.now();
    const req = { remit_token: 't', run_id: 'r', step: 's', lease_id: 'l', tool: 'x.y', args: {}, idempotency_key: 'k', scope: null };
    const cut = new AbortController();
    const outcome = await Promise.race([client.call(req, cut.signal).then(() => 'answered', (e: Error) => e.message), new Promise<'held'>((r) => setTimeout(() => r('held'), 4000))]);
    cut.abort();
    expect(outcome, 'the call kept trying for the step').toContain('cannot reach');
    expect(performance.now() - t0).toBeLessThan(3000);
  });

  it('a call answered 409 in flight gives up after inFlightWaitMs, not an hour later (decisions §9)', async () => {
    const { GatewayClient } = await import('../../src/worker/gateway-client.js');
    const inFlight: typeof fetch = async () => new Response(JSON.stringify({ ok: false, error: { code: 'idempotency_in_flight', message: 'in flight', details: {} } }), { status: 409, headers: { 'retry-after': '1' } });
    const client = new GatewayClient({ baseUrl: 'http://127.0.0.1:59999', fetch: inFlight }, 30_000, 1500);
    const step = steppableWallClock();
    setTimeout(() => step(-3_600_000), 300);
    const t0 = performance.now();
    const req = { remit_token: 't', run_id: 'r', step: 's', lease_id: 'l', tool: 'x.y', args: {}, idempotency_key: 'k', scope: null };
    const cut = new AbortController();
    const outcome = await Promise.race([client.call(req, cut.signal).then(() => 'answered', (e: { code?: string }) => e.code), new Promise<'held'>((r) => setTimeout(() => r('held'), 5000))]);
    cut.abort();
    expect(outcome, 'the call kept waiting for the step').toBe('idempotency_in_flight');
    expect(performance.now() - t0).toBeLessThan(4000);
  });
});
