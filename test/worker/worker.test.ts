// The worker runtime against a fake kernel and a fake gateway that implement the contract of
// interface 2.6, 4.1 and 4.2 (decisions §4 pacing, §6 leases and failures, 5.4 approvals, §9).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sha256Hex } from '../../src/encoding/canonical-json.js';
import type { WorkerEventMap } from '../../src/worker/events.js';
import { actionSummary } from '../../src/worker/executors/action.js';
import { MockProvider } from '../../src/worker/providers/mock.js';
import type { Provider, ProviderRequest } from '../../src/worker/providers/provider.js';
import type { Lease } from '../../src/worker/types.js';
import { localExpiry, Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { getEventListeners } from 'node:events';
import { GatewayClient, gatewayFailure } from '../../src/worker/gateway-client.js';
import { answeringGatewayUrl, FakeGateway, FakeKernel, makeLease, refusingFetch, until } from './fakes.js';
import { startTestDaemon } from '../helpers/daemon.js';

type Ev = { name: keyof WorkerEventMap; payload: any; at: number };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setup(opts: Partial<WorkerOptions> = {}) {
  const kernel = await new FakeKernel().start();
  const gateway = await new FakeGateway().start();
  const worker = new Worker({ kernelUrl: kernel.url, gatewayUrl: gateway.url, provider: new MockProvider(), waitSeconds: 1, workerId: 'w-test', ...opts });
  const events: Ev[] = [];
  for (const name of ['worker:start', 'step:start', 'step:done', 'step:error', 'step:parked', 'step:lost', 'step:activity', 'poll:error', 'gateway:unreachable'] as const) {
    worker.on(name, (payload) => events.push({ name, payload, at: Date.now() }));
  }
  cleanups.push(async () => {
    await worker.stop({ graceMs: 0 });
    await kernel.close();
    await gateway.close();
  });
  worker.start();
  /** Offers a lease and waits for the step's end event. */
  const run = async (lease: Lease, ms = 5000): Promise<Ev> => {
    kernel.offer(lease);
    let found: Ev | undefined;
    await until(() => (found = events.find((e) => ['step:done', 'step:error', 'step:parked', 'step:lost'].includes(e.name) && e.payload.lease_id === lease.lease_id)) !== undefined, ms, `end of ${lease.step}`);
    return found!;
  };
  return { kernel, gateway, worker, events, run };
}

const key = (...parts: Array<string | number>) => sha256Hex(parts.join('/'));

/** A worker running a tool step whose gateway call answers `result` after `ms`. */
async function slowToolStep(ms: number, result: Record<string, unknown>) {
  const s = await setup();
  s.gateway.define('billing.slow', () => new Promise((r) => setTimeout(() => r(result), ms)));
  const lease = makeLease({ step: 'slow', step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
  s.kernel.offer(lease);
  await until(() => s.events.some((e) => e.name === 'step:start'));
  return { ...s, lease };
}

describe('tool steps (I 4.2 call; D §9 idempotency)', () => {
  it('calls the gateway with the remit token and sha256(run/step/0), completes with the result and usage', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.lookup_invoice', (args) => ({ rows: [{ id: args.invoice_id, amount: 120 }] }));
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: { invoice_id: 'INV-1' } } });
    const end = await run(lease);
    expect(end.name).toBe('step:done');
    const call = gateway.toolCalls('billing.lookup_invoice')[0]!;
    expect(call.body).toEqual({
      remit_token: lease.context.remit_token,
      run_id: lease.run_id,
      step: 'lookup',
      lease_id: lease.lease_id,
      tool: 'billing.lookup_invoice',
      args: { invoice_id: 'INV-1' },
      idempotency_key: key(lease.run_id, 'lookup', 0),
      scope: null,
    });
    const complete = kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!;
    expect(complete.body).toEqual({ output: { rows: [{ id: 'INV-1', amount: 120 }] }, usage: { tokens: 0, usd: 0 } });
    expect(kernel.calls('POST', '/v1/leases')[0]!.body).toMatchObject({ worker_id: 'w-test', kinds: ['model', 'tool', 'action', 'compensation'], ttl_seconds: 60, wait_seconds: 1 });
  });

  it.each([
    [503, { ok: false, error: { code: 'connector_quarantined', message: 'q', details: {} } }, 'connector_quarantined', false],
    [502, { ok: false, error: { code: 'upstream_error', message: 'boom', details: {} } }, 'upstream_error', false],
    [502, { ok: false, error: { code: 'upstream_error', message: 'timed out; its outcome is unknown', details: { outcome: 'unknown' } } }, 'idempotency_outcome_unknown', true],
    [422, { ok: false, error: { code: 'args_invalid', message: 'bad', details: {} } }, 'args_invalid', true],
    [422, { ok: false, error: { code: 'deterministic_failure', message: 'no', details: {} } }, 'deterministic_failure', true],
    [409, { ok: false, error: { code: 'idempotency_conflict', message: 'x', details: {} } }, 'idempotency_conflict', true],
    [403, { ok: false, refusal: { reason: 'scope_not_granted', detail: 'sql:table:x' } }, 'tool_refused', true],
  ])('a gateway %i fails the step with the right code and deterministic flag (%s)', async (status, body, code, deterministic) => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.lookup_invoice', () => ({ status, body }));
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    const end = await run(lease);
    expect(end.name).toBe('step:error');
    const fail = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!;
    expect(fail.body.error.code).toBe(code);
    expect(fail.body.deterministic).toBe(deterministic);
    expect(fail.body.usage).toEqual({ tokens: 0, usd: 0 });
    if (code === 'tool_refused') expect(fail.body.error.message).toContain('scope_not_granted');
    expect(fail.body.error.message).toContain(code === 'tool_refused' ? 'gateway refused' : `: ${code}`); // the message names what the code says
  });

  it('a 409 idempotency_in_flight is waited out as Retry-After says, then the call is asked again (D §9)', async () => {
    const { kernel, gateway, run } = await setup();
    let n = 0;
    gateway.define('billing.lookup_invoice', () => (n++ === 0 ? { status: 409, body: { ok: false, error: { code: 'idempotency_in_flight', message: 'x', details: {} } }, headers: { 'retry-after': '1' } } : { rows: [] }));
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    const end = await run(lease);
    expect(end.name).toBe('step:done');
    const calls = gateway.toolCalls('billing.lookup_invoice');
    expect(calls).toHaveLength(2);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(900);
    expect(calls[1]!.body.idempotency_key).toBe(calls[0]!.body.idempotency_key);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]);
  });

  it.each([
    ['an open circuit (502 upstream_error, circuit open)', { status: 502, body: { ok: false, error: { code: 'upstream_error', message: 'the circuit of connector billing is open', details: { connector: 'billing', retry_after_ms: 1000 }, circuit: 'open' } }, headers: { 'retry-after': '1' } }],
    ['remit_not_yet_valid (a gateway clock a moment behind the kernel\'s)', { status: 403, body: { ok: false, refusal: { reason: 'remit_not_yet_valid', detail: 'not valid before …' } } }],
  ])('%s ran nothing: waited out as Retry-After says (1 s without one), then the call is asked again within the attempt', async (_what, first) => {
    const { kernel, gateway, run } = await setup();
    let n = 0;
    gateway.define('billing.refund', () => (n++ === 0 ? first : { refunded: true }), { writes: true });
    const lease = makeLease({ step: 'refund', step_def: { id: 'refund', kind: 'tool', tool: 'billing.refund', args: {} } });
    expect((await run(lease)).name).toBe('step:done');
    const calls = gateway.toolCalls('billing.refund');
    expect(calls).toHaveLength(2);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(900);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]);
  });

  it('a circuit still open when the wait is spent fails the attempt, retryably, naming the circuit', async () => {
    const fake = await new FakeGateway().start();
    cleanups.push(() => fake.close());
    fake.define('billing.refund', () => ({ status: 502, body: { ok: false, error: { code: 'upstream_error', message: 'the circuit of connector billing is open', details: {}, circuit: 'open' } }, headers: { 'retry-after': '1' } }), { writes: true });
    const { kernel, run } = await setup({ gateway: new GatewayClient({ baseUrl: fake.url }, 30_000, 1500) });
    const lease = makeLease({ step: 'refund', step_def: { id: 'refund', kind: 'tool', tool: 'billing.refund', args: {} } });
    expect((await run(lease)).name).toBe('step:error');
    expect(fake.toolCalls('billing.refund')).toHaveLength(2); // at 0 and 1 s; the next wait (2 s) passes the 1.5 s
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'upstream_error', message: expect.stringContaining('(circuit open)') }, deterministic: false });
  });

  it('a 502 upstream_error that is no open circuit fails the attempt at once (retryable): the upstream answered', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.refund', () => ({ status: 502, body: { ok: false, error: { code: 'upstream_error', message: 'HTTP 500 from upstream', details: {} } }, headers: { 'retry-after': '1' } }), { writes: true });
    const lease = makeLease({ step: 'refund', step_def: { id: 'refund', kind: 'tool', tool: 'billing.refund', args: {} } });
    expect((await run(lease)).name).toBe('step:error');
    expect(gateway.toolCalls('billing.refund')).toHaveLength(1);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'upstream_error' }, deterministic: false });
  });

  it('a gateway that cannot be reached is asked again for a while, then the step fails with a non-deterministic network_error', async () => {
    // The gateway answers its health probe at the worker's start; its calls are refused.
    const gatewayUrl = await answeringGatewayUrl(cleanups);
    const cut = refusingFetch((url) => url.endsWith('/tools/call'));
    const gateway = new GatewayClient({ baseUrl: gatewayUrl, fetch: cut.fetch }, 30_000, 60_000, 700);
    const { kernel, run, events } = await setup({ gateway });
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    await run(lease);
    const fail = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!;
    expect(fail.body).toMatchObject({ error: { code: 'network_error' }, deterministic: false });
    // Said at once, not after the minute of asking again; and the first line names both addresses.
    const said = events.filter((e) => e.name === 'gateway:unreachable');
    expect(said.length).toBeGreaterThanOrEqual(1);
    // It names the step it holds up (several run at once with --concurrency).
    expect(said[0]!.payload).toEqual({ error: expect.stringContaining(`cannot reach ${gatewayUrl}`), retry_for_ms: 700, run_id: lease.run_id, step: 'lookup', lease_id: lease.lease_id, tool: 'billing.lookup_invoice' });
    expect(events.find((e) => e.name === 'worker:start')!.payload).toMatchObject({ kernel_url: kernel.url, gateway_url: gatewayUrl });
    // The budget runs from the first refusal: a try, 0.25 s, a second one at least.
    expect(cut.refused()).toBeGreaterThanOrEqual(2);
  });

  it('a run abandoned while the gateway is out of reach does not get its write when the gateway comes back: the lease is confirmed before each retry', async () => {
    const fake = await new FakeGateway().start();
    cleanups.push(() => fake.close());
    let writes = 0;
    fake.define('billing.refund', () => ({ refunded: ++writes }), { writes: true });
    let down = true;
    const cut: typeof fetch = (url, init) => (down && String(url).endsWith('/tools/call') ? Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } })) : fetch(url, init));
    const gateway = new GatewayClient({ baseUrl: fake.url, fetch: cut }, 30_000, 60_000, 30_000);
    const { kernel, events } = await setup({ gateway });
    const lease = makeLease({ step: 'refund', step_def: { id: 'refund', kind: 'tool', tool: 'billing.refund', args: {} } });
    kernel.offer(lease);
    await until(() => events.some((e) => e.name === 'gateway:unreachable'));
    kernel.gone.add(lease.lease_id); // abandoned: the kernel released the lease (410 from now on)
    down = false; // the gateway is back before the next timed heartbeat (20 s away)
    await until(() => events.some((e) => e.name === 'step:lost' || e.name === 'step:done' || e.name === 'step:error'), 5000);
    expect(events.find((e) => e.name === 'step:lost')?.payload).toMatchObject({ lease_id: lease.lease_id });
    expect(writes).toBe(0);
    expect(fake.calls('POST', '/v1/tools/call')).toEqual([]);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]);
  });

  it('a gateway out of reach past the wait: no new step is leased until it answers a probe, then leasing goes on (svc-worker(1) DESCRIPTION)', async () => {
    const fake = await new FakeGateway().start();
    cleanups.push(() => fake.close());
    fake.define('billing.lookup_invoice', () => ({ rows: [] }));
    let down = false;
    const cut = refusingFetch(() => down);
    const gateway = new GatewayClient({ baseUrl: fake.url, fetch: cut.fetch }, 30_000, 60_000, 300);
    // Two slots: the idle one's long poll must not take a step into the outage either.
    const { kernel, worker, events } = await setup({ gateway, pollBackoffMs: { initial: 100, max: 200 }, concurrency: 2 });
    await until(() => kernel.calls('POST', '/v1/leases').length >= 2); // past the start's probe
    down = true;
    const paused: unknown[] = [];
    const resumed: Array<{ paused_ms: number }> = [];
    worker.on('gateway:paused', (e) => paused.push(e));
    worker.on('gateway:resumed', (e) => resumed.push(e));
    const first = makeLease({ step: 'a', step_def: { id: 'a', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    const second = makeLease({ step: 'b', step_def: { id: 'b', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(first);
    await until(() => events.some((e) => e.name === 'step:error' && e.payload.lease_id === first.lease_id), 5000);
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'network_error' }, deterministic: false });
    await until(() => paused.length === 1, 2000);
    const polls = kernel.calls('POST', '/v1/leases').length;
    kernel.offer(second);
    await new Promise((r) => setTimeout(r, 800)); // probes at 100, 200, 200 … ms all fail
    expect(kernel.calls('POST', '/v1/leases').length).toBe(polls); // the second step waits in the kernel, no attempt spent
    expect(events.some((e) => e.name === 'step:start' && e.payload.lease_id === second.lease_id)).toBe(false);
    expect(paused).toEqual([{ error: expect.stringContaining('cannot reach') }]);
    down = false;
    await until(() => events.some((e) => e.name === 'step:done' && e.payload.lease_id === second.lease_id), 5000);
    expect(resumed).toHaveLength(1);
    expect(fake.calls('GET', '/v1/health').length).toBeGreaterThanOrEqual(2); // the start's and the pause's
  });

  it('a worker started while its gateway cannot be reached starts paused: no lease is asked for until the gateway answers (svc-worker(1) DESCRIPTION)', async () => {
    const fake = await new FakeGateway().start();
    cleanups.push(() => fake.close());
    fake.define('billing.lookup_invoice', () => ({ rows: [] }));
    let down = true;
    const cut = refusingFetch(() => down);
    const gateway = new GatewayClient({ baseUrl: fake.url, fetch: cut.fetch }, 30_000, 60_000, 300);
    const paused: unknown[] = [];
    const { kernel, worker, events } = await setup({ gateway, pollBackoffMs: { initial: 100, max: 200 }, concurrency: 2 });
    worker.on('gateway:paused', (e) => paused.push(e));
    const lease = makeLease({ step: 'a', step_def: { id: 'a', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(lease);
    await until(() => paused.length === 1, 2000);
    await new Promise((r) => setTimeout(r, 600)); // probes at 100, 200, 200 … ms all refused
    expect(kernel.calls('POST', '/v1/leases')).toEqual([]); // the step waits in the kernel for a worker that can run it
    expect(paused).toEqual([{ error: expect.stringContaining(`cannot reach ${fake.url}`) }]);
    down = false;
    await until(() => events.some((e) => e.name === 'step:done' && e.payload.lease_id === lease.lease_id), 5000);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]); // no attempt spent
  });

  it('a gateway that answers 503 at the worker\'s start does not pause it (a draining gateway answers its probe)', async () => {
    const busy: typeof fetch = async () => new Response(JSON.stringify({ ok: false, error: { code: 'unavailable', message: 'draining', details: {} } }), { status: 503 });
    const gateway = new GatewayClient({ baseUrl: 'http://127.0.0.1:9', fetch: busy });
    const { kernel } = await setup({ gateway });
    await until(() => kernel.calls('POST', '/v1/leases').length >= 1);
    expect(gateway.outOfReach).toBeNull();
  });

  it('a gateway that answers 503 for the whole wait does not pause leasing: its /v1/health would answer the probe at once', async () => {
    const busy: typeof fetch = async () => new Response(JSON.stringify({ ok: false, error: { code: 'unavailable', message: "the kernel's keys are not known yet", details: {} } }), { status: 503 });
    const gateway = new GatewayClient({ baseUrl: 'http://127.0.0.1:9', fetch: busy }, 30_000, 60_000, 300);
    await expect(gateway.call({ remit_token: 't', run_id: 'run_x', step: 's', lease_id: 'lse_x', tool: 'billing.lookup_invoice', args: {}, idempotency_key: 'k', scope: null })).rejects.toMatchObject({ deterministic: false });
    expect(gateway.outOfReach).toBeNull();
  });

  it('a step without a tool fails deterministically (step_invalid)', async () => {
    const { kernel, run } = await setup();
    const a = makeLease({ step: 'x', step_def: { id: 'x', kind: 'tool' } });
    await run(a);
    expect(kernel.calls('POST', `/v1/leases/${a.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'step_invalid' }, deterministic: true });
  });

  it('a kernel 422 output_invalid on complete becomes a deterministic failure', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    kernel.completeReply = () => ({ status: 422, body: { error: { code: 'output_invalid', message: '/rows must have 1 item', details: {} } } });
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    await run(lease);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'output_invalid' }, deterministic: true });
  });
});

describe('a bug in the worker (I 4.1 fail; svc-worker(1))', () => {
  it('fails the step as internal in one line; the stack goes to the worker log, never to the run', async () => {
    // A real TypeError from a real mistake (reading a member of undefined), not a made-up one.
    const broken: Provider = { name: 'broken', complete: async () => (undefined as unknown as { answer: Awaited<ReturnType<Provider['complete']>> }).answer };
    const { kernel, run } = await setup({ provider: broken });
    const lease = makeLease({ step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'triage' } }, { prompts: { triage: 'go' } });
    const end = await run(lease);
    expect(end.name).toBe('step:error');
    const sent = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body as { error: { code: string; message: string } };
    expect(sent.error.code).toBe('internal');
    expect(sent.error.message).toMatch(/^worker bug: TypeError: .+ \(the stack is in svc worker's log\)$/);
    expect(sent.error.message).not.toMatch(/\n|\bat |\.js:\d+/);
    expect(end.payload.stack).toMatch(/TypeError[\s\S]*\n\s+at /);
  });
});

describe('heartbeats and parking (I 3 lease rows; D §6)', () => {
  it('heartbeats every heartbeat_seconds and a 410 aborts the step at once, reporting nothing', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 30_000)));
    let beats = 0;
    kernel.heartbeatReply = () => (++beats >= 2 ? { status: 410, body: { error: { code: 'lease_expired', message: 'parked', details: {} } } } : null);
    const lease = makeLease({ step: 'slow', heartbeat_seconds: 1, step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    const t0 = Date.now();
    const end = await run(lease, 6000);
    expect(end.name).toBe('step:lost');
    expect(Date.now() - t0).toBeLessThan(3500);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/heartbeat`).length).toBe(2);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)).toEqual([]);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]);
    // The worker hung up on the gateway rather than waiting for the answer.
    await until(() => gateway.abandoned.some((r) => r.body?.tool === 'billing.slow'), 2000, 'gateway call abandoned');
  });

  it('a ttl of 1 s (heartbeat_seconds 1 = the ttl) is heartbeated every third of it, so the lease is kept', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 1200)));
    const lease = makeLease({ step: 'slow', ttl_seconds: 1, heartbeat_seconds: 1, expires_at: new Date(Date.now() + 1000).toISOString(), step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    const end = await run(lease, 5000);
    expect(end.name).toBe('step:done');
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/heartbeat`).length).toBeGreaterThanOrEqual(3);
  });

  it('localExpiry: the ttl from when the lease came or the heartbeat was sent; the kernel\'s time only without a ttl; never moved back', () => {
    expect(localExpiry({ ttl_seconds: 30 }, 1_000, '1970-01-01T00:00:05.000Z')).toBe(31_000);
    expect(localExpiry({}, 1_000, '1970-01-01T00:00:05.000Z')).toBe(5_000);
    expect(localExpiry({}, 1_000, null, 7_000)).toBe(7_000);
    // An earlier heartbeat answered after a later one: the later expiry stands.
    expect(localExpiry({ ttl_seconds: 30 }, 1_000, null, 40_000)).toBe(40_000);
  });

  it("a kernel whose clock is an hour behind the worker's: a failed heartbeat does not take the live lease for lost", async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 2500)));
    const kernelNow = () => Date.now() - 3_600_000;
    let beats = 0;
    // Every heartbeat but the first fails as a kernel restarting would; the ones that answer
    // give the expiry on the kernel's clock, an hour in the worker's past.
    kernel.heartbeatReply = () => (++beats === 1 ? { status: 200, body: { expires_at: new Date(kernelNow() + 60_000).toISOString() } } : { status: 503, body: { error: { code: 'unavailable', message: 'restarting', details: {} } } });
    const lease = makeLease({ step: 'slow', ttl_seconds: 3, heartbeat_seconds: 1, expires_at: new Date(kernelNow() + 3000).toISOString(), step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    const end = await run(lease, 6000);
    expect(end.name).toBe('step:done');
    expect(beats).toBeGreaterThanOrEqual(2);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`).length).toBe(1);
  });

  it('heartbeats that hang (a partition drops their packets) end the step when the lease runs out, not a heartbeat period later', { timeout: 25_000 }, async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 30_000)));
    const route = (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route.bind(kernel);
    (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route = (req) => (req.path.endsWith('/heartbeat') ? new Promise<never>(() => {}) : route(req));
    // ttl 10 s, heartbeat_seconds 3 (the kernel's ttl/3): each heartbeat gives up after 3 s, so
    // a check made only when one fails came at 12 s or later, 2 s past the kernel's expiry.
    // The bound leaves 1.9 s for a loaded machine's late timers.
    const lease = makeLease({ step: 'slow', ttl_seconds: 10, heartbeat_seconds: 3, expires_at: new Date(Date.now() + 10_000).toISOString(), step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    const t0 = Date.now();
    const end = await run(lease, 18_000);
    const took = Date.now() - t0;
    expect(end.name).toBe('step:lost');
    expect(end.payload.reason).toContain('ran out while heartbeats failed');
    expect(took).toBeGreaterThanOrEqual(9900);
    expect(took).toBeLessThan(11_900); // without the timer: 12 s or later
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)).toEqual([]);
  });

  it('a wall clock stepped back an hour during a partition: the step still ends when the lease runs out, not an hour later (decisions §6)', { timeout: 20_000 }, async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 30_000)));
    const route = (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route.bind(kernel);
    (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route = (req) => (req.path.endsWith('/heartbeat') ? new Promise<never>(() => {}) : route(req));
    const lease = makeLease({ step: 'slow', ttl_seconds: 3, heartbeat_seconds: 1, expires_at: new Date(Date.now() + 3000).toISOString(), step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    const real = Date.now.bind(Date);
    let offset = 0;
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + offset);
    setTimeout(() => (offset = -3_600_000), 500);
    try {
      const t0 = performance.now();
      const end = await run(lease, 10_000);
      expect(end.name).toBe('step:lost');
      expect(end.payload.reason).toContain('ran out while heartbeats failed');
      expect(performance.now() - t0).toBeLessThan(6000);
    } finally {
      spy.mockRestore();
    }
  });

  it('a wall clock stepped back while a step runs: its step:done duration_ms is still the time it took, not minus the step', async () => {
    const { gateway, run } = await setup();
    const real = Date.now.bind(Date);
    let offset = 0;
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + offset);
    gateway.define('billing.slow', () => {
      offset = -3_600_000; // the step back, while the step runs
      return new Promise((resolve) => setTimeout(() => resolve({ done: true }), 300));
    });
    const lease = makeLease({ step: 'slow', step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {} } });
    try {
      const end = await run(lease);
      expect(end.name).toBe('step:done');
      expect(end.payload.duration_ms).toBeGreaterThanOrEqual(250);
      expect(end.payload.duration_ms).toBeLessThan(5000);
    } finally {
      spy.mockRestore();
    }
  });

  it('a step that ran but whose completion found no kernel until its lease ran out is said as such, and not failed (svc-worker(1) DESCRIPTION)', async () => {
    const { kernel, gateway, worker, events } = await setup();
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    kernel.completeReply = () => ({ status: 503, body: { error: { code: 'unavailable', message: 'the kernel is draining', details: {} } } });
    const unreported: Array<WorkerEventMap['step:unreported']> = [];
    worker.on('step:unreported', (e) => unreported.push(e));
    const lease = makeLease({ step: 'lookup', ttl_seconds: 2, heartbeat_seconds: 20, expires_at: new Date(Date.now() + 2000).toISOString(), step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    kernel.offer(lease);
    await until(() => unreported.length > 0, 6000, 'the unreported completion');
    expect(unreported[0]).toMatchObject({ lease_id: lease.lease_id, error: { code: 'network_error', message: expect.stringContaining('503') } });
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`).length).toBeGreaterThanOrEqual(2); // asked again to the lease's end
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)).toEqual([]); // a step that ran is not reported failed
    expect(events.filter((e) => e.payload.lease_id === lease.lease_id && e.name === 'step:error')).toEqual([]);
  });

  it('a completion the kernel takes and never answers waits no longer than the lease, not the request timeout (svc-worker(1) DESCRIPTION)', async () => {
    const { kernel, gateway, worker } = await setup();
    const route = (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route.bind(kernel);
    // Stopped after the tool call (SIGSTOP): heartbeats and the completion are taken, never answered.
    let stopped = false;
    gateway.define('billing.lookup_invoice', () => {
      stopped = true;
      return { rows: [] };
    });
    (kernel as unknown as { route: (req: { path: string }) => Promise<unknown> }).route = (req) => (stopped && /\/(complete|heartbeat)$/.test(req.path) ? new Promise<never>(() => {}) : route(req));
    const unreported: Array<WorkerEventMap['step:unreported']> = [];
    worker.on('step:unreported', (e) => unreported.push(e));
    const lease = makeLease({ step: 'lookup', ttl_seconds: 3, heartbeat_seconds: 1, expires_at: new Date(Date.now() + 3000).toISOString(), step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} } });
    const t0 = Date.now();
    kernel.offer(lease);
    // A kernel stopped (SIGSTOP) while the step ran: each report waited its 30 s request
    // timeout, so the step held its slot up to 30 s past the lease's expiry.
    await until(() => unreported.length > 0, 15_000, 'the unreported completion');
    expect(Date.now() - t0).toBeLessThan(12_000);
    expect(unreported[0]).toMatchObject({ lease_id: lease.lease_id, error: { code: 'network_error' } });
  }, 20_000);

  it('stop({graceMs: 0}) aborts a running step and fails it as worker_shutdown (retryable)', async () => {
    const { kernel, worker, lease } = await slowToolStep(10_000, { late: true });
    await worker.stop({ graceMs: 0 });
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'worker_shutdown' }, deterministic: false });
  });

  it('with the kernel gone, a stop exits after its grace and a short try to report, not when the lease runs out (svc-worker(1) SIGNALS)', async () => {
    const { kernel, worker, events, lease } = await slowToolStep(30_000, { late: true }); // its lease expires in 60 s
    await kernel.close(); // the kernel stops answering while the step runs
    const t0 = Date.now();
    await worker.stop({ graceMs: 200 });
    // grace 0.2 s + SHUTDOWN_REPORT_MS 3 s + one backoff wait, against the 60 s the report
    // used to keep asking for
    expect(Date.now() - t0).toBeLessThan(8000);
    const failed = events.find((e) => e.name === 'step:error' && e.payload.lease_id === lease.lease_id);
    expect(failed?.payload).toMatchObject({ error: { code: 'worker_shutdown' }, outcome: null, run_state: null });
  }, 20_000);

  it('a kernel that takes the connection and never answers holds a stop no longer than its grace and 3 s (svc-worker(1) SIGNALS)', async () => {
    const { kernel, worker, events, lease } = await slowToolStep(30_000, { late: true });
    (kernel as unknown as { route: () => Promise<never> }).route = () => new Promise<never>(() => {}); // accepts, never answers
    const t0 = Date.now();
    await worker.stop({ graceMs: 200 });
    expect(Date.now() - t0).toBeLessThan(6000);
    expect(events.find((e) => e.name === 'step:error' && e.payload.lease_id === lease.lease_id)?.payload).toMatchObject({ error: { code: 'worker_shutdown' }, outcome: null });
  }, 20_000);

  it('stop() with a grace lets a running step finish and complete', async () => {
    const { kernel, worker, lease } = await slowToolStep(300, { finished: true });
    await worker.stop({ graceMs: 5000 });
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ finished: true });
  });

  it('stop() lets the running step finish but fails one still waiting for its pacing slot at once, unstarted', async () => {
    const { kernel, gateway, worker, events } = await setup({ concurrency: 2 });
    gateway.define('billing.slow', () => new Promise((r) => setTimeout(() => r({ finished: true }), 600)));
    const pacing = { pacing: { tool: { max_concurrent: 1 } } };
    const first = makeLease({ step: 'first', step_def: { id: 'first', kind: 'tool', tool: 'billing.slow', args: {} } }, pacing);
    const queued = makeLease({ step: 'queued', step_def: { id: 'queued', kind: 'tool', tool: 'billing.slow', args: {} } }, pacing);
    kernel.offer(first);
    await until(() => events.some((e) => e.name === 'step:start'));
    kernel.offer(queued);
    await until(() => kernel.leases.has(queued.lease_id)); // the second slot's long poll takes it; first runs 600 ms
    await worker.stop({ graceMs: 5000 });
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/complete`)).toHaveLength(1);
    // Failed when the stop came, not when the running step released the slot.
    const order = kernel.requests.map((r) => r.path);
    expect(order.indexOf(`/v1/leases/${queued.lease_id}/fail`)).toBeLessThan(order.indexOf(`/v1/leases/${first.lease_id}/complete`));
    expect(events.filter((e) => e.name === 'step:start').map((e) => e.payload.step)).toEqual(['first']);
    expect(kernel.calls('POST', `/v1/leases/${queued.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'worker_shutdown' }, deterministic: false });
  });

  it('stop() does not wait for a min_interval_ms slot to come due (svc-worker(1) PACING)', async () => {
    const { kernel, gateway, worker, events } = await setup({ concurrency: 2 });
    gateway.define('billing.fast', () => ({ ok: true }));
    const pacing = { pacing: { tool: { min_interval_ms: 20_000 } } };
    const first = makeLease({ step: 'first', step_def: { id: 'first', kind: 'tool', tool: 'billing.fast', args: {} } }, pacing);
    const queued = makeLease({ step: 'queued', step_def: { id: 'queued', kind: 'tool', tool: 'billing.fast', args: {} } }, pacing);
    kernel.offer(first);
    await until(() => kernel.calls('POST', `/v1/leases/${first.lease_id}/complete`).length === 1);
    kernel.offer(queued);
    await until(() => kernel.leases.has(queued.lease_id)); // handed out: now waiting for its slot
    const t0 = Date.now();
    await worker.stop({ graceMs: 5000 });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(kernel.calls('POST', `/v1/leases/${queued.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'worker_shutdown', message: expect.stringContaining('pacing slot') }, deterministic: false });
    expect(events.filter((e) => e.name === 'step:start').map((e) => e.payload.step)).toEqual(['first']);
  });

  it('a step over its timeout_seconds fails as step_timeout (not deterministic)', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.slow', () => new Promise((r) => setTimeout(() => r({}), 5000)));
    const lease = makeLease({ step: 'slow', step_def: { id: 'slow', kind: 'tool', tool: 'billing.slow', args: {}, timeout_seconds: 1 } });
    await run(lease);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'step_timeout' }, deterministic: false });
  });
});

describe('tool steps across a quarantine and resume (svc-worker(1) IDEMPOTENCY AND RESUMING)', () => {
  it('a write that ran keeps its key, so the gateway answers from its store; a read, or a write whose stored answer was a deterministic failure, runs afresh', async () => {
    const { kernel, gateway, run } = await setup();
    let writes = 0;
    gateway.define('billing.charge', (a) => ({ id: `ch_${++writes}`, ...a }), { writes: true });
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    const charge = { id: 'charge', kind: 'tool', tool: 'billing.charge', args: { amount: 5 } };
    const first = makeLease({ step: 'charge', step_def: charge });
    await run(first);
    const key0 = key(first.run_id, 'charge', 0);
    expect(gateway.toolCalls('billing.charge').map((c) => c.body.idempotency_key)).toEqual([key0]);
    // The write ran, then the step was quarantined for something else (say its output schema);
    // the operator resumes: the charge is answered from the store, not made again.
    kernel.append(first.run_id, 'tool.called', { step: 'charge', tool: 'billing.charge', idempotency_key: key0, outcome: 'ok' });
    kernel.append(first.run_id, 'step.quarantined', { step: 'charge', attempt: 1, reason: 'deterministic' });
    const second = makeLease({ step: 'charge', step_def: charge }, { prior_events: kernel.eventsOf(first.run_id) });
    await run(second);
    expect(gateway.toolCalls('billing.charge').map((c) => c.body.idempotency_key)).toEqual([key0, key0]);
    expect(writes).toBe(1);
    expect(kernel.calls('POST', `/v1/leases/${second.lease_id}/complete`)[0]!.body.output).toEqual({ id: 'ch_1', amount: 5 });

    // A stored deterministic failure under the key: the resume after it moves the write on.
    const other = makeLease({ run_id: 'run_other', step: 'charge', step_def: charge });
    const k0 = key('run_other', 'charge', 0);
    kernel.append('run_other', 'tool.called', { step: 'charge', tool: 'billing.charge', idempotency_key: k0, outcome: 'deterministic_failure' });
    kernel.append('run_other', 'step.quarantined', { step: 'charge', attempt: 1, reason: 'deterministic' });
    await run(makeLease({ ...other, lease_id: 'lse_other2' }, { prior_events: kernel.eventsOf('run_other') }));
    expect(gateway.toolCalls('billing.charge').at(-1)!.body.idempotency_key).toBe(key('run_other', 'charge', 0, 'r1'));

    // A read after a resume reads afresh.
    const lookup = { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {} };
    kernel.append(first.run_id, 'tool.called', { step: 'lookup', tool: 'billing.lookup_invoice', idempotency_key: key(first.run_id, 'lookup', 0), outcome: 'ok' });
    kernel.append(first.run_id, 'step.quarantined', { step: 'lookup', attempt: 1, reason: 'deterministic' });
    await run(makeLease({ step: 'lookup', step_def: lookup }, { prior_events: kernel.eventsOf(first.run_id) }));
    expect(gateway.toolCalls('billing.lookup_invoice').map((c) => c.body.idempotency_key)).toEqual([key(first.run_id, 'lookup', 0, 'r1')]);
  });
});

describe('action steps (I 2.7, 3; D 5.4)', () => {
  const refundDef = { id: 'refund', kind: 'action', tool: 'billing.refund', args: { invoice_id: 'INV-1', amount: 150 } };

  it('allow executes through the gateway under a key bound to the action id', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.refund', (a) => ({ id: 'rf_1', ...a }), { writes: true });
    kernel.decide = () => ({ status: 200, body: { action_id: 'act_abc', decision: 'allow', rule: 'refunds/small', approval_id: null } });
    const lease = makeLease({ step: 'refund', step_def: refundDef });
    await run(lease);
    const proposal = kernel.calls('POST', `/v1/leases/${lease.lease_id}/actions`)[0]!;
    expect(proposal.body).toEqual({ action: { tool: 'billing.refund', args: { invoice_id: 'INV-1', amount: 150 }, summary: 'billing.refund {"amount":150,"invoice_id":"INV-1"}' } });
    expect(gateway.toolCalls('billing.refund')[0]!.body.idempotency_key).toBe(key(lease.run_id, 'refund', 'action', 'act_abc'));
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ id: 'rf_1', invoice_id: 'INV-1', amount: 150 });
  });

  it('after a resume an action whose stored deterministic failure quarantined the step runs afresh; one that executed keeps its key (D §6, §9)', async () => {
    const { kernel, gateway, run } = await setup();
    let broken = true;
    gateway.define('billing.refund', (a) => (broken ? { status: 422, body: { ok: false, error: { code: 'deterministic_failure', message: 'amount over the invoice total', details: {} } } } : { id: 'rf_2', ...a }), { writes: true });
    kernel.decide = () => ({ status: 200, body: { action_id: 'act_abc', decision: 'allow', rule: 'refunds/small', approval_id: null } });
    const first = makeLease({ step: 'refund', step_def: refundDef });
    await run(first);
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'deterministic_failure' }, deterministic: true });
    const key0 = key(first.run_id, 'refund', 'action', 'act_abc');
    // What the gateway records for the call, then the kernel's quarantine; the operator fixes the cause and resumes.
    kernel.append(first.run_id, 'tool.called', { step: 'refund', tool: 'billing.refund', idempotency_key: key0, outcome: 'deterministic_failure' });
    kernel.append(first.run_id, 'step.quarantined', { step: 'refund', attempt: 1, reason: 'deterministic' });
    broken = false;
    const second = makeLease({ step: 'refund', step_def: refundDef }, { prior_events: kernel.eventsOf(first.run_id) });
    await run(second);
    const key1 = key(first.run_id, 'refund', 'action', 'act_abc', 'r1');
    expect(gateway.toolCalls('billing.refund').map((c) => c.body.idempotency_key)).toEqual([key0, key1]);
    expect(kernel.calls('POST', `/v1/leases/${second.lease_id}/complete`)[0]!.body.output).toMatchObject({ id: 'rf_2' });

    // Executed under key1, then quarantined for something else: a second resume keeps key1, so
    // the gateway answers from its store and the refund is never issued twice.
    kernel.append(first.run_id, 'tool.called', { step: 'refund', tool: 'billing.refund', idempotency_key: key1, outcome: 'ok' });
    kernel.append(first.run_id, 'step.quarantined', { step: 'refund', attempt: 1, reason: 'deterministic' });
    const third = makeLease({ step: 'refund', step_def: refundDef }, { prior_events: kernel.eventsOf(first.run_id) });
    await run(third);
    expect(gateway.toolCalls('billing.refund').map((c) => c.body.idempotency_key)).toEqual([key0, key1, key1]);
  });

  it('the summary it writes does not depend on the order of the arguments (it is part of the action id)', () => {
    const a = actionSummary('billing.refund', { invoice_id: 'INV-1', amount: 150, meta: { z: 1, a: 2 } });
    const b = actionSummary('billing.refund', { meta: { a: 2, z: 1 }, amount: 150, invoice_id: 'INV-1' });
    expect(a).toBe('billing.refund {"amount":150,"invoice_id":"INV-1","meta":{"a":2,"z":1}}');
    expect(b).toBe(a);
    expect(actionSummary('billing.refund', { x: 'y'.repeat(300) })).toHaveLength(200);
    expect(actionSummary('billing.refund', { x: 1 }, 'Refund INV-1')).toBe('Refund INV-1');
  });

  it('deny (403 action_denied) is a deterministic failure and nothing executes', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.refund', () => ({ id: 'rf_1' }), { writes: true });
    kernel.decide = () => ({ status: 403, body: { error: { code: 'action_denied', message: 'denied', details: { action_id: 'act_x', rule: 'refunds/too_big' } } } });
    const lease = makeLease({ step: 'refund', step_def: refundDef });
    await run(lease);
    const fail = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!;
    expect(fail.body).toMatchObject({ error: { code: 'action_denied' }, deterministic: true });
    expect(fail.body.error.message).toContain('refunds/too_big');
    expect(gateway.executions.get('billing.refund') ?? 0).toBe(0);
  });

  it("a rejected approval fails the action step with the approver's reason in its error, where an operator reads it (D 5.4)", async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.refund', () => ({ id: 'rf_1' }), { writes: true });
    kernel.decide = () => ({ status: 403, body: { error: { code: 'action_denied', message: 'denied', details: { action_id: 'act_r', decision: 'deny', rule: 'rejected:apr_9', approval_id: 'apr_9' } } } });
    const rejected = { seq: 7, kind: 'approval.decided', payload: { approval_id: 'apr_9', step: 'refund', action_id: 'act_r', decision: 'rejected', reason: 'already refunded in March' }, actor: { id: 'fin-1', role: 'finance' } };
    const lease = makeLease({ step: 'refund', step_def: refundDef }, { prior_events: [rejected] });
    await run(lease);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({
      error: { code: 'action_denied', message: 'action billing.refund denied by rejected:apr_9 (the approver\'s reason: "already refunded in March")' },
      deterministic: true,
    });
    expect(gateway.executions.get('billing.refund') ?? 0).toBe(0);
  });

  it('approval_required stops the step; the approved re-lease executes it exactly once, even leased again', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.refund', (a) => ({ id: 'rf_9', amount: a.amount }), { writes: true });
    const approved = new Set<string>();
    kernel.decide = (_a, lease) =>
      lease.context.approved_actions.includes('act_r')
        ? { status: 200, body: { action_id: 'act_r', decision: 'allow', rule: 'approved:apr_1', approval_id: 'apr_1' } }
        : { status: 200, body: { action_id: 'act_r', decision: 'approval_required', rule: 'refunds/large', approval_id: 'apr_1' } };
    const first = makeLease({ step: 'refund', step_def: refundDef });
    const end1 = await run(first);
    expect(end1.name).toBe('step:parked');
    expect(end1.payload).toMatchObject({ action_id: 'act_r', approval_id: 'apr_1' });
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/complete`)).toEqual([]);
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/fail`)).toEqual([]);
    expect(gateway.executions.get('billing.refund') ?? 0).toBe(0);

    approved.add('act_r');
    const second = makeLease({ step: 'refund', step_def: refundDef }, { approved_actions: ['act_r'] });
    expect((await run(second)).name).toBe('step:done');
    // The worker died after executing but before completing: the step is leased once more.
    const third = makeLease({ step: 'refund', step_def: refundDef }, { approved_actions: ['act_r'] });
    expect((await run(third)).name).toBe('step:done');
    expect(gateway.executions.get('billing.refund')).toBe(1);
    const keys = gateway.toolCalls('billing.refund').map((c) => c.body.idempotency_key);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(1);
    expect(kernel.calls('POST', `/v1/leases/${third.lease_id}/complete`)[0]!.body.output).toEqual({ id: 'rf_9', amount: 150 });
  });
});

describe('compensation leases (D §6 abandon)', () => {
  it('calls the compensate tool with its rendered args through the gateway', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.void_refund', (a) => ({ voided: a.refund_id }), { writes: true });
    const lease = makeLease({ step: 'refund', kind: 'compensation', step_def: { id: 'refund', kind: 'action', tool: 'billing.refund', compensate: { tool: 'billing.void_refund', args: { refund_id: 'rf_9' } } } });
    await run(lease);
    const call = gateway.toolCalls('billing.void_refund')[0]!;
    expect(call.body.args).toEqual({ refund_id: 'rf_9' });
    expect(call.body.idempotency_key).toBe(key(lease.run_id, 'refund', 'compensate'));
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/actions`)).toEqual([]);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ voided: 'rf_9' });
  });

  it("after an operator's retry (compensation.retry_requested), a stored deterministic failure gets a fresh key; any other outcome keeps it (svc-worker(1) IDEMPOTENCY)", async () => {
    const { gateway, run } = await setup();
    gateway.define('billing.void_refund', (a) => ({ voided: a.refund_id }), { writes: true });
    const def = { id: 'refund', kind: 'action', tool: 'billing.refund', compensate: { tool: 'billing.void_refund', args: { refund_id: 'rf_9' } } };
    const base = key('run_TEST', 'refund', 'compensate');
    const called = (seq: number, idempotency_key: string, outcome: string) => ({ seq, kind: 'tool.called', payload: { step: 'refund', tool: 'billing.void_refund', idempotency_key, outcome }, actor: null, at: '' });
    const retried = (seq: number, steps = ['refund']) => ({ seq, kind: 'compensation.retry_requested', payload: { reason: null, steps, from_state: 'abandoned' }, actor: { id: 'ops-1', role: 'ops' }, at: '' });
    const keyOf = async (prior: unknown[]) => {
      const before = gateway.toolCalls('billing.void_refund').length;
      await run(makeLease({ step: 'refund', kind: 'compensation', step_def: def }, { prior_events: prior as never }));
      const calls = gateway.toolCalls('billing.void_refund');
      expect(calls).toHaveLength(before + 1);
      return calls.at(-1)!.body.idempotency_key;
    };
    // Given up on a stored deterministic failure (nothing ran), then retried: a fresh key.
    expect(await keyOf([called(10, base, 'deterministic_failure'), retried(12)])).toBe(key('run_TEST', 'refund', 'compensate', 'retry1'));
    // Failed again under that key, retried once more: the next.
    const first = key('run_TEST', 'refund', 'compensate', 'retry1');
    expect(await keyOf([called(10, base, 'deterministic_failure'), retried(12), called(14, first, 'deterministic_failure'), retried(16)])).toBe(key('run_TEST', 'refund', 'compensate', 'retry2'));
    // An upstream error released its claim, an unknown outcome must never run twice: the key stays.
    expect(await keyOf([called(10, base, 'upstream_error'), retried(12)])).toBe(base);
    expect(await keyOf([called(10, base, 'unknown'), retried(12)])).toBe(base);
    // A deterministic failure with no retry (the kernel's own retries within the abandon), or a retry of another step: the key stays.
    expect(await keyOf([called(10, base, 'deterministic_failure')])).toBe(base);
    expect(await keyOf([called(10, base, 'deterministic_failure'), retried(12, ['lookup'])])).toBe(base);
  });
});

/** A provider that counts calls and delegates to the mock. */
class CountingMock implements Provider {
  readonly name = 'mock';
  readonly requests: ProviderRequest[] = [];
  private inner = new MockProvider();
  complete(req: ProviderRequest) {
    this.requests.push({ ...req, messages: req.messages.slice() });
    return this.inner.complete(req);
  }
}

describe('model steps: the agent loop (I 5.5, D §4 mock, D §6 prior_events)', () => {
  const triage = { id: 'triage', kind: 'model', prompt: 'triage', tools: ['billing.lookup_invoice'] };

  it('a context cut to its last events: the worker reads the step\'s first recorded answer from the log and replays it, asking the provider nothing', async () => {
    const provider = new CountingMock();
    const { kernel, run } = await setup({ provider });
    const runId = 'run_CUT';
    // The step's first lease: its recorded answer (the output), then 1,100 notes.
    kernel.append(runId, 'step.leased', { step: 'triage' });
    kernel.append(runId, 'model.called', { step: 'triage', call_index: 0, source: 'worker', response: { content: 'done', calls: [], output: { amount: 42 }, usage: { tokens: 3, usd: 0 } } });
    for (let i = 0; i < 1100; i++) kernel.append(runId, 'note', { step: 'triage', i });
    const all = kernel.eventsOf(runId);
    const lease = makeLease({ run_id: runId, step: 'triage', attempt: 2, step_def: { id: 'triage', kind: 'model', prompt: 'triage' } }, { prompts: { triage: 'go' }, mock: { triage: { output: { amount: 1 } } }, prior_events: all.slice(-1000), prior_events_from_seq: all[0]!.seq });
    await run(lease);
    expect(provider.requests).toEqual([]);
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ amount: 42 });
  });

  it('a prompt template with "| text" inserts the redacted text without quotes (svc-bundle(5) TEMPLATES)', async () => {
    const provider = new CountingMock();
    const { run } = await setup({ provider });
    const lease = makeLease(
      { step: 'triage', step_def: triage },
      {
        input: { invoice_id: 'INV-1', ticket: 'Refund please, reach me at jane@example.com' },
        prompts: { triage: 'Ticket: {{input.ticket | text}} (invoice {{input.invoice_id|text}})' },
        mock: { triage: { output: { category: 'refund', amount: 150 }, usage: { tokens: 42, usd: 0.01 } } },
      },
    );
    expect((await run(lease)).name).toBe('step:done');
    const sent = JSON.stringify(provider.requests.map((r) => r.messages));
    expect(sent).not.toContain('jane@example.com');
    expect(sent).toContain('Ticket: Refund please, reach me at [REDACTED:pii] (invoice INV-1)');
  });

  it('renders the prompt, redacts an ungranted email before the provider, notes it, and completes', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', (a) => ({ rows: [{ id: a.invoice_id, amount: 150, email: 'jane@example.com', note: 'call 415-555-2671' }] }), { data_classes: { email: 'pii' } });
    const lease = makeLease(
      { step: 'triage', step_def: triage },
      {
        input: { invoice_id: 'INV-1', ticket: 'Refund please, reach me at jane@example.com' },
        prompts: { triage: 'Ticket: {{input.ticket}} (invoice {{input.invoice_id}})' },
        mock: { triage: { tool_calls: [{ tool: 'billing.lookup_invoice', args: { invoice_id: '{{input.invoice_id}}' } }], output: { category: 'refund', amount: 150 }, usage: { tokens: 42, usd: 0.01 } } },
      },
    );
    const end = await run(lease);
    expect(end.name).toBe('step:done');
    expect(provider.requests).toHaveLength(2);
    const sent = JSON.stringify(provider.requests.map((r) => r.messages));
    expect(sent).not.toContain('jane@example.com');
    expect(sent).not.toContain('415-555-2671');
    expect(sent).toContain('Ticket: \\"Refund please, reach me at [REDACTED:pii]\\" (invoice \\"INV-1\\")');
    // The tool got the real (rendered) args; the gateway is inside the boundary.
    expect(gateway.toolCalls('billing.lookup_invoice')[0]!.body).toMatchObject({ args: { invoice_id: 'INV-1' }, idempotency_key: key(lease.run_id, 'triage', 1) });
    const notes = kernel.eventsOf(lease.run_id, 'note').map((e) => e.payload);
    expect(notes).toEqual([
      { type: 'redaction', class: 'pii', path: '/input/ticket', count: 1, source: 'worker', step: 'triage', call_index: 0 },
      { type: 'redaction', class: 'pii', path: '/calls/1/result/rows/0/email', count: 1, source: 'worker', step: 'triage', call_index: 2 },
      { type: 'redaction', class: 'pii', path: '/calls/1/result/rows/0/note', count: 1, source: 'worker', step: 'triage', call_index: 2 },
    ]);
    expect(JSON.stringify(kernel.eventsOf(lease.run_id))).not.toContain('jane@example.com');
    const models = kernel.eventsOf(lease.run_id, 'model.called').map((e) => e.payload);
    expect(models.map((m) => m.call_index)).toEqual([0, 2]);
    const complete = kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!;
    expect(complete.body).toEqual({ output: { category: 'refund', amount: 150 }, usage: { tokens: 42, usd: 0.01 } });
  });

  it("tool descriptions and schemas cross the boundary too (an MCP server writes its own): detected values go, a property named email stays (I 5.5)", async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }), {
      description: 'Invoices. Privacy officer: maria.lopez@corp.example',
      input_schema: { type: 'object', properties: { email: { type: 'string', description: 'e.g. vip.customer@corp.example' }, plan: { enum: ['basic', 'vip.customer@corp.example'] } } },
      data_classes: { email: 'pii' },
    });
    const lease = makeLease({ step: 'triage', step_def: { ...triage, output_schema: { type: 'object', description: 'write to ops.lead@corp.example' } } }, { prompts: { triage: 'go' }, mock: { triage: { output: { ok: true } } } });
    expect((await run(lease)).name).toBe('step:done');
    const sent = JSON.stringify(provider.requests);
    for (const value of ['maria.lopez@corp.example', 'vip.customer@corp.example', 'ops.lead@corp.example']) expect(sent).not.toContain(value);
    const tool = provider.requests[0]!.tools[0]!;
    expect(tool.description).toBe('Invoices. Privacy officer: [REDACTED:pii]');
    expect(tool.input_schema).toEqual({ type: 'object', properties: { email: { type: 'string', description: 'e.g. [REDACTED:pii]' }, plan: { enum: ['basic', '[REDACTED:pii]'] } } });
    expect(provider.requests[0]!.messages[0]!.content).toContain('"description":"write to [REDACTED:pii]"');
    const paths = kernel.eventsOf(lease.run_id, 'note').map((e) => e.payload.path);
    expect(paths).toEqual(expect.arrayContaining(['/tools/billing.lookup_invoice/description', '/tools/billing.lookup_invoice/input_schema/properties/email/description', '/tools/billing.lookup_invoice/input_schema/properties/plan/enum/1', '/output_schema/description']));
  });

  it('a value a later result shows to be sensitive leaves the messages built before it: the prompt, and an earlier result of the same turn (I 5.5)', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('crm.note', () => ({ text: 'Caller Philippa Stroud-Kenning wants a callback' }), { description: 'Notes. Escalations go to Philippa Stroud-Kenning' });
    gateway.define('crm.lookup', () => ({ customer_name: 'Philippa Stroud-Kenning', tier: 'gold' }), { data_classes: { customer_name: 'pii' } });
    const lease = makeLease(
      { step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'triage', tools: ['crm.note', 'crm.lookup'], output_schema: { type: 'object', description: 'not for Philippa Stroud-Kenning' } } },
      {
        input: { ticket: 'hi from Philippa Stroud-Kenning' },
        prompts: { triage: 'Ticket: {{input.ticket}}' },
        mock: { triage: { tool_calls: [{ tool: 'crm.note', args: {} }, { tool: 'crm.lookup', args: {} }], output: { ok: true } } },
      },
    );
    expect((await run(lease)).name).toBe('step:done');
    expect(provider.requests).toHaveLength(2);
    // The first request could not know (nothing had classified the name yet); the second does.
    expect(JSON.stringify(provider.requests[0]!.messages)).toContain('Philippa Stroud-Kenning');
    expect(JSON.stringify(provider.requests[1])).not.toContain('Philippa'); // messages, tools, output_schema
    expect(provider.requests[1]!.tools.find((t) => t.id === 'crm.note')!.description).toBe('Notes. Escalations go to [REDACTED:pii]');
    expect(provider.requests[1]!.output_schema).toEqual({ type: 'object', description: 'not for [REDACTED:pii]' });
    const second = JSON.stringify(provider.requests[1]!.messages);
    expect(second).toContain('Ticket: \\"hi from [REDACTED:pii]\\"');
    expect(second).toContain('Caller [REDACTED:pii] wants a callback');
    const notes = kernel.eventsOf(lease.run_id, 'note').map((e) => e.payload);
    expect(notes).toEqual(expect.arrayContaining([expect.objectContaining({ class: 'pii', path: '/messages/1' }), expect.objectContaining({ class: 'pii', path: '/messages/3' })]));
    // Each is noted once, in the turn it left its message.
    expect(notes.filter((n) => n.path === '/messages/1')).toHaveLength(1);
  });

  it('what a mock script reads crosses the boundary like a prompt, and is noted once per path (I 5.5)', async () => {
    const provider = new CountingMock();
    const { kernel, run } = await setup({ provider });
    const lease = makeLease(
      { step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'triage' } },
      {
        input: { email: 'zed@example.com', ticket: 'from zed@example.com' },
        prompts: { triage: 'Ticket: {{input.ticket}}' },
        mock: { triage: { output: { email: '{{input.email}}', ticket: '{{input.ticket}}' } } },
      },
    );
    const end = await run(lease);
    expect(end.name).toBe('step:done');
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ email: '[REDACTED:pii]', ticket: 'from [REDACTED:pii]' });
    const notes = kernel.eventsOf(lease.run_id, 'note').map((e) => e.payload.path);
    expect(notes).toEqual(['/input/ticket', '/input/email']); // the ticket, which the prompt reads too, once
  });

  it('--max-turns: the calls of the last allowed answer are not run; the step fails model_loop_exceeded (deterministic)', async () => {
    const { kernel, gateway, run } = await setup({ maxTurns: 2 });
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    // The mock answers with its tool calls, then its actions, then its output: three answers.
    const lease = makeLease(
      { step: 'triage', step_def: triage },
      { prompts: { triage: 'go' }, mock: { triage: { tool_calls: [{ tool: 'billing.lookup_invoice', args: {} }], actions: [{ tool: 'billing.refund', args: { amount: 5 } }], output: {} } } },
    );
    await run(lease);
    expect(gateway.toolCalls('billing.lookup_invoice')).toHaveLength(1); // answer 1's call runs
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/actions`)).toEqual([]); // answer 2's action is never proposed
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'model_loop_exceeded' }, deterministic: true });
  });

  it('with the class granted, the provider sees the content and no note is posted', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', () => ({ rows: [{ email: 'jane@example.com' }] }), { data_classes: { email: 'pii' } });
    const lease = makeLease(
      { step: 'triage', step_def: triage },
      { remit: { autonomy: 'supervised', grants: ['pii'], tools: ['billing.*'], scopes: ['sql:table:*'] }, prompts: { triage: 'go' }, mock: { triage: { tool_calls: [{ tool: 'billing.lookup_invoice', args: {} }], output: {} } } },
    );
    await run(lease);
    expect(JSON.stringify(provider.requests.map((r) => r.messages))).toContain('jane@example.com');
    expect(kernel.eventsOf(lease.run_id, 'note')).toEqual([]);
  });

  it('fails closed without the gateway\'s descriptors: no provider request, a retryable failure naming the boundary (I 5.5)', async () => {
    // The classes of an earlier step's output come from GET /v1/tools alone (this step offers no
    // tool, so the lease context has no descriptors): without them nothing may reach a model.
    const provider = new CountingMock();
    const cut = refusingFetch((url) => url.endsWith('/v1/tools')); // the health probe at the start is answered
    const gateway = new GatewayClient({ baseUrl: await answeringGatewayUrl(cleanups), fetch: cut.fetch }, 30_000, 60_000, 700);
    const { kernel, run, events } = await setup({ provider, gateway });
    const lease = makeLease(
      { step: 'summarise', step_def: { id: 'summarise', kind: 'model', prompt: 'p' } },
      { steps: { lookup: { output: { customer_name: 'Dana Whitfield' } } }, prompts: { p: 'Customer: {{steps.lookup.output.customer_name}}' }, mock: { summarise: { output: { ok: true } } } },
    );
    const t0 = Date.now();
    expect((await run(lease)).name).toBe('step:error');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(240); // asked again after 0.25 s: the next wait would pass its 0.7 s budget
    expect(provider.requests).toEqual([]);
    const fail = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body;
    expect(fail).toMatchObject({ error: { code: 'network_error', message: expect.stringContaining('which fields to redact') }, deterministic: false });
    expect(JSON.stringify(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`))).not.toContain('Dana');
    // The outage line names the step it holds up, as for a tool call (svc-worker(1)).
    expect(events.find((e) => e.name === 'gateway:unreachable')?.payload).toMatchObject({ run_id: lease.run_id, step: 'summarise', lease_id: lease.lease_id });
  });

  it('a gateway that answers the tool list with an error fails the step too; once a list was had, it stands in while the gateway is away', async () => {
    const fake = await new FakeGateway().start();
    cleanups.push(() => fake.close());
    fake.define('billing.lookup_invoice', () => ({ rows: [] }), { data_classes: { customer_name: 'pii' } });
    let broken = true;
    const flaky: typeof fetch = (url, init) => (broken && String(url).endsWith('/v1/tools') ? Promise.resolve(new Response('{"error":{"code":"unauthorized","message":"no"}}', { status: 401 })) : fetch(url, init));
    const client = new GatewayClient({ baseUrl: fake.url, fetch: flaky }, 0, 60_000, 700);
    await expect(client.tools()).rejects.toMatchObject({ code: 'gateway_error', message: expect.stringContaining('unauthorized') });
    broken = false;
    expect((await client.tools()).map((d) => d.id)).toEqual(['billing.lookup_invoice']);
    await fake.close();
    // Unreachable now, and the cache is stale (cacheMs 0): the last list is used, at once.
    const t0 = Date.now();
    expect((await client.tools())[0]!.data_classes).toEqual({ customer_name: 'pii' });
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it('a mock error is reported as the step failure; a mock delay over timeout_seconds is a step_timeout', async () => {
    const { kernel, run } = await setup();
    const failing = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'x' }, mock: { triage: { output: 1, error: { code: 'provider_error', message: 'scripted outage' } } } });
    expect((await run(failing)).name).toBe('step:error');
    expect(kernel.calls('POST', `/v1/leases/${failing.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'provider_error', message: 'scripted outage' }, deterministic: false });
    const slow = makeLease({ step: 'triage', step_def: { ...triage, timeout_seconds: 1 } }, { prompts: { triage: 'x' }, mock: { triage: { output: 1, delay_ms: 30_000 } } });
    await run(slow);
    expect(kernel.calls('POST', `/v1/leases/${slow.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'step_timeout' }, deterministic: false });
  });

  it('a missing prompt or template value fails deterministically', async () => {
    const { kernel, run } = await setup();
    const a = makeLease({ step: 'triage', step_def: triage }, { prompts: {}, mock: { triage: { output: {} } } });
    await run(a);
    expect(kernel.calls('POST', `/v1/leases/${a.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'prompt_not_found' }, deterministic: true });
    const b = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'x {{input.nope}}' }, mock: { triage: { output: {} } } });
    await run(b);
    expect(kernel.calls('POST', `/v1/leases/${b.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'template_invalid' }, deterministic: true });
    const c = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'x' }, mock: {} });
    await run(c);
    expect(kernel.calls('POST', `/v1/leases/${c.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'mock_script_missing' }, deterministic: true });
  });

  it('parks on an action, then resumes from prior_events: no model call, tool call or action runs twice', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', (a) => ({ rows: [{ id: a.invoice_id, amount: 150 }] }));
    gateway.define('billing.refund', (a) => ({ id: 'rf_1', ...a }), { writes: true });
    kernel.decide = (action, lease) => {
      const id = 'act_' + sha256Hex(JSON.stringify(action)).slice(0, 8);
      return lease.context.approved_actions.includes(id)
        ? { status: 200, body: { action_id: id, decision: 'allow', rule: 'approved:apr_1', approval_id: 'apr_1' } }
        : { status: 200, body: { action_id: id, decision: 'approval_required', rule: 'refunds/large', approval_id: 'apr_1' } };
    };
    const ctx = {
      input: { invoice_id: 'INV-7' },
      prompts: { triage: 'Handle {{input.invoice_id}}' },
      mock: {
        triage: {
          tool_calls: [{ tool: 'billing.lookup_invoice', args: { invoice_id: '{{input.invoice_id}}' } }],
          actions: [{ tool: 'billing.refund', args: { invoice_id: '{{input.invoice_id}}', amount: 150 }, summary: 'Refund INV-7' }],
          output: { refunded: true },
          usage: { tokens: 100, usd: 0.02 },
        },
      },
    };
    const first = makeLease({ step: 'triage', step_def: triage }, ctx);
    const end1 = await run(first);
    expect(end1.name).toBe('step:parked');
    expect(provider.requests).toHaveLength(2); // tool calls, then the action
    const actionId = end1.payload.action_id as string;

    // The kernel re-leases the step with the approval and the run's events since the first lease.
    const second = makeLease({ step: 'triage', step_def: triage }, { ...ctx, approved_actions: [actionId], prior_events: kernel.eventsOf(first.run_id) });
    const end2 = await run(second);
    expect(end2.name).toBe('step:done');
    // Only the final answer was asked of the provider; turns 0 and 1 were replayed.
    expect(provider.requests).toHaveLength(3);
    expect(provider.requests[2]!.turn).toBe(2);
    expect(gateway.executions.get('billing.lookup_invoice')).toBe(1);
    expect(gateway.executions.get('billing.refund')).toBe(1);
    const proposals = kernel.calls('POST', '/v1/leases/').filter((r) => r.path.endsWith('/actions')).map((r) => r.body);
    expect(proposals).toHaveLength(2);
    expect(proposals[0]).toEqual(proposals[1]);
    // Usage of the parked lease (never reported) is reported by the lease that completes.
    expect(kernel.calls('POST', `/v1/leases/${second.lease_id}/complete`)[0]!.body).toEqual({ output: { refunded: true }, usage: { tokens: 100, usd: 0.02 } });
  });

  it("a rejected proposal is the model's to hear: the denial and the approver's reason are the call's result, and the step goes on (D 5.4)", async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.refund', () => ({ id: 'rf_1' }), { writes: true });
    kernel.decide = () => ({ status: 403, body: { error: { code: 'action_denied', message: 'denied', details: { action_id: 'act_r', decision: 'deny', rule: 'rejected:apr_9', approval_id: 'apr_9' } } } }); // as the kernel sends it (src/kernel/actions.ts)
    const rejected = { seq: 7, kind: 'approval.decided', payload: { approval_id: 'apr_9', step: 'triage', action_id: 'act_r', decision: 'rejected', reason: 'already refunded in March' }, actor: { id: 'fin-1', role: 'finance' } };
    const ctx = { prompts: { triage: 'go' }, mock: { triage: { actions: [{ tool: 'billing.refund', args: { amount: 150 } }], output: { replied: true } } }, prior_events: [rejected] };
    const lease = makeLease({ step: 'triage', step_def: triage }, ctx);
    const end = await run(lease);
    expect(end.name).toBe('step:done');
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!.body.output).toEqual({ replied: true });
    const toolMessage = provider.requests.at(-1)!.messages.find((m) => m.role === 'tool')!;
    expect(JSON.parse(toolMessage.content as string)).toEqual({ error: { code: 'action_denied', message: 'action billing.refund denied by rejected:apr_9', reason: 'already refunded in March' } });
    expect(gateway.executions.get('billing.refund') ?? 0).toBe(0);
  });

  it('usage already reported by a failed lease is not reported again after the retry', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    let fails = 1;
    gateway.define('billing.lookup_invoice', () => (fails-- > 0 ? { status: 502, body: { ok: false, error: { code: 'upstream_error', message: 'x', details: {} } } } : { rows: [] }));
    const ctx = { prompts: { triage: 'go' }, mock: { triage: { tool_calls: [{ tool: 'billing.lookup_invoice', args: {} }], output: { ok: 1 }, usage: { tokens: 10, usd: 0 } } } };
    const first = makeLease({ step: 'triage', step_def: triage }, ctx);
    await run(first);
    expect(kernel.calls('POST', `/v1/leases/${first.lease_id}/fail`)[0]!.body).toMatchObject({ error: { code: 'upstream_error' }, deterministic: false, usage: { tokens: 10, usd: 0 } });
    const second = makeLease({ step: 'triage', step_def: triage }, { ...ctx, prior_events: kernel.eventsOf(first.run_id) });
    await run(second);
    expect(provider.requests).toHaveLength(2); // turn 0 replayed, only turn 1 asked
    expect(kernel.calls('POST', `/v1/leases/${second.lease_id}/complete`)[0]!.body.usage).toEqual({ tokens: 0, usd: 0 });
  });

  it('a model call that takes the run past its budget ends the step: no further call, budget_exhausted with the usage (D §8)', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    const script = { tool_calls: [{ tool: 'billing.lookup_invoice', args: {} }], output: { ok: 1 }, usage: { tokens: 200, usd: 0.5 } };
    // 900 of 1,000 tokens used before this lease: the first answer's 200 go over.
    const over = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'go' }, mock: { triage: script }, budget: { tokens: 1000, usd: 5, used_tokens: 900, used_usd: 0 } });
    await run(over);
    expect(provider.requests).toHaveLength(1);
    expect(gateway.toolCalls('billing.lookup_invoice')).toHaveLength(0);
    const failed = kernel.calls('POST', `/v1/leases/${over.lease_id}/fail`)[0]!.body;
    expect(failed).toMatchObject({ error: { code: 'budget_exhausted', message: 'the run has used 1100 tokens of its 1000; no further model call is made' }, deterministic: true, usage: { tokens: 200, usd: 0.5 } });
    // USD counts the same way; within both budgets the loop goes on to its output.
    const usd = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'go' }, mock: { triage: script }, budget: { tokens: 10_000, usd: 0.6, used_tokens: 0, used_usd: 0.2 } });
    await run(usd);
    expect(kernel.calls('POST', `/v1/leases/${usd.lease_id}/fail`)[0]!.body.error).toEqual({ code: 'budget_exhausted', message: 'the run has spent 0.7 USD of its 0.6; no further model call is made' });
    const within = makeLease({ step: 'triage', step_def: triage }, { prompts: { triage: 'go' }, mock: { triage: script }, budget: { tokens: 1100, usd: 0.5, used_tokens: 900, used_usd: 0 } });
    await run(within);
    expect(kernel.calls('POST', `/v1/leases/${within.lease_id}/complete`)[0]!.body).toMatchObject({ output: { ok: 1 }, usage: { tokens: 200, usd: 0.5 } });
  });

  it('resumed after a quarantine, the model is told which earlier actions ran (so it does not reword and repeat them), through the boundary (svc-worker(1) IDEMPOTENCY AND RESUMING)', async () => {
    const provider = new CountingMock();
    const { kernel, run } = await setup({ provider });
    const ctx = { prompts: { triage: 'go' }, mock: { triage: { output: { ok: 1 } } } };
    const first = makeLease({ step: 'triage', step_def: triage }, ctx);
    await run(first);
    const r = first.run_id;
    const allowed = (id: string, summary: string) => kernel.append(r, 'action.decided', { step: 'triage', action_id: id, decision: 'allow', rule: 'default/allow', action: { tool: 'billing.refund', args: {}, summary } });
    allowed('act_ran', 'Refund 5 on inv_1001, mail jane@example.com');
    kernel.append(r, 'tool.called', { step: 'triage', tool: 'billing.refund', writes: true, idempotency_key: key(r, 'triage', 'action', 'act_ran'), outcome: 'ok' });
    allowed('act_unknown', 'Refund 7 on inv_1005');
    kernel.append(r, 'tool.called', { step: 'triage', tool: 'billing.refund', writes: true, idempotency_key: key(r, 'triage', 'action', 'act_unknown'), outcome: 'idempotency_outcome_unknown' });
    allowed('act_store', 'Refund 8 on inv_1008'); // the gateway's store failed: it may have run
    kernel.append(r, 'tool.called', { step: 'triage', tool: 'billing.refund', writes: true, idempotency_key: key(r, 'triage', 'action', 'act_store'), outcome: 'store_failed' });
    allowed('act_failed', 'Refund 9 on inv_1009'); // a stored deterministic failure: it did not run
    kernel.append(r, 'tool.called', { step: 'triage', tool: 'billing.refund', writes: true, idempotency_key: key(r, 'triage', 'action', 'act_failed'), outcome: 'deterministic_failure' });
    kernel.append(r, 'step.quarantined', { step: 'triage', attempt: 1, reason: 'deterministic' });
    provider.requests.length = 0;
    const second = makeLease({ step: 'triage', step_def: triage }, { ...ctx, prior_events: kernel.eventsOf(r) });
    expect((await run(second)).name).toBe('step:done');
    const note = provider.requests[0]!.messages.find((m) => m.role === 'user' && String(m.content).startsWith('This step was stopped'));
    expect(note?.content).toBe(
      [
        'This step was stopped and then resumed by an operator. Earlier attempts of it already did these actions:',
        '- ran: Refund 5 on inv_1001, mail [REDACTED:pii]',
        '- may have run (its outcome is not known): Refund 7 on inv_1005',
        '- may have run (its outcome is not known): Refund 8 on inv_1008',
        'Do not do them again unless the task needs them a second time.',
      ].join('\n'),
    );
    expect(kernel.eventsOf(r, 'note').map((e) => e.payload)).toContainEqual(expect.objectContaining({ type: 'redaction', class: 'pii', path: '/resumed', call_index: 0 }));
    // A step never quarantined has no such message.
    expect(provider.requests.length).toBeGreaterThan(0);
    const fresh = makeLease({ step: 'triage', step_def: triage, run_id: 'run_FRESH' }, ctx);
    provider.requests.length = 0;
    await run(fresh);
    expect(provider.requests[0]!.messages.map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('after a quarantine the step starts afresh with new idempotency keys', async () => {
    const provider = new CountingMock();
    const { kernel, gateway, run } = await setup({ provider });
    gateway.define('billing.lookup_invoice', () => ({ rows: [] }));
    const ctx = { prompts: { triage: 'go' }, mock: { triage: { tool_calls: [{ tool: 'billing.lookup_invoice', args: {} }], output: { ok: 1 } } } };
    const first = makeLease({ step: 'triage', step_def: triage }, ctx);
    await run(first);
    kernel.append(first.run_id, 'step.quarantined', { step: 'triage', attempt: 1, reason: 'deterministic' });
    const second = makeLease({ step: 'triage', step_def: triage }, { ...ctx, prior_events: kernel.eventsOf(first.run_id) });
    await run(second);
    expect(provider.requests).toHaveLength(4);
    const keys = gateway.toolCalls('billing.lookup_invoice').map((c) => c.body.idempotency_key);
    expect(keys).toEqual([key(first.run_id, 'triage', 1), key(first.run_id, 'triage', 1, 'r1')]);
  });
});

describe('pacing (D §4 pacing: max_concurrent, min_interval_ms per worker)', () => {
  it('max_concurrent 1 runs one tool step at a time even with --concurrency 3', async () => {
    const { kernel, gateway, run } = await setup({ concurrency: 3 });
    let now = 0;
    let peak = 0;
    gateway.define('billing.slow', () => {
      now += 1;
      peak = Math.max(peak, now);
      return new Promise((r) => setTimeout(() => { now -= 1; r({ ok: true }); }, 150));
    });
    const leases = [1, 2, 3].map((i) => makeLease({ step: `s${i}`, step_def: { id: `s${i}`, kind: 'tool', tool: 'billing.slow', args: {} } }, { pacing: { tool: { max_concurrent: 1 } } }));
    await Promise.all(leases.map((l) => run(l)));
    expect(peak).toBe(1);
    expect(kernel.calls('POST', '/v1/leases/').filter((r) => r.path.endsWith('/complete'))).toHaveLength(3);
  });

  it('timeout_seconds starts when the step starts: waiting for a pacing slot does not time it out', async () => {
    const { kernel, gateway, run } = await setup({ concurrency: 2 });
    gateway.define('billing.slow', (a) => new Promise((r) => setTimeout(() => r({ ok: true }), Number(a.ms))));
    const pacing = { pacing: { tool: { max_concurrent: 1 } } };
    const long = makeLease({ step: 'long', step_def: { id: 'long', kind: 'tool', tool: 'billing.slow', args: { ms: 1500 } } }, pacing);
    const short = makeLease({ step: 'short', step_def: { id: 'short', kind: 'tool', tool: 'billing.slow', args: { ms: 10 }, timeout_seconds: 1 } }, pacing);
    const [a, b] = await Promise.all([run(long), run(short)]);
    expect([a.name, b.name]).toEqual(['step:done', 'step:done']); // short waited ≈1.5 s for its slot, then ran in 10 ms
    expect(kernel.calls('POST', `/v1/leases/${short.lease_id}/fail`)).toEqual([]);
  });

  it('without pacing, --concurrency 3 runs three at once', async () => {
    const { gateway, run } = await setup({ concurrency: 3 });
    let now = 0;
    let peak = 0;
    // A barrier: each call waits until all three are in flight (or 3 s pass, if they never are).
    const waiting: Array<() => void> = [];
    gateway.define('billing.slow', () => {
      now += 1;
      peak = Math.max(peak, now);
      return new Promise((r) => {
        const done = () => r({ ok: true });
        waiting.push(done);
        if (now === 3) waiting.splice(0).forEach((f) => f());
        else setTimeout(done, 3000);
      });
    });
    const leases = [1, 2, 3].map((i) => makeLease({ step: `s${i}`, step_def: { id: `s${i}`, kind: 'tool', tool: 'billing.slow', args: {} } }));
    await Promise.all(leases.map((l) => run(l)));
    expect(peak).toBe(3);
  });

  it('min_interval_ms spaces the starts of steps of one kind', async () => {
    const { gateway, run, events } = await setup({ concurrency: 3 });
    gateway.define('billing.fast', () => ({ ok: true }));
    const leases = [1, 2, 3].map((i) => makeLease({ step: `f${i}`, step_def: { id: `f${i}`, kind: 'tool', tool: 'billing.fast', args: {} } }, { pacing: { tool: { min_interval_ms: 200 } } }));
    const t0 = Date.now();
    await Promise.all(leases.map((l) => run(l)));
    const starts = events.filter((e) => e.name === 'step:start').map((e) => e.at).sort((a, b) => a - b);
    expect(starts).toHaveLength(3);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(195);
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(195);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
  });
});

describe('polling (I 4.1 POST /leases)', () => {
  it('asks only for the kinds it serves and reports an unreachable kernel as poll:error', async () => {
    const { kernel, events } = await setup({ kinds: ['tool', 'compensation'] });
    await until(() => kernel.calls('POST', '/v1/leases').length > 0);
    expect(kernel.calls('POST', '/v1/leases')[0]!.body.kinds).toEqual(['tool', 'compensation']);
    const w = new Worker({ kernelUrl: 'http://127.0.0.1:1', gatewayUrl: await answeringGatewayUrl(cleanups), provider: new MockProvider(), pollBackoffMs: { initial: 20, max: 40 } });
    const errors: string[] = [];
    w.on('poll:error', (e) => errors.push(e.error));
    w.start();
    await until(() => errors.length >= 2);
    await w.stop({ graceMs: 0 });
    expect(errors[0]).toContain('cannot reach');
    expect(events.filter((e) => e.name === 'poll:error')).toEqual([]);
  });
});

describe('a kernel away is one outage for all the slots (svc-worker(1) DESCRIPTION)', () => {
  it('with --concurrency 8: one poll:error a backoff step, the step doubling, not one per slot', async () => {
    const w = new Worker({ kernelUrl: 'http://127.0.0.1:1', gatewayUrl: await answeringGatewayUrl(cleanups), provider: new MockProvider(), concurrency: 8, pollBackoffMs: { initial: 100, max: 400 } });
    const errors: Array<{ retry_in_ms: number }> = [];
    w.on('poll:error', (e) => errors.push(e));
    w.start();
    await new Promise((r) => setTimeout(r, 1200));
    await w.stop({ graceMs: 0 });
    // 100 + 200 + 400 + 400 … ms: four or five steps in 1.2 s (eight slots each logging were 40).
    expect(errors.length).toBeGreaterThanOrEqual(3);
    expect(errors.length).toBeLessThanOrEqual(6);
    expect(errors.slice(0, 3).map((e) => e.retry_in_ms)).toEqual([100, 200, 400]);
  });
});

describe('a step timeout longer than a timer can wait (2^31-1 ms)', () => {
  it('is waited for, not fired at once as setTimeout would', async () => {
    const { kernel, gateway, run } = await setup();
    gateway.define('billing.lookup_invoice', async () => {
      await new Promise((r) => setTimeout(r, 200));
      return { rows: [] };
    });
    const lease = makeLease({ step: 'lookup', step_def: { id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice', args: {}, timeout_seconds: 1e9 } });
    expect((await run(lease)).name).toBe('step:done');
    expect(kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)).toHaveLength(1);
  });
});

describe('idle polling (svc-worker(1) --wait-seconds)', () => {
  it('idle long polls leave no abort listener behind; --wait-seconds 0 pauses between polls', async () => {
    {
      // Against a real svcd, which holds each poll for wait_seconds and answers 204.
      await using d = await startTestDaemon();
      const w = new Worker({ kernelUrl: d.kernelUrl!, gatewayUrl: await answeringGatewayUrl(cleanups), provider: new MockProvider(), waitSeconds: 1, concurrency: 16 });
      w.start();
      await new Promise((r) => setTimeout(r, 3200));
      // White-box: what fetch left on the worker's own signal (one per slot while it polls;
      // 80 after three rounds when every poll's listener stayed).
      const signal = (w as unknown as { pollAbort: AbortController }).pollAbort.signal;
      expect(getEventListeners(signal, 'abort').length).toBeLessThanOrEqual(16);
      await w.stop({ graceMs: 0 });
    }
    const { kernel } = await setup({ concurrency: 16, waitSeconds: 0, pollBackoffMs: { initial: 20, max: 40 } });
    await until(() => kernel.calls('POST', '/v1/leases').length >= 100, 10_000);
    // 16 slots pausing 20 ms between idle answers: nowhere near a busy loop's thousands a second.
    const before = kernel.calls('POST', '/v1/leases').length;
    await new Promise((r) => setTimeout(r, 500));
    expect(kernel.calls('POST', '/v1/leases').length - before).toBeLessThan(16 * 25 + 16);
  });
});

describe('gateway answers as step failures (svc-worker(1) FAILURES)', () => {
  it('a body over the gateway limit (413 payload_too_large) is deterministic: the same arguments would be again', () => {
    const e = gatewayFailure('app.log', 413, { ok: false, error: { code: 'payload_too_large', message: 'request body is too large', details: {} } });
    expect(e).toMatchObject({ code: 'payload_too_large', deterministic: true });
    expect(gatewayFailure('app.log', 500, { ok: false, error: { code: 'internal', message: 'x', details: {} } })).toMatchObject({ code: 'gateway_error', deterministic: false });
  });

  it('a refusal is deterministic, but remit_not_yet_valid (a gateway clock behind the kernel\'s, interface 5.3 step 3) is retried: time cures it', () => {
    const refused = (reason: string) => gatewayFailure('billing.lookup', 403, { ok: false, refusal: { reason, detail: 'x' } });
    expect(refused('remit_expired')).toMatchObject({ code: 'tool_refused', deterministic: true });
    expect(refused('scope_not_granted')).toMatchObject({ code: 'tool_refused', deterministic: true });
    expect(refused('remit_not_yet_valid')).toMatchObject({ code: 'tool_refused', deterministic: false });
  });

  it('a worker whose gateway URL has a port fetch refuses is not paused at its start: its calls fail and say why', async () => {
    const gateway = new GatewayClient({ baseUrl: 'http://127.0.0.1:6000' }); // X11: one of fetch's blocked ports
    await gateway.reachAtStart();
    expect(gateway.outOfReach).toBeNull();
  });
});
