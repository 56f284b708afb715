/**
 * The worker's kernel client under a kernel restart (svc-worker(1) "rides out a kernel
 * restart"): calls made under a lease retry an unreachable kernel, or a 503 from one that is
 * draining, until the lease's expiry; without a deadline they fail at once (network_error,
 * retryable). A 410 stays a LeaseLostError.
 */
import { describe, expect, it } from 'vitest';
import { LeaseLostError, StepError } from '../../src/worker/errors.js';
import { KernelClient } from '../../src/worker/kernel-client.js';

/** A fetch that fails the first `down` requests like a refused connection, then answers `reply`. */
function flakyFetch(down: number, reply: { status: number; body: unknown }) {
  const seen: string[] = [];
  const fetchFn = (async (url: string | URL | Request) => {
    seen.push(String(url));
    if (seen.length <= down) throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    return new Response(JSON.stringify(reply.body), { status: reply.status, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  return { fetchFn, seen };
}

const usage = { tokens: 1, usd: 0 };

describe('lease calls ride out a kernel restart until the lease runs out', () => {
  it('complete retries refused connections with backoff and returns the answer', async () => {
    const { fetchFn, seen } = flakyFetch(2, { status: 200, body: { run_state: 'running', next_step: 'b' } });
    const k = new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: fetchFn });
    const t0 = Date.now();
    const r = await k.complete('lse_1', { ok: 1 }, usage, { until: () => Date.now() + 10_000 });
    expect(r).toEqual({ run_state: 'running', next_step: 'b' });
    expect(seen).toHaveLength(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250 + 500 - 20); // 250 ms, then 500 ms
  });

  it('a 503 (a draining kernel) is retried the same way; events and proposals too', async () => {
    let n = 0;
    const fetchFn = (async () => {
      n += 1;
      return n === 1 ? new Response(JSON.stringify({ error: { code: 'unavailable', message: 'draining' } }), { status: 503 }) : new Response(JSON.stringify({ seq: 7, hash: 'h' }), { status: 201 });
    }) as typeof fetch;
    const k = new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: fetchFn });
    expect(await k.postEvent('run_1', 'lse_1', 'note', {}, { worker_id: 'w' }, { until: () => Date.now() + 10_000 })).toEqual({ seq: 7, hash: 'h' });
    expect(n).toBe(2);
  });

  it('stops before the lease expires: the error is a retryable network_error', async () => {
    const { fetchFn, seen } = flakyFetch(100, { status: 200, body: {} });
    const k = new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: fetchFn });
    const until = Date.now() + 900;
    const err = await k.fail('lse_1', { code: 'x', message: 'y' }, false, usage, { until: () => until }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepError);
    expect(err).toMatchObject({ code: 'network_error', deterministic: false });
    expect(Date.now()).toBeLessThan(until + 50);
    expect(seen.length).toBeGreaterThanOrEqual(2);
  });

  it('without a deadline nothing is retried; a 410 is a lost lease whatever the deadline', async () => {
    const down = flakyFetch(1, { status: 200, body: {} });
    await expect(new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: down.fetchFn }).complete('lse_1', {}, usage)).rejects.toMatchObject({ code: 'network_error' });
    expect(down.seen).toHaveLength(1);
    const gone = flakyFetch(0, { status: 410, body: { error: { code: 'lease_expired', message: 'parked' } } });
    const k = new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: gone.fetchFn });
    await expect(k.propose('lse_1', { tool: 'a.b', args: {}, summary: '' }, { until: () => Date.now() + 10_000 })).rejects.toBeInstanceOf(LeaseLostError);
    expect(gone.seen).toHaveLength(1);
  });

  it('an abort stops the wait between retries at once', async () => {
    const { fetchFn } = flakyFetch(100, { status: 200, body: {} });
    const k = new KernelClient({ baseUrl: 'http://kernel.invalid', fetch: fetchFn });
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new LeaseLostError('lse_1', 'ran out')), 100);
    const t0 = Date.now();
    await expect(k.postEvent('run_1', 'lse_1', 'note', {}, {}, { signal: ctl.signal, until: () => Date.now() + 60_000 })).rejects.toBeInstanceOf(LeaseLostError);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
