/**
 * Gateway conformance fixes found by a black-box pass over interface 4.2 / 5.3 / 7.2 and
 * decisions §9 / §10:
 * - D §10: a body nested too deep for the recursive walks after parsing is a 400, never a 500
 *   (it used to overflow the stack in canonical hashing: 500 `internal`; a deep
 *   POST /v1/test/shape broke every later probe with a 500). So is a number out of double
 *   range (`1e400` parses to Infinity, which the canonical args hash refused with a 500).
 * - I 5.3 step 4 / I 6.2: a remit_run_mismatch refusal is recorded on the run the token is bound
 *   to as well as on the call's run (before, a call with another or no run_id left no event).
 * - D §9: the test connector's probe names `test.shape`; `test.flaky` works without `key`.
 * - I 4.2 metrics: svc_gateway_calls_total has samples before the first call.
 * - D §10 / I 7.2: an fs path with a NUL byte is 422 args_invalid, not a 502 upstream error.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bodyProblem, MAX_BODY_DEPTH } from '../../src/encoding/json-limits.js';
import { tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner, type TestSigner } from '../helpers/remit-token.js';
import { metricValue, startGateway, type TestGateway } from './helpers.js';

const signer: TestSigner = testSigner();
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const nowS = () => Math.floor(clock.now() / 1000);
const token = (over: Parameters<typeof remitPayload>[1] = {}) => mintToken(signer, remitPayload(signer, over, nowS()));
const nested = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

const root = tempDir('svc-gw-conf-');
let gw: TestGateway;
beforeAll(async () => {
  mkdirSync(join(root, 'files'), { recursive: true });
  gw = await startGateway({
    keys: signer,
    clock,
    env: { SVC_GATEWAY_TEST_TOOLS: '1' },
    random: () => 0.5,
    doc: { connectors: [{ name: 'files', type: 'fs', root: join(root, 'files') }] },
  });
});
afterAll(async () => {
  await gw?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('decisions §10: deeply nested bodies are 400 request_invalid, never 500', () => {
  it('bodyProblem finds the first value past the depth limit, iteratively', () => {
    expect(bodyProblem({ a: [1, { b: 2 }] }, 3)).toBeNull();
    expect(bodyProblem({ a: [1, { b: {} }] }, 3)).toEqual({ path: '/a/1/b', message: expect.stringContaining('nested deeper than 3') });
    expect(bodyProblem(JSON.parse(nested(100_000)))?.path).toBe('/a'.repeat(MAX_BODY_DEPTH));
    expect(bodyProblem('x', 0)).toBeNull();
  });

  it('POST /v1/tools/call with args nested 5000 deep: 400 with the gateway error body', async () => {
    const res = await gw.req('POST', '/tools/call', `{"remit_token":${JSON.stringify(token())},"tool":"test.echo","args":${nested(5000)}}`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'request_invalid', details: { path: expect.stringMatching(/^\/args\/a/) } } });
  });

  it('a number out of range (1e400) in args or a test shape is 400 request_invalid with its path', async () => {
    expect(bodyProblem({ a: [1, Infinity] })).toEqual({ path: '/a/1', message: expect.any(String) });
    const res = await gw.req('POST', '/tools/call', `{"remit_token":${JSON.stringify(token())},"tool":"test.echo","args":{"x":1e400},"idempotency_key":"inf-1"}`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'request_invalid', details: { path: '/args/x' } } });
    const shape = await gw.req('POST', '/test/shape', '{"shape":{"ok":-1e400}}');
    expect(shape.status).toBe(400);
    expect(shape.body.error.details.path).toBe('/shape/ok');
  });

  it('args at the limit still work', async () => {
    const res = await gw.call({ remit_token: token(), tool: 'test.echo', args: JSON.parse(nested(MAX_BODY_DEPTH - 2)) });
    expect(res.status).toBe(200);
  });

  it('POST /v1/test/shape with a deep shape is 400 and later probes still answer 200', async () => {
    const res = await gw.req('POST', '/test/shape', `{"shape":${nested(5000)}}`);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('request_invalid');
    const probe = await gw.req('POST', '/canaries/test/probe');
    expect(probe.status).toBe(200);
    expect(probe.body.status).toBe('healthy');
  });
});

describe('interface 5.3 step 4: remit_run_mismatch is recorded on the bound run too', () => {
  it('call for another run: tool.refused on both runs; the bound run gets it with the remit header', async () => {
    const t = token({ run: 'run_BOUND1' });
    const res = await gw.call({ remit_token: t, tool: 'test.echo', args: {}, run_id: 'run_CALLED1', step: 's', lease_id: null });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ ok: false, refusal: { reason: 'remit_run_mismatch', detail: expect.any(String) } });
    const called = gw.link.events.filter((e) => e.runId === 'run_CALLED1');
    const bound = gw.link.events.filter((e) => e.runId === 'run_BOUND1');
    expect(called).toHaveLength(1);
    expect(called[0]).toMatchObject({ kind: 'tool.refused', payload: { reason: 'remit_run_mismatch', run_id: 'run_CALLED1' } });
    expect(called[0]!.cred).toEqual({ bearer: true }); // no lease given, the token is not this run's
    expect(bound).toHaveLength(1);
    expect(bound[0]).toMatchObject({ kind: 'tool.refused', payload: { reason: 'remit_run_mismatch', run_id: 'run_CALLED1' } });
    expect(bound[0]!.cred).toEqual({ remit: t });
  });

  it('call without run_id: the bound run still gets its tool.refused event', async () => {
    const res = await gw.call({ remit_token: token({ run: 'run_BOUND2' }), tool: 'test.echo', args: {} });
    expect(res.body.refusal.reason).toBe('remit_run_mismatch');
    expect(gw.link.events.filter((e) => e.runId === 'run_BOUND2').map((e) => e.kind)).toEqual(['tool.refused']);
  });
});

describe('decisions §9 test tools', () => {
  it('the test connector probe names test.shape (status and repair file)', async () => {
    expect((await gw.req('GET', '/canaries')).body.test.probe.tool).toBe('test.shape');
    await gw.req('POST', '/test/shape', { shape: { ok: 1 } });
    await gw.req('POST', '/canaries/test/probe');
    const q = await gw.req('POST', '/canaries/test/probe');
    expect(q.body.status).toBe('quarantined');
    const files = readdirSync(join(gw.dataDir, 'repairs')).filter((f) => f.startsWith('test-'));
    expect(files).toHaveLength(1);
    const repair = JSON.parse(readFileSync(join(gw.dataDir, 'repairs', files[0]!), 'utf8'));
    expect(repair).toMatchObject({ contract: { required: { ok: 'bool' } }, observed_shape: { ok: 'number' }, diff: { type_mismatch: [{ field: 'ok' }] }, probe: { tool: 'test.shape' } });
    await gw.req('POST', '/test/shape', { shape: { ok: true } });
    expect((await gw.req('POST', '/canaries/test/release')).body.status).toBe('healthy');
  });

  it('test.flaky without key: fail_times upstream errors, then {ok: true}', async () => {
    const first = await gw.call({ remit_token: token(), tool: 'test.flaky', args: { fail_times: 1 } });
    expect(first.status).toBe(502);
    expect(first.body.error.code).toBe('upstream_error');
    const second = await gw.call({ remit_token: token(), tool: 'test.flaky', args: { fail_times: 1 } });
    expect(second.status).toBe(200);
    expect(second.body.result).toEqual({ ok: true });
  });
});

describe('interface 4.2 metrics exist before any call', () => {
  it('a fresh gateway exposes every gateway metric with samples', async () => {
    await using fresh = await startGateway({ keys: signer, clock, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    const text = await fresh.metrics();
    for (const name of ['svc_gateway_calls_total', 'svc_gateway_refusals_total', 'svc_gateway_call_latency_seconds_count', 'svc_gateway_canary_status', 'svc_gateway_circuit_open']) {
      expect(text).toMatch(new RegExp(`^${name}(\\{| )`, 'm'));
    }
    expect(metricValue(text, 'svc_gateway_calls_total', { tool: 'test.echo', outcome: 'ok' })).toBe(0);
  });
});

describe('fs connector: bad paths are the caller\'s fault (interface 7.2, decisions §10)', () => {
  it('a NUL byte in path is 422 args_invalid, not a 502', async () => {
    const res = await gw.call({ remit_token: token({ tools: ['files.*'], scopes: ['fs:path:*'] }), tool: 'files.read', args: { path: 'a\u0000b' } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'args_invalid', details: { errors: [{ path: '/path' }] } } });
  });
});
