// A kernel that takes the connection and never answers (svc-worker(1) DESCRIPTION: a kernel
// that cannot be reached is logged "cannot lease from the kernel" and asked again after a
// backoff from 0.5 to 10 s; interface 4.1). Every request to the kernel is bounded on the
// worker's side: a lease's long poll by its wait_seconds plus a margin (10 s), any other by 30 s.
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KERNEL_REQUEST_TIMEOUT_MS, KernelClient, LEASE_POLL_MARGIN_MS } from '../../src/worker/kernel-client.js';
import { MockProvider } from '../../src/worker/providers/mock.js';
import { Worker } from '../../src/worker/worker.js';
import { answeringGatewayUrl, until } from './fakes.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A TCP server that accepts every connection and never answers (or answers `partial` and stops). */
async function silentKernel(partial?: string): Promise<{ url: string; connections: () => number }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
    if (partial) s.write(partial);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => sockets.length };
}

describe('a kernel that never answers is a kernel that cannot be reached, promptly (svc-worker(1) DESCRIPTION)', () => {
  it('the lease long poll gives up after wait_seconds plus its margin: logged as poll:error and asked again after the backoff', async () => {
    const k = await silentKernel();
    const kernel = new KernelClient({ baseUrl: k.url }, { leaseMarginMs: 400 });
    const worker = new Worker({ kernel, gatewayUrl: await answeringGatewayUrl(cleanups), provider: new MockProvider(), waitSeconds: 1, pollBackoffMs: { initial: 100, max: 200 } });
    const errors: Array<{ error: string; at: number }> = [];
    worker.on('poll:error', (e) => errors.push({ error: e.error, at: Date.now() }));
    cleanups.push(() => worker.stop({ graceMs: 0 }));
    const t0 = Date.now();
    worker.start();
    await until(() => errors.length >= 2, 8000, 'two poll errors');
    expect(errors[0]!.error).toBe(`cannot reach ${k.url} (no answer within 1400 ms)`);
    expect(errors[0]!.at - t0).toBeGreaterThanOrEqual(1300);
    expect(errors[0]!.at - t0).toBeLessThan(3000);
    expect(k.connections()).toBeGreaterThanOrEqual(2);
  });

  it('without options, a long poll of wait_seconds 0 gives up after the 10 s margin as a retryable network_error', { timeout: 20_000 }, async () => {
    expect([LEASE_POLL_MARGIN_MS, KERNEL_REQUEST_TIMEOUT_MS]).toEqual([10_000, 30_000]); // as svc-worker(1) says
    const k = await silentKernel();
    const t0 = Date.now();
    const err = await new KernelClient({ baseUrl: k.url }).lease({ worker_id: 'w', kinds: ['tool'], ttl_seconds: 60, wait_seconds: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'network_error', deterministic: false, message: `cannot reach ${k.url} (no answer within 10000 ms)` });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(9900);
    expect(Date.now() - t0).toBeLessThan(12_000);
  });

  it('other requests are bounded too, also an answer that stops after its headers; a lease call retries them until the lease runs out', async () => {
    const k = await silentKernel();
    const kernel = new KernelClient({ baseUrl: k.url }, { requestTimeoutMs: 300 });
    const t0 = Date.now();
    await expect(kernel.heartbeat('lse_1')).rejects.toMatchObject({ code: 'network_error', message: `cannot reach ${k.url} (no answer within 300 ms)` });
    expect(Date.now() - t0).toBeLessThan(1500);
    // Under a lease: asked again (0.25 s, 0.5 s, …) until just before the expiry.
    const t1 = Date.now();
    await expect(kernel.complete('lse_1', { ok: 1 }, { tokens: 1, usd: 0 }, { until: () => t1 + 1500 })).rejects.toMatchObject({ code: 'network_error' });
    expect(Date.now() - t1).toBeLessThan(3000);
    expect(k.connections()).toBeGreaterThanOrEqual(3);

    const half = await silentKernel('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"expires_at"');
    const t2 = Date.now();
    await expect(new KernelClient({ baseUrl: half.url }, { requestTimeoutMs: 300 }).heartbeat('lse_1')).rejects.toMatchObject({ code: 'network_error', message: `cannot reach ${half.url} (no answer within 300 ms)` });
    expect(Date.now() - t2).toBeLessThan(1500);
  });
});
