/**
 * POST /v1/tools/call over HTTP against a real Gateway (test connector of decisions §9):
 * the interface 5.3 refusals in the decisions §9 order, each with its tool.refused event and
 * metric; idempotency (interface 4.2 call rules, decisions §9); quarantine and circuit order;
 * tool.called audit events; the gateway error bodies (interface 7.2).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { SvcError } from '../../src/errors.js';
import { IDEMPOTENCY_TTL_MS, IdempotencyStore } from '../../src/gateway/idempotency.js';
import { canonicalHash } from '../../src/encoding/canonical-json.js';
import { StepError } from '../../src/worker/errors.js';
import { GatewayClient, retryAfterMs } from '../../src/worker/gateway-client.js';
import { mintToken, rawToken, remitPayload, testSigner, type TestSigner } from '../helpers/remit-token.js';
import { capturedLogger, metricValue, startGateway, type TestGateway } from './helpers.js';
import { Redactor } from '../../src/log/logger.js';

const signer: TestSigner = testSigner();
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const nowS = () => Math.floor(clock.now() / 1000);
const token = (over: Parameters<typeof remitPayload>[1] = {}) => mintToken(signer, remitPayload(signer, over, nowS()));

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ keys: signer, clock, env: { SVC_GATEWAY_TEST_TOOLS: '1' }, random: () => 0.5 });
});
afterAll(async () => gw?.close());

function refusalsOf(text: string, reason: string) {
  return metricValue(text, 'svc_gateway_refusals_total', { reason });
}

/** Refusals of steps 1–4: the token itself is what failed. */
const TOKEN_STEPS = new Set(['token_malformed', 'signature_invalid', 'remit_expired', 'remit_not_yet_valid', 'remit_run_mismatch']);

describe('interface 5.3 refusals, one per step, each with event and metric', () => {
  const other = testSigner();
  const cases: Array<{ reason: string; body: () => Record<string, unknown> }> = [
    { reason: 'token_malformed', body: () => ({ remit_token: 'krt1.not-a-token', tool: 'test.echo', args: {} }) },
    { reason: 'token_malformed', body: () => ({ remit_token: rawToken(signer, Buffer.from('[]')), tool: 'test.echo', args: {} }) },
    { reason: 'token_malformed', body: () => ({ remit_token: token().replace(/^krt1/, 'krt2'), tool: 'test.echo', args: {} }) },
    // Longer than any body field bound: still the verifier's refusal (D §3: over 16 KiB), not a 400.
    { reason: 'token_malformed', body: () => ({ remit_token: `krt1.${signer.keyId}.${'a'.repeat(70_000)}.sig`, tool: 'test.echo', args: {} }) },
    { reason: 'signature_invalid', body: () => ({ remit_token: mintToken(other, remitPayload(signer, {}, nowS()), signer.keyId), tool: 'test.echo', args: {} }) },
    { reason: 'signature_invalid', body: () => ({ remit_token: mintToken(other, remitPayload(other, {}, nowS())), tool: 'test.echo', args: {} }) },
    { reason: 'remit_expired', body: () => ({ remit_token: token({ exp: nowS() - 1, iat: nowS() - 100, nbf: nowS() - 100 }), tool: 'test.echo', args: {} }) },
    { reason: 'remit_not_yet_valid', body: () => ({ remit_token: token({ nbf: nowS() + 60 }), tool: 'test.echo', args: {} }) },
    { reason: 'remit_run_mismatch', body: () => ({ remit_token: token({ run: 'run_OTHER' }), tool: 'test.echo', args: {} }) },
    { reason: 'tool_not_in_remit', body: () => ({ remit_token: token({ tools: ['test.echo'] }), tool: 'test.write', args: {} }) },
    { reason: 'scope_not_granted', body: () => ({ remit_token: token({ scopes: ['sql:table:*'] }), tool: 'test.echo', args: {} }) },
    { reason: 'autonomy_too_low', body: () => ({ remit_token: token({ autonomy: 'propose' }), tool: 'test.write', args: {} }) },
    { reason: 'autonomy_too_low', body: () => ({ remit_token: token({ autonomy: 'observe' }), tool: 'test.write', args: {} }) },
  ];

  for (const [i, c] of cases.entries()) {
    it(`${c.reason} (#${i}): 403 body, tool.refused event on the run, svc_gateway_refusals_total`, async () => {
      const runId = `run_REFUSE${i}`;
      const before = refusalsOf(await gw.metrics(), c.reason);
      const body = c.body();
      const res = await gw.call({ ...body, run_id: runId, step: 's1', lease_id: 'lse_1' });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ ok: false, refusal: { reason: c.reason, detail: expect.any(String) } });
      const events = gw.link.events.filter((e) => e.runId === runId);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ kind: 'tool.refused', payload: { reason: c.reason, step: 's1', lease_id: 'lse_1' }, actor: { id: 'gateway' } });
      // D §7: posted with the remit when the token verified (steps 5–7), else with the
      // call's lease (the token is the bad one); the bearer alone is the last resort.
      expect(events[0]!.cred).toEqual(TOKEN_STEPS.has(c.reason) ? { lease: 'lse_1' } : { remit: body.remit_token });
      expect(refusalsOf(await gw.metrics(), c.reason)).toBe(before + 1);
    });
  }

  it('a valid call under the same remit passes every step (the cases above differ only in the failing field)', async () => {
    const res = await gw.call({ remit_token: token({ run: 'run_OK' }), run_id: 'run_OK', tool: 'test.echo', args: { a: 1 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, result: { echo: { a: 1 } }, scope: 'test:*', scopes: ['test:*'], replayed: false });
    expect(typeof res.body.latency_ms).toBe('number');
  });
});

describe('the kernel keys cannot be fetched (a gateway apart from a kernel that is down)', () => {
  it('a malformed token is still 403 token_malformed (step 1 needs no keys); a well-formed one is 503 unavailable', async () => {
    const keys = gw.link.trustedKeys;
    gw.link.trustedKeys = async () => {
      throw new SvcError('unavailable', 'the kernel at http://127.0.0.1:9 does not answer');
    };
    try {
      const bad = await gw.call({ remit_token: 'garbage', run_id: 'run_DOWN', lease_id: 'lse_9', tool: 'test.echo', args: {} });
      expect(bad.status).toBe(403);
      expect(bad.body.refusal.reason).toBe('token_malformed');
      expect(gw.link.events.filter((e) => e.runId === 'run_DOWN').map((e) => e.payload.reason)).toEqual(['token_malformed']);
      const good = await gw.call({ remit_token: token(), tool: 'test.echo', args: {} });
      expect(good.status).toBe(503);
      expect(good.body.error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('does not answer') });
    } finally {
      gw.link.trustedKeys = keys;
    }
  });
});

describe('decisions §7: the credential an event is posted with falls back when the kernel refuses it', () => {
  afterEach(() => {
    gw.link.refuses = () => false;
  });
  it('a refusal: remit refused (not the run\'s remit) → the lease; lease refused too → the bearer alone', async () => {
    gw.link.refuses = (_run, cred) => 'remit' in cred;
    const t = token({ tools: ['test.echo'] });
    await gw.call({ remit_token: t, run_id: 'run_FALLBACK1', step: 's', lease_id: 'lse_F1', tool: 'test.write', args: {} });
    const [first] = gw.link.events.filter((e) => e.runId === 'run_FALLBACK1');
    expect(first).toMatchObject({ kind: 'tool.refused', cred: { lease: 'lse_F1' }, refused: [{ remit: t }] });

    gw.link.refuses = (_run, cred) => !('bearer' in cred);
    await gw.call({ remit_token: t, run_id: 'run_FALLBACK2', step: 's', lease_id: 'lse_F2', tool: 'test.write', args: {} });
    const [second] = gw.link.events.filter((e) => e.runId === 'run_FALLBACK2');
    expect(second).toMatchObject({ kind: 'tool.refused', cred: { bearer: true }, refused: [{ remit: t }, { lease: 'lse_F2' }] });
  });
  it('tool.called never falls back to the bearer alone (only tool.refused may use it)', async () => {
    const tried: unknown[] = [];
    gw.link.refuses = (run, cred) => {
      if (run === 'run_FALLBACK3') tried.push(cred);
      return run === 'run_FALLBACK3';
    };
    const t = token();
    const res = await gw.call({ remit_token: t, run_id: 'run_FALLBACK3', step: 's', lease_id: 'lse_F3', tool: 'test.echo', args: {} });
    expect(res.status).toBe(200); // an event that cannot be recorded never fails the call
    expect(tried).toEqual([{ remit: t }, { lease: 'lse_F3' }]);
    expect(gw.link.events.filter((e) => e.runId === 'run_FALLBACK3')).toEqual([]);
  });
});

describe('decisions §9 order of checks', () => {
  it('token before tool existence: a bad token for an unknown tool is token_malformed', async () => {
    const res = await gw.call({ remit_token: 'x', tool: 'nope.nothing', args: {} });
    expect(res.body.refusal.reason).toBe('token_malformed');
  });
  it('tool existence before tool pattern: 404 tool_not_found even when the remit lacks it', async () => {
    const res = await gw.call({ remit_token: token({ tools: ['test.echo'] }), tool: 'nope.nothing', args: {} });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'tool_not_found', message: expect.any(String), details: { tool: 'nope.nothing' } } });
  });
  it('tool pattern before args: tool_not_in_remit wins over invalid args', async () => {
    const res = await gw.call({ remit_token: token({ tools: ['test.echo'] }), tool: 'test.sleep', args: { ms: 'soon' } });
    expect(res.body.refusal.reason).toBe('tool_not_in_remit');
  });
  it('args before scope: args_invalid (422) wins over an ungranted scope', async () => {
    const res = await gw.call({ remit_token: token({ scopes: ['none:*'] }), tool: 'test.sleep', args: { ms: 'soon' } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('args_invalid');
    expect(res.body.error.details.errors[0].path).toBe('/ms');
  });
  it('args_invalid (I 7.2, D §9) says its first problem in the message, in the words request_invalid uses', async () => {
    const res = await gw.call({ remit_token: token(), tool: 'test.sleep', args: { ms: 'soon' } });
    expect(res.body.error.message).toBe('arguments of test.sleep do not match its input schema: /ms must be an integer');
    expect(res.body.error.details.errors).toEqual([{ path: '/ms', message: 'must be an integer' }]);
  });
  it('scope before autonomy: scope_not_granted wins over autonomy_too_low', async () => {
    const res = await gw.call({ remit_token: token({ scopes: ['none:*'], autonomy: 'observe' }), tool: 'test.write', args: {} });
    expect(res.body.refusal.reason).toBe('scope_not_granted');
  });
  it('a request scope narrows: every derived scope must match it', async () => {
    const ok = await gw.call({ remit_token: token(), tool: 'test.echo', args: {}, scope: 'test:*' });
    expect(ok.status).toBe(200);
    const narrowed = await gw.call({ remit_token: token(), tool: 'test.echo', args: {}, scope: 'sql:table:x' });
    expect(narrowed.status).toBe(403);
    expect(narrowed.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('requested scope') });
  });
  it('an unbound remit with no run_id still calls; a bound remit without run_id is remit_run_mismatch', async () => {
    expect((await gw.call({ remit_token: token(), tool: 'test.echo', args: {} })).status).toBe(200);
    const res = await gw.call({ remit_token: token({ run: 'run_X' }), tool: 'test.echo', args: {} });
    expect(res.body.refusal.reason).toBe('remit_run_mismatch');
  });
});

describe('tool.called audit events (no secrets, args hashed)', () => {
  it('records tool, scopes, args hash, replayed and latency on the run', async () => {
    const t = token({ run: 'run_AUDIT' });
    await gw.call({ remit_token: t, run_id: 'run_AUDIT', step: 'fetch', lease_id: 'lse_9', tool: 'test.echo', args: { secret_looking: 'value' }, idempotency_key: 'audit-1' });
    await gw.call({ remit_token: t, run_id: 'run_AUDIT', step: 'fetch', lease_id: 'lse_9', tool: 'test.echo', args: { secret_looking: 'value' }, idempotency_key: 'audit-1' });
    const evs = gw.link.events.filter((e) => e.runId === 'run_AUDIT');
    expect(evs.map((e) => [e.kind, e.payload.replayed])).toEqual([
      ['tool.called', false],
      ['tool.called', true],
    ]);
    expect(evs[0]!.payload).toMatchObject({
      tool: 'test.echo',
      connector: 'test',
      step: 'fetch',
      lease_id: 'lse_9',
      scopes: ['test:*'],
      args_hash: canonicalHash({ secret_looking: 'value' }),
      outcome: 'ok',
      latency_ms: expect.any(Number),
    });
    expect(JSON.stringify(evs)).not.toContain('"value"');
    expect(evs[0]!.cred).toEqual({ remit: t });
  });
});

describe('idempotency (interface 4.2 rules 1–2, decisions §9)', () => {
  it('a repeat with the same arguments replays the stored result; other arguments are 409 idempotency_conflict', async () => {
    const t = token();
    const first = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-replay' });
    expect(first.body).toMatchObject({ ok: true, result: { written: { n: 1 } }, replayed: false });
    const again = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-replay' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ ok: true, result: { written: { n: 1 } }, scope: 'test:*', replayed: true });
    const conflict = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 2 }, idempotency_key: 'k-replay' });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ ok: false, error: { code: 'idempotency_conflict' } });
    const m = await gw.metrics();
    expect(metricValue(m, 'svc_gateway_calls_total', { tool: 'test.write', outcome: 'replayed' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(m, 'svc_gateway_calls_total', { tool: 'test.write', outcome: 'idempotency_conflict' })).toBeGreaterThanOrEqual(1);
  });

  it('the same key on another tool is another entry (keyed by tool and key)', async () => {
    const t = token();
    await gw.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-shared' });
    const other = await gw.call({ remit_token: t, tool: 'test.echo', args: { n: 9 }, idempotency_key: 'k-shared' });
    expect(other.body).toMatchObject({ ok: true, replayed: false });
  });

  it('a duplicate while the first is running is 409 idempotency_in_flight with Retry-After', async () => {
    const t = token();
    const slow = gw.call({ remit_token: t, tool: 'test.sleep', args: { ms: 400 }, idempotency_key: 'k-slow' });
    await new Promise((r) => setTimeout(r, 100));
    const dup = await gw.call({ remit_token: t, tool: 'test.sleep', args: { ms: 400 }, idempotency_key: 'k-slow' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('idempotency_in_flight');
    expect(dup.headers.get('retry-after')).toBe('1');
    expect((await slow).status).toBe(200);
    const after = await gw.call({ remit_token: t, tool: 'test.sleep', args: { ms: 400 }, idempotency_key: 'k-slow' });
    expect(after.body.replayed).toBe(true);
  });

  it("the worker's client waits out a call in flight elsewhere and gets its stored result (D §9 Retry-After)", async () => {
    const t = token();
    const req = { remit_token: t, run_id: 'run_x', step: 's', lease_id: 'lse_x', tool: 'test.sleep', args: { ms: 1200 }, idempotency_key: 'k-wait', scope: null };
    const first = gw.call(req);
    await new Promise((r) => setTimeout(r, 100));
    const client = new GatewayClient({ baseUrl: gw.url });
    const second = await client.call(req);
    expect(second.replayed).toBe(true);
    expect((await first).body.replayed).toBe(false);
    // It gives up after its wait budget (or when the step aborts), still retryable.
    gw.call({ ...req, idempotency_key: 'k-wait-2' });
    await new Promise((r) => setTimeout(r, 100));
    const impatient = new GatewayClient({ baseUrl: gw.url }, 30_000, 0);
    await expect(impatient.call({ ...req, idempotency_key: 'k-wait-2' })).rejects.toMatchObject({ code: 'idempotency_in_flight', deterministic: false });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new StepError('step_timeout', 'too slow')), 200);
    await expect(client.call({ ...req, idempotency_key: 'k-wait-2' }, ac.signal)).rejects.toMatchObject({ code: 'step_timeout' });
    expect(retryAfterMs(null)).toBe(1000);
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs('3600')).toBe(30_000);
  });

  it("the worker's client waits longer each time a call is still in flight, Retry-After being the least (D §9)", async () => {
    // Each ask is a tool.called event on the run: asked every second, a long write elsewhere
    // left up to 60 such events. The waits double from Retry-After (1 s), never shorter than
    // it, so no ask is made when less than Retry-After is left.
    const asks: number[] = [];
    const inFlight: typeof fetch = async () => {
      asks.push(Date.now());
      return new Response(JSON.stringify({ ok: false, error: { code: 'idempotency_in_flight', message: 'in flight', details: {} } }), { status: 409, headers: { 'retry-after': '1' } });
    };
    const client = new GatewayClient({ baseUrl: gw.url, fetch: inFlight }, 30_000, 3500);
    await expect(client.call({ remit_token: token(), run_id: 'run_x', step: 's', lease_id: 'lse_x', tool: 'test.write', args: {}, idempotency_key: 'k-backoff', scope: null })).rejects.toMatchObject({ code: 'idempotency_in_flight', deterministic: false });
    const gaps = asks.slice(1).map((at, i) => at - asks[i]!);
    expect(gaps).toHaveLength(2); // at 0, 1 and 3 s (every second: 0, 1, 2 and 3)
    expect(gaps[0]).toBeGreaterThanOrEqual(990);
    expect(gaps[1]).toBeGreaterThanOrEqual(1990);
  });

  it("the worker's client asks an unreachable gateway again, and a write whose answer was lost runs once (D §9)", async () => {
    const t = token();
    const req = { remit_token: t, run_id: 'run_x', step: 's', lease_id: 'lse_x', tool: 'test.write', args: { n: 'lost-answer' }, idempotency_key: 'k-unreachable', scope: null };
    const refused = () => Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    // Two refused connections (a restarting gateway), then a request that reaches the gateway
    // but whose answer is lost, then the real thing.
    let tries = 0;
    const flaky: typeof fetch = async (url, init) => {
      tries += 1;
      if (tries <= 2) throw refused();
      if (tries === 3) {
        await fetch(url, init);
        throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNRESET' } });
      }
      return fetch(url, init);
    };
    const res = await new GatewayClient({ baseUrl: gw.url, fetch: flaky }).call(req);
    expect(tries).toBe(4);
    expect(res).toMatchObject({ replayed: true, result: { written: { n: 'lost-answer' } } });

    // It gives up after its budget with a retryable network_error, and a step's abort stops it.
    const down: typeof fetch = async () => {
      throw refused();
    };
    await expect(new GatewayClient({ baseUrl: gw.url, fetch: down }, 30_000, 60_000, 0).call(req)).rejects.toMatchObject({ code: 'network_error', deterministic: false });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new StepError('step_timeout', 'too slow')), 300);
    await expect(new GatewayClient({ baseUrl: gw.url, fetch: down }).call(req, ac.signal)).rejects.toMatchObject({ code: 'step_timeout' });

    // A 503 that is not a quarantine (a draining gateway, one without the kernel's keys yet) is
    // waited out the same way; it never reads as connector_quarantined, which would park the run.
    let answers = 0;
    const draining: typeof fetch = async (url, init) => {
      answers += 1;
      if (answers <= 2) return new Response(JSON.stringify({ ok: false, error: { code: 'unavailable', message: 'svcd is draining', details: {} } }), { status: 503 });
      return fetch(url, init);
    };
    const after = await new GatewayClient({ baseUrl: gw.url, fetch: draining }).call({ ...req, idempotency_key: 'k-draining' });
    expect(answers).toBe(3);
    expect(after).toMatchObject({ replayed: false, result: { written: { n: 'lost-answer' } } });
    const stuck: typeof fetch = async () => new Response(JSON.stringify({ ok: false, error: { code: 'unavailable', message: 'no keys', details: {} } }), { status: 503 });
    await expect(new GatewayClient({ baseUrl: gw.url, fetch: stuck }, 30_000, 60_000, 0).call(req)).rejects.toMatchObject({ code: 'gateway_error', deterministic: false });

    // The outage's budget runs from its first failure, not from the call's start: a connection
    // that took 0.4 s to be refused still gets its retries under a 0.3 s budget.
    let slowTries = 0;
    const slowRefusal: typeof fetch = async (url, init) => {
      slowTries += 1;
      if (slowTries === 1) {
        await new Promise((r) => setTimeout(r, 400));
        throw refused();
      }
      return fetch(url, init);
    };
    expect(await new GatewayClient({ baseUrl: gw.url, fetch: slowRefusal }, 30_000, 60_000, 300).call({ ...req, idempotency_key: 'k-slow-refusal' })).toMatchObject({ replayed: false });
    expect(slowTries).toBe(2);

    // An answer that broke off after its headers (a drain's cut) is asked again too.
    let cut = 0;
    const cutOff: typeof fetch = async (url, init) => {
      cut += 1;
      if (cut > 1) return fetch(url, init);
      const body = new ReadableStream({ start: (c) => c.error(new Error('socket hang up')) });
      return new Response(body, { status: 200 });
    };
    expect(await new GatewayClient({ baseUrl: gw.url, fetch: cutOff }).call({ ...req, idempotency_key: 'k-cut' })).toMatchObject({ replayed: false });
    expect(cut).toBe(2);

    // A gateway that takes the connection and never answers (hung) is one out of reach: asked
    // again, then a retryable network_error; its tool list likewise. Never a step held forever.
    const hung = http.createServer(() => {});
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    try {
      const hungUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
      const client = new GatewayClient({ baseUrl: hungUrl }, 30_000, 60_000, 500, { call: 200, tools: 200 });
      const t0 = Date.now();
      await expect(client.call(req)).rejects.toMatchObject({ code: 'network_error', deterministic: false, message: expect.stringContaining('no answer within 200 ms') });
      await expect(client.tools()).rejects.toMatchObject({ code: 'network_error', deterministic: false });
      expect(Date.now() - t0).toBeLessThan(5000);
    } finally {
      hung.closeAllConnections();
      await new Promise((r) => hung.close(r));
    }

    // The wait for a call in flight counts from the first "in flight" answer: a request left
    // unanswered past its bound (a connector slower than fetch waits) is asked again and still
    // gets the whole wait, not what the unanswered request left of it.
    let asked = 0;
    const slowThenInFlight: typeof fetch = async (_url, init) => {
      asked += 1;
      if (asked === 1) {
        return new Promise<Response>((_resolve, reject) => init!.signal!.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
      }
      if (asked === 2) return new Response(JSON.stringify({ ok: false, error: { code: 'idempotency_in_flight', message: 'in flight', details: {} } }), { status: 409, headers: { 'retry-after': '1' } });
      return new Response(JSON.stringify({ ok: true, result: { late: true }, scope: null, scopes: [], replayed: true, latency_ms: 1 }), { status: 200 });
    };
    const patient = new GatewayClient({ baseUrl: gw.url, fetch: slowThenInFlight }, 30_000, 1200, 5000, { call: 1500, tools: 1500 });
    expect(await patient.call({ ...req, idempotency_key: 'k-slow-then-in-flight' })).toMatchObject({ replayed: true, result: { late: true } });
    expect(asked).toBe(3);

    // A port fetch refuses outright is a configuration mistake: said at once, not waited on.
    const started = Date.now();
    await expect(new GatewayClient({ baseUrl: 'http://127.0.0.1:6666' }).call(req)).rejects.toMatchObject({ code: 'network_error', message: expect.stringContaining('is one that fetch refuses to connect to') });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('an upstream error releases the claim so a retry with the same key runs', async () => {
    const t = token();
    const args = { key: 'idem-flaky', fail_times: 1 };
    const first = await gw.call({ remit_token: t, tool: 'test.flaky', args, idempotency_key: 'k-flaky' });
    expect(first.status).toBe(502);
    expect(first.body.error.code).toBe('upstream_error');
    const retry = await gw.call({ remit_token: t, tool: 'test.flaky', args, idempotency_key: 'k-flaky' });
    expect(retry.body).toMatchObject({ ok: true, result: { ok: true }, replayed: false });
  });

  it('a fault between the claim and the call (the quarantine check) releases the claim: a write never ran, so its key runs the next time', async () => {
    const t = token();
    const canaries = gw.gateway.canaries;
    const real = canaries.isQuarantined;
    canaries.isQuarantined = () => {
      throw new Error('canary state unreadable');
    };
    try {
      expect((await gw.call({ remit_token: t, tool: 'test.write', args: { n: 6 }, idempotency_key: 'k-gate-fault' })).status).toBe(500);
    } finally {
      canaries.isQuarantined = real;
    }
    const retry = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 6 }, idempotency_key: 'k-gate-fault' });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ ok: true, replayed: false });
  });

  it('no key means no idempotency: the call runs every time', async () => {
    const t = token();
    const a = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 5 } });
    const b = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 5 } });
    expect([a.body.replayed, b.body.replayed]).toEqual([false, false]);
  });
});

describe('a failing idempotency store never lets a write run twice (decisions §9, §10)', () => {
  /** Runs `fn` while the gateway's store method `name` throws `message`, then restores it. */
  async function whileStoreFails(name: 'claim' | 'complete', message: string, fn: () => Promise<void>): Promise<void> {
    const store = gw.gateway.store;
    const original = store[name];
    store[name] = async () => {
      throw new Error(message);
    };
    try {
      await fn();
    } finally {
      store[name] = original as never;
    }
  }

  it('result not stored after the upstream ran: 503 unavailable, the key stays claimed, and a repeat is outcome-unknown at once', async () => {
    // The store's own transaction fails, as on a full disk: a write's result is stored non-durably.
    const db = gw.gateway.store.db;
    const tx = db.tx.bind(db);
    db.tx = (async (fn: never, opts?: { durable?: boolean }) => {
      if (opts?.durable === false) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      return tx(fn, opts);
    }) as typeof db.tx;
    const t = token();
    let first;
    try {
      first = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-store-fails' });
    } finally {
      db.tx = tx;
    }
    expect(first.status).toBe(503);
    expect(first.body).toMatchObject({ ok: false, error: { code: 'unavailable', message: expect.stringContaining('cannot run again') } });
    // Not released, and nothing runs under it any more: the repeat is not run again, and is
    // told so now (it was 409 in flight with a Retry-After until a restart).
    const again = await gw.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-store-fails' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('idempotency_outcome_unknown');
  });

  it('a read whose result is not stored: 503, and the key is released so a retry runs it again', async () => {
    const t = token();
    await whileStoreFails('complete', 'disk I/O error', async () => {
      const first = await gw.call({ remit_token: t, tool: 'test.echo', args: { n: 1 }, idempotency_key: 'k-read-store-fails' });
      expect(first.status).toBe(503);
      expect(first.body).toMatchObject({ ok: false, error: { code: 'unavailable', message: expect.stringContaining('a retry runs it again') } });
      // Not in flight: the repeat ran (and could not store either).
      const again = await gw.call({ remit_token: t, tool: 'test.echo', args: { n: 1 }, idempotency_key: 'k-read-store-fails' });
      expect(again.status).toBe(503);
    });
    const ok = await gw.call({ remit_token: t, tool: 'test.echo', args: { n: 1 }, idempotency_key: 'k-read-store-fails' });
    expect(ok.body).toMatchObject({ ok: true, replayed: false });
    const replay = await gw.call({ remit_token: t, tool: 'test.echo', args: { n: 1 }, idempotency_key: 'k-read-store-fails' });
    expect(replay.body).toMatchObject({ ok: true, replayed: true });
  });

  it('a claim the store cannot make: 503 unavailable before anything runs', async () => {
    await whileStoreFails('claim', 'database is locked', async () => {
      const res = await gw.call({ remit_token: token(), tool: 'test.write', args: { n: 2 }, idempotency_key: 'k-claim-fails' });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ ok: false, error: { code: 'unavailable', message: expect.stringContaining('nothing ran') } });
    });
    const ok = await gw.call({ remit_token: token(), tool: 'test.write', args: { n: 2 }, idempotency_key: 'k-claim-fails' });
    expect(ok.body).toMatchObject({ ok: true, replayed: false });
  });
});

describe('idempotency across a restart (decisions §9: pending write → unknown)', () => {
  it('a write claimed when the gateway stopped is 409 idempotency_outcome_unknown, never run again; a pending read may run', async () => {
    const signer2 = testSigner();
    const g1 = await startGateway({ keys: signer2, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    const dataDir = g1.dataDir;
    await g1.gateway.close();
    await g1.app.close();
    // The process "stops" while a write and a read hold claims: nothing completes them. A
    // read's claim is not written (held in memory), but builds before 2026-11-27 wrote it as
    // a pending row: such a row is what a store may hold.
    const store = await IdempotencyStore.open(dataDir, clock);
    expect(await store.claim('test.write', 'k-crash', canonicalHash({ n: 1 }), true)).toEqual({ kind: 'claimed' });
    await store.db.run(
      "INSERT INTO gateway_idempotency (tool, idem_key, args_hash, state, writes, claimed_at, expires_at) VALUES ('test.echo', 'k-crash-read', ?, 'pending', 0, '2026-11-26T00:00:00.000Z', ?)",
      [canonicalHash({ n: 1 }), clock.now() + IDEMPOTENCY_TTL_MS],
    );
    await store.close();

    await using g2 = await startGateway({ keys: signer2, env: { SVC_GATEWAY_TEST_TOOLS: '1' }, dataDir });
    const t = mintToken(signer2, remitPayload(signer2));
    const res = await g2.call({ remit_token: t, tool: 'test.write', args: { n: 1 }, idempotency_key: 'k-crash' });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'idempotency_outcome_unknown' } });
    const read = await g2.call({ remit_token: t, tool: 'test.echo', args: { n: 1 }, idempotency_key: 'k-crash-read' });
    expect(read.body).toMatchObject({ ok: true, replayed: false });
    const conflict = await g2.call({ remit_token: t, tool: 'test.write', args: { n: 2 }, idempotency_key: 'k-crash' });
    expect(conflict.body.error.code).toBe('idempotency_conflict');
  });
});

describe('quarantine (503) and circuit (502) come after idempotency replay (decisions §9)', () => {
  it('a quarantined connector answers 503 connector_quarantined, but a stored result still replays', async () => {
    const signer3 = testSigner();
    await using g = await startGateway({ keys: signer3, env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_QUARANTINE_AFTER: '1' } });
    const t = mintToken(signer3, remitPayload(signer3));
    await g.call({ remit_token: t, tool: 'test.echo', args: { q: 1 }, idempotency_key: 'before-q' });
    await g.req('POST', '/test/shape', { shape: { ok: 'not a bool' } });
    expect((await g.req('POST', '/canaries/test/probe')).body.status).toBe('quarantined');
    const blocked = await g.call({ remit_token: t, tool: 'test.echo', args: { q: 2 }, idempotency_key: 'during-q' });
    expect(blocked.status).toBe(503);
    expect(blocked.body).toMatchObject({ ok: false, error: { code: 'connector_quarantined', details: { connector: 'test' } } });
    const replay = await g.call({ remit_token: t, tool: 'test.echo', args: { q: 1 }, idempotency_key: 'before-q' });
    expect(replay.body).toMatchObject({ ok: true, replayed: true });
    // The 503 released its claim: after release the same key runs.
    await g.req('POST', '/canaries/test/release');
    const after = await g.call({ remit_token: t, tool: 'test.echo', args: { q: 2 }, idempotency_key: 'during-q' });
    expect(after.body).toMatchObject({ ok: true, replayed: false });
  });
});

describe('circuit breaker through HTTP (interface 3, 7.2; decisions §9) with a fake clock', () => {
  it('opens after 5 upstream errors, answers 502 circuit open without calling, half-opens after the wait, closes on a good trial', async () => {
    const signer4 = testSigner();
    const c = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
    await using g = await startGateway({ keys: signer4, clock: c, random: () => 0.5, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    const t = mintToken(signer4, remitPayload(signer4, {}, Math.floor(c.now() / 1000)));
    const args = { key: 'breaker', fail_times: 5 };
    for (let i = 1; i <= 5; i++) {
      const r = await g.call({ remit_token: t, tool: 'test.flaky', args });
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe('upstream_error');
      expect(r.body.error.circuit).toBe(i === 5 ? 'open' : undefined);
      // The failure that opens the circuit says when to retry, like the calls it then turns away.
      expect(r.headers.get('retry-after')).toBe(i === 5 ? '10' : null);
      expect(r.body.error.details.retry_after_ms).toBe(i === 5 ? 10_000 : undefined);
    }
    expect(metricValue(await g.metrics(), 'svc_gateway_circuit_open', { connector: 'test' })).toBe(1);
    // Open: the flaky tool would now succeed, but the call never reaches it.
    const open = await g.call({ remit_token: t, tool: 'test.flaky', args });
    expect(open.status).toBe(502);
    expect(open.body.error).toMatchObject({ code: 'upstream_error', circuit: 'open' });
    expect(Number(open.headers.get('retry-after'))).toBe(10);
    // Other connectors' tools are not affected by this breaker, but test.echo shares it.
    expect((await g.call({ remit_token: t, tool: 'test.echo', args: {} })).status).toBe(502);
    c.advance(10_000); // random 0.5 = no jitter: exactly 10 s
    const trial = await g.call({ remit_token: t, tool: 'test.flaky', args });
    expect(trial.body).toMatchObject({ ok: true, result: { ok: true } });
    expect(metricValue(await g.metrics(), 'svc_gateway_circuit_open', { connector: 'test' })).toBe(0);
    expect((await g.call({ remit_token: t, tool: 'test.echo', args: {} })).status).toBe(200);
  });

  it('our own 4xx (args_invalid) do not count towards opening; a success resets the streak', async () => {
    const signer5 = testSigner();
    await using g = await startGateway({ keys: signer5, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    const t = mintToken(signer5, remitPayload(signer5));
    for (let i = 0; i < 6; i++) expect((await g.call({ remit_token: t, tool: 'test.sleep', args: { ms: -1 } })).status).toBe(422);
    for (let i = 0; i < 4; i++) expect((await g.call({ remit_token: t, tool: 'test.fail', args: {} })).status).toBe(502);
    expect((await g.call({ remit_token: t, tool: 'test.echo', args: {} })).status).toBe(200); // resets the streak
    for (let i = 0; i < 4; i++) expect((await g.call({ remit_token: t, tool: 'test.fail', args: {} })).body.error.circuit).toBeUndefined();
  });
});

describe('circuit breaker in the log', () => {
  it('an opening is a warning naming the connector; closing again is info', async () => {
    const signer6 = testSigner();
    const c = new ManualClock(Date.now());
    const log = capturedLogger(new Redactor());
    await using g = await startGateway({ keys: signer6, clock: c, random: () => 0.5, env: { SVC_GATEWAY_TEST_TOOLS: '1' }, logger: log.logger });
    const t = mintToken(signer6, remitPayload(signer6, {}, Math.floor(c.now() / 1000)));
    for (let i = 0; i < 5; i++) expect((await g.call({ remit_token: t, tool: 'test.fail', args: {} })).status).toBe(502);
    const lines = () => log.text().split('\n').filter((l) => l.includes('"circuit state"')).map((l) => JSON.parse(l));
    expect(lines()).toEqual([expect.objectContaining({ level: 'warn', connector: 'test', state: 'open' })]);
    c.advance(10_001);
    expect((await g.call({ remit_token: t, tool: 'test.echo', args: {} })).status).toBe(200); // the half-open trial
    expect(lines().slice(1).map((l) => [l.level, l.state])).toEqual([['info', 'half_open'], ['info', 'closed']]);
  });
});

describe('gateway HTTP surface (interface 4.2, 7.2; decisions §9, §10)', () => {
  it('GET /health, /tools and /canaries have the contract shapes', async () => {
    const h = await gw.req('GET', '/health');
    expect(h.body).toEqual({ ok: true, version: expect.any(String), connectors: { test: expect.stringMatching(/healthy|failed|quarantined/) } });
    const tools = await gw.req('GET', '/tools');
    expect(tools.body.map((d: { id: string }) => d.id)).toEqual(['test.echo', 'test.fail', 'test.flaky', 'test.shape', 'test.sleep', 'test.write']);
    expect(tools.body.find((d: { id: string }) => d.id === 'test.write')).toMatchObject({
      connector: 'test',
      description: expect.any(String),
      writes: true,
      input_schema: expect.any(Object),
      scope_derivation: 'none',
      contract: { required: { written: 'object' } },
      data_classes: {}, // present when none is configured (svc-gateway(5) ENDPOINTS)
    });
    const can = await gw.req('GET', '/canaries');
    expect(can.body.test).toMatchObject({
      status: expect.any(String),
      consecutive_failures: expect.any(Number),
      contract_diff: { missing: expect.any(Array), type_mismatch: expect.any(Array), unexpected_required: expect.any(Array) },
    });
    expect(can.body.test).toHaveProperty('last_probe_at');
    expect(can.body.test).toHaveProperty('last_ok_at');
    expect(can.body.test).toHaveProperty('last_error');
  });

  it('bad bodies are 400 request_invalid in the gateway body, never 500', async () => {
    for (const body of ['{not json', { tool: 'test.echo' }, { remit_token: 't', tool: 5 }, { remit_token: 't', tool: 'test.echo', args: [] }, { remit_token: 't', tool: 'test.echo', idempotency_key: '' }, []]) {
      const res = await gw.req('POST', '/tools/call', body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ ok: false, error: { code: 'request_invalid', message: expect.any(String), details: expect.any(Object) } });
    }
    const nf = await gw.req('POST', '/canaries/nope/probe');
    expect(nf.status).toBe(404);
    // D §10: an unknown id is not_found, naming the resource.
    expect(nf.body).toMatchObject({ ok: false, error: { code: 'not_found', details: { resource: 'connector', id: 'nope' } } });
    // However long the name (it was a 400 past 128 characters).
    const long = 'c'.repeat(300);
    for (const op of ['probe', 'release']) {
      const res = await gw.req('POST', `/canaries/${long}/${op}`);
      expect([res.status, res.body.error?.code, res.body.error?.details?.id], op).toEqual([404, 'not_found', long]);
    }
    expect((await gw.req('GET', '/nowhere')).body).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('a call refused for its body still counts in svc_gateway_calls_total, under request_invalid (svc-gateway(5) METRICS)', async () => {
    const before = await gw.metrics();
    const count = (m: string, tool: string) => metricValue(m, 'svc_gateway_calls_total', { tool, outcome: 'request_invalid' });
    const latency = (m: string) => metricValue(m, 'svc_gateway_call_latency_seconds_count');
    expect((await gw.req('POST', '/tools/call', '{not json')).status).toBe(400);
    expect((await gw.req('POST', '/tools/call', { tool: 'test.echo' })).status).toBe(400); // no token: the tool is known
    expect((await gw.req('POST', '/tools/call', { remit_token: 't', tool: 'no.such', args: [] })).status).toBe(400);
    const after = await gw.metrics();
    expect(count(after, 'test.echo') - count(before, 'test.echo')).toBe(1);
    expect(count(after, '_unknown') - count(before, '_unknown')).toBe(2);
    expect(latency(after) - latency(before)).toBe(3);
    // A call the handler answered is counted once, by the call itself.
    const ok = await gw.call({ remit_token: token(), tool: 'test.echo', args: {} });
    expect(ok.status).toBe(200);
    expect(latency(await gw.metrics()) - latency(after)).toBe(1);
  });

  it('with a token every request needs the bearer (decisions §9)', async () => {
    const s = testSigner();
    await using g = await startGateway({ keys: s, token: 'gw-secret-token' });
    expect((await g.req('GET', '/health', undefined, { authorization: 'Bearer wrong' })).status).toBe(401);
    const bad = await g.req('GET', '/tools', undefined, { authorization: 'Bearer wrong' });
    expect(bad.body).toMatchObject({ ok: false, error: { code: 'unauthorized' } });
    expect((await g.req('GET', '/health')).status).toBe(200);
    // A call without the bearer is still a call, counted under its code (svc-gateway(5) METRICS).
    expect((await g.req('POST', '/tools/call', { remit_token: 't', tool: 'x.y' }, { authorization: 'Bearer wrong' })).status).toBe(401);
    expect(metricValue((await g.req('GET', '/metrics', undefined, { authorization: 'Bearer gw-secret-token' })).text, 'svc_gateway_calls_total', { tool: '_unknown', outcome: 'unauthorized' })).toBe(1);
  });

  it('the test tools and /v1/test/shape exist only with SVC_GATEWAY_TEST_TOOLS=1', async () => {
    const s = testSigner();
    await using g = await startGateway({ keys: s });
    expect((await g.req('GET', '/tools')).body).toEqual([]);
    expect((await g.req('POST', '/test/shape', { shape: {} })).status).toBe(404);
    const res = await g.call({ remit_token: mintToken(s, remitPayload(s)), tool: 'test.echo', args: {} });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('tool_not_found');
  });
});

describe('a write that finishes after its timeout (decisions §9: never executed twice)', () => {
  it('is answered with its result and stored under its key, not released for a second run', async () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-late-write-'));
    const g = await startGateway({ keys: signer, clock: new ManualClock(Date.parse('2026-11-22T10:00:00.000Z')), doc: { connectors: [{ name: 'files', type: 'fs', root, timeout_ms: 100 }] } });
    try {
      // A slow disk: the fs connector cannot stop a write it has begun.
      const c = (g.gateway as unknown as { connectors: Map<string, { call: (...a: unknown[]) => Promise<unknown> }> }).connectors.get('files')!;
      const original = c.call.bind(c);
      let runs = 0;
      c.call = async (op: unknown, args: unknown, ctx: unknown) => {
        if (op === 'write') {
          runs++;
          await new Promise((r) => setTimeout(r, 400));
        }
        return original(op, args, ctx);
      };
      const token = mintToken(signer, remitPayload(signer, { tools: ['files.*'], scopes: ['fs:path:*'], autonomy: 'autonomous' }, Math.floor(Date.parse('2026-11-22T10:00:00.000Z') / 1000)));
      const first = await g.call({ remit_token: token, tool: 'files.write', args: { path: 'a.txt', content: 'x' }, idempotency_key: 'late-1' });
      expect(first.status).toBe(200);
      expect(first.body.result).toMatchObject({ path: 'a.txt' });
      const repeat = await g.call({ remit_token: token, tool: 'files.write', args: { path: 'a.txt', content: 'x' }, idempotency_key: 'late-1' });
      expect(repeat.status).toBe(200);
      expect(repeat.body).toMatchObject({ ok: true, replayed: true, result: first.body.result });
      expect(runs).toBe(1);
      expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('x');
    } finally {
      await g.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
