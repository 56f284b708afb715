/**
 * The letter of interface.md (I) and decisions.md (D), black-box, against the built svcd
 * (dist/daemon/main.js) over HTTP: the statements the rest of the suite checks only loosely or
 * not at all — exact response members, id and timestamp formats, defaults and limits, the
 * error envelope and code of each condition the spec names. One daemon for the whole file.
 */
import { createHash, createPublicKey, verify } from 'node:crypto';
import { join } from 'node:path';
import canonicalizeImpl from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { expectError, request, type Answer } from '../helpers/http-answer.js';
import { APPROVER, REFUNDS_POLICY, REQUESTER, refundsBundle } from './run-fixtures.js';

/** JCS (RFC 8785) straight from the package, not through the code under test. */
const canonicalize = canonicalizeImpl as unknown as (value: unknown) => string;

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ULID = '[0-9A-HJKMNP-TV-Z]{26}';
const B64URL = /^[A-Za-z0-9_-]+$/;

let svcd: SpawnedSvcd;
const publisher = generatePublisherKey();

beforeAll(async () => {
  const dir = tempDir('svc-spec-letter-');
  svcd = await spawnSvcd(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', `${publisher.key_id}:${publisher.public_key}`], {
    SVC_TOKEN: '',
  });
}, 30_000);

afterAll(async () => {
  await svcd?.stop();
});

/** A request to the kernel below /v1: a body is sent as JSON unless it is already a string. */
const k = (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> => request(svcd.kernelUrl!, path, init);

function b64urlJson(part: string): any {
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
}

const remitRequest = (over: Record<string, unknown> = {}) => ({
  tools: ['billing.*'],
  scopes: ['sql:table:*'],
  grants: ['pii'],
  spend: { tokens: 100_000, usd: 5 },
  autonomy: 'supervised',
  ttl_seconds: 3600,
  policy_set: [],
  requested_by: REQUESTER,
  ...over,
});

async function pushBundle(bundle = refundsBundle()): Promise<Answer> {
  return k('/bundles', { body: { bundle, signature: signBundle(bundle, publisher) } });
}

let bundleId: string;
async function newRun(over: Record<string, unknown> = {}, input: unknown = { invoice_id: 'inv-1', ticket: 't' }): Promise<{ run_id: string; remit_id: string; token: string }> {
  const remit = await k('/remits', { body: remitRequest(over) });
  expect(remit.status).toBe(201);
  const run = await k('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input, remit_id: remit.body.remit_id, requested_by: REQUESTER } });
  expect(run.status).toBe(201);
  return { run_id: run.body.run_id, remit_id: remit.body.remit_id, token: remit.body.token };
}

async function takeLease(kinds: string[], extra: Record<string, unknown> = {}): Promise<Answer> {
  return k('/leases', { body: { worker_id: 'w-spec', kinds, ...extra } });
}

/** Drains every ready step the tests before left behind, so each test leases its own. */
async function drainReady(): Promise<void> {
  for (;;) {
    const l = await takeLease(['model', 'tool', 'action', 'compensation'], { ttl_seconds: 1 });
    if (l.status === 204) return;
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'drain', message: 'drain' }, deterministic: true } });
  }
}

describe('I 4.1 health and keys; D §1, §2 formats', () => {
  it('GET /health is {ok, version, uptime_s, runs: {running, parked}} with numbers', async () => {
    const h = await k('/health');
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ ok: true, version: expect.any(String), uptime_s: expect.any(Number), runs: { running: expect.any(Number), parked: expect.any(Number) } });
    expect(Number.isInteger(h.body.runs.running) && Number.isInteger(h.body.runs.parked)).toBe(true);
  });

  it('GET /keys: ed25519, public_key base64url (no padding) of 32 bytes, key_id cp- + 16 chars of base64url(sha256(pk)), previous array', async () => {
    const keys = await k('/keys');
    expect(keys.status).toBe(200);
    expect(keys.body.algorithm).toBe('ed25519');
    expect(keys.body.public_key).toMatch(B64URL);
    const pk = Buffer.from(keys.body.public_key, 'base64url');
    expect(pk.length).toBe(32);
    expect(keys.body.key_id).toBe(`cp-${createHash('sha256').update(pk).digest('base64url').slice(0, 16)}`);
    expect(Array.isArray(keys.body.previous)).toBe(true);
  });
});

describe('I 4.1 / 7.1 / D §4 bundles', () => {
  it('201 {bundle_id, name, version}; bnd_ + first 26 hex of sha256(JCS(bundle)); identical re-post 200 same id; other content 409', async () => {
    const bundle = refundsBundle();
    const first = await pushBundle(bundle);
    expect(first.status).toBe(201);
    const hex = createHash('sha256').update(canonicalize(bundle)).digest('hex').slice(0, 26);
    expect(first.body).toEqual({ bundle_id: `bnd_${hex}`, name: 'refunds', version: '1.0.0' });
    bundleId = first.body.bundle_id;
    const again = await pushBundle(bundle);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const changed = await pushBundle(refundsBundle({ description: 'other' }));
    expectError(changed, 409, 'bundle_version_exists');
  });

  it('GET /bundles lists it and GET /bundles/{id} answers it; an unknown id is 404 not_found {resource, id}', async () => {
    const list = await k('/bundles');
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).toContain(bundleId);
    const one = await k(`/bundles/${bundleId}`);
    expect(one.status).toBe(200);
    expect(JSON.stringify(one.body)).toContain('refunds');
    const missing = await k('/bundles/bnd_00000000000000000000000000');
    const details = expectError(missing, 404, 'not_found');
    expect(details).toMatchObject({ resource: expect.any(String), id: 'bnd_00000000000000000000000000' });
  });

  it('unsigned, or signed by an unknown key: 422 bundle_signature_invalid', async () => {
    const bundle = refundsBundle({ version: '9.0.0' });
    expectError(await k('/bundles', { body: { bundle } }), 422, 'bundle_signature_invalid');
    const stranger = generatePublisherKey();
    expectError(await k('/bundles', { body: { bundle, signature: signBundle(bundle, stranger) } }), 422, 'bundle_signature_invalid');
  });

  it('a bad name is 422 bundle_invalid with details.path a JSON pointer (D §4)', async () => {
    const bad = await pushBundle(refundsBundle({ name: 'Refunds!' } as never));
    const details = expectError(bad, 422, 'bundle_invalid');
    expect(details.path).toBe('/name');
    const ver = await pushBundle(refundsBundle({ version: 'one' } as never));
    expect(expectError(ver, 422, 'bundle_invalid').path).toBe('/version');
  });
});

describe('I 4.1 / D §5 policies', () => {
  it('201 {policy_id: pol_ULID, name, version}; a parse error is 422 policy_invalid with line, column, message', async () => {
    const ok = await k('/policies', { body: { name: 'refunds', version: '1', source: REFUNDS_POLICY } });
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual({ policy_id: expect.stringMatching(new RegExp(`^pol_${ULID}$`)), name: 'refunds', version: '1' });
    const bad = await k('/policies', { body: { name: 'broken', version: '1', source: 'allow x\n  when action.tool ==\n' } });
    const details = expectError(bad, 422, 'policy_invalid');
    expect(details).toMatchObject({ line: expect.any(Number), column: expect.any(Number), message: expect.any(String) });
    const dup = await k('/policies', { body: { name: 'dup', version: '1', source: 'allow a when true\nallow a when true\n' } });
    expect(expectError(dup, 422, 'policy_invalid').line).toBe(2);
  });

  it('GET /policies, /policies/{name}, /policies/{name}/{version} answer 200; unknown name 404 not_found', async () => {
    for (const p of ['/policies', '/policies/refunds', '/policies/refunds/1']) expect((await k(p)).status).toBe(200);
    expectError(await k('/policies/nope'), 404, 'not_found');
    expectError(await k('/policies/refunds/9'), 404, 'not_found');
  });

  it('POST /policies/test: {cases, flips: [{index, a, b, rule_a, rule_b}]} and cases = corpus length (D 5.3)', async () => {
    const action = { tool: 'billing.refund', args: { amount: 500 } };
    const t = await k('/policies/test', {
      body: { policy_a: { name: 'refunds', version: '1' }, policy_b: { source: 'allow all\n  when true\n' }, corpus: [{ action, run: {} }, { action: { tool: 'billing.refund', args: { amount: 5 } }, run: {} }] },
    });
    expect(t.status).toBe(200);
    expect(t.body.cases).toBe(2);
    expect(t.body.flips).toEqual([{ index: 0, a: 'approval_required', b: 'allow', rule_a: 'refunds/large_refund', rule_b: expect.any(String) }]);
  });
});

describe('I 4.1 / 5.4 / D §3 remits', () => {
  it('201 {remit_id, token, expires_at}; token krt1.<key_id>.<payload>.<signature>, signed by GET /keys, iat = nbf = now, exp = iat + ttl', async () => {
    const before = Math.floor(Date.now() / 1000);
    const m = await k('/remits', { body: remitRequest({ ttl_seconds: 600 }) });
    expect(m.status).toBe(201);
    expect(Object.keys(m.body).sort()).toEqual(['expires_at', 'remit_id', 'token']);
    expect(m.body.remit_id).toMatch(new RegExp(`^rmt_${ULID}$`));
    expect(m.body.expires_at).toMatch(ISO_MS);
    const parts = m.body.token.split('.');
    expect(parts).toHaveLength(4);
    expect(parts[0]).toBe('krt1');
    for (const p of parts.slice(1)) expect(p).toMatch(B64URL);
    const keys = (await k('/keys')).body;
    expect(parts[1]).toBe(keys.key_id);
    const payloadBytes = Buffer.from(parts[2], 'base64url');
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(keys.public_key, 'base64url')]);
    expect(verify(null, payloadBytes, createPublicKey({ key: spki, format: 'der', type: 'spki' }), Buffer.from(parts[3], 'base64url'))).toBe(true);
    const payload = JSON.parse(payloadBytes.toString('utf8'));
    expect(payload).toMatchObject({ rid: m.body.remit_id, iss: keys.key_id, tools: ['billing.*'], scopes: ['sql:table:*'], grants: ['pii'], autonomy: 'supervised', policy_set: [], requested_by: REQUESTER, spend: { tokens: 100_000, usd: 5 } });
    expect(payload.iat).toBe(payload.nbf);
    expect(payload.iat).toBeGreaterThanOrEqual(before);
    expect(payload.exp).toBe(payload.iat + 600);
    expect(new Date(m.body.expires_at).getTime()).toBe(payload.exp * 1000);
  });

  it('ttl_seconds defaults to 3600 (D §3)', async () => {
    const { ttl_seconds: _drop, ...noTtl } = remitRequest();
    const m = await k('/remits', { body: noTtl });
    expect(m.status).toBe(201);
    const p = b64urlJson(m.body.token.split('.')[2]);
    expect(p.exp - p.iat).toBe(3600);
  });

  it('ttl_seconds at most 2592000: 2592000 is accepted, one more is refused in the envelope (D §3, §10)', async () => {
    expect((await k('/remits', { body: remitRequest({ ttl_seconds: 2_592_000 }) })).status).toBe(201);
    const over = await k('/remits', { body: remitRequest({ ttl_seconds: 2_592_001 }) });
    expectError(over, 400, 'request_invalid');
  });

  it('GET /remits/{id}: the payload plus parent_id and run_id', async () => {
    const m = await k('/remits', { body: remitRequest() });
    const r = await k(`/remits/${m.body.remit_id}`);
    expect(r.status).toBe(200);
    const payload = b64urlJson(m.body.token.split('.')[2]);
    expect(r.body).toMatchObject({ ...payload, parent_id: null, run_id: null });
  });

  it('derive: 201 {remit_id, parent_id, token, expires_at}; the child records parent and has no run', async () => {
    const m = await k('/remits', { body: remitRequest() });
    const d = await k(`/remits/${m.body.remit_id}/derive`, { body: { tools: ['billing.lookup'], spend: { tokens: 10, usd: 0.5 } } });
    expect(d.status).toBe(201);
    expect(Object.keys(d.body).sort()).toEqual(['expires_at', 'parent_id', 'remit_id', 'token']);
    expect(d.body.parent_id).toBe(m.body.remit_id);
    const p = b64urlJson(d.body.token.split('.')[2]);
    expect(p.parent).toBe(m.body.remit_id);
    expect(p.run).toBeUndefined();
    expect(p.scopes).toEqual(['sql:table:*']);
  });

  it.each([
    [{ tools: ['crm.*'] }, 'tools'],
    [{ scopes: ['http:host:*'] }, 'scopes'],
    [{ grants: ['pii', 'finance'] }, 'grants'],
    [{ spend: { tokens: 100_001, usd: 1 } }, 'spend'],
    [{ autonomy: 'autonomous' }, 'autonomy'],
    [{ ttl_seconds: 7200 }, 'exp'],
    [{ policy_set: ['refunds'] }, null],
    [{ requested_by: { ...REQUESTER, id: 'bob' } }, 'requested_by'],
  ])('derive %j: 422 remit_widens with details.field %s, or accepted when null (I 5.4)', async (change, field) => {
    const m = await k('/remits', { body: remitRequest() });
    const d = await k(`/remits/${m.body.remit_id}/derive`, { body: change });
    if (field === null) {
      expect(d.status).toBe(201);
      return;
    }
    expect(expectError(d, 422, 'remit_widens').field).toMatch(new RegExp(`^${field}`));
  });

  it('removing a policy from policy_set widens (I 5.4)', async () => {
    const m = await k('/remits', { body: remitRequest({ policy_set: ['refunds'] }) });
    const d = await k(`/remits/${m.body.remit_id}/derive`, { body: { policy_set: [] } });
    expect(expectError(d, 422, 'remit_widens').field).toBe('policy_set');
  });
});

describe('I 4.1 / D §6 runs', () => {
  it('POST /runs 201 {run_id, state}; the remit gets run_id; a second run on it 409 remit_bound', async () => {
    const m = await k('/remits', { body: remitRequest() });
    const body = { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: m.body.remit_id, requested_by: REQUESTER };
    const run = await k('/runs', { body });
    expect(run.status).toBe(201);
    expect(run.body).toEqual({ run_id: expect.stringMatching(new RegExp(`^run_${ULID}$`)), state: 'running' });
    expect((await k(`/remits/${m.body.remit_id}`)).body.run_id).toBe(run.body.run_id);
    expectError(await k('/runs', { body }), 409, 'remit_bound');
  });

  it('input failing the schema is 422 input_invalid; another requester 422 requester_mismatch; an unknown bundle 404', async () => {
    const fresh = async () => (await k('/remits', { body: remitRequest() })).body.remit_id;
    expectError(await k('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { ticket: 'no invoice' }, remit_id: await fresh(), requested_by: REQUESTER } }), 422, 'input_invalid');
    expectError(
      await k('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: await fresh(), requested_by: { ...REQUESTER, id: 'mallory' } } }),
      422,
      'requester_mismatch',
    );
    expectError(await k('/runs', { body: { bundle_id: 'bnd_00000000000000000000000000', workflow: 'refund', input: {}, remit_id: await fresh(), requested_by: REQUESTER } }), 404, 'not_found');
  });

  it('GET /runs/{id} has every member D §6 lists', async () => {
    const { run_id, remit_id } = await newRun();
    const r = await k(`/runs/${run_id}`);
    expect(r.status).toBe(200);
    for (const key of [
      'run_id', 'state', 'parked_reason', 'bundle_id', 'bundle', 'workflow', 'department', 'input', 'requested_by', 'remit_id', 'policies',
      'current_step', 'steps', 'usage', 'budget', 'pending_approval_id', 'output', 'error', 'created_at', 'updated_at', 'last_seq', 'head_hash', 'head_signature',
    ]) expect(r.body, key).toHaveProperty(key);
    expect(r.body).toMatchObject({ run_id, state: 'running', parked_reason: null, bundle_id: bundleId, bundle: { name: 'refunds', version: '1.0.0' }, workflow: 'refund', department: 'support', remit_id, requested_by: REQUESTER, usage: { tokens: 0, usd: 0 }, budget: { tokens: 100_000, usd: 5 } });
    expect(r.body.created_at).toMatch(ISO_MS);
    expect(r.body.updated_at).toMatch(ISO_MS);
    expect(r.body.steps.triage).toMatchObject({ state: expect.any(String), attempt: expect.any(Number) });
  });

  it('GET /runs: {runs, next}, newest first, limit pages with an opaque cursor, next null on the last page; filters state and department', async () => {
    const a = await newRun();
    const b = await newRun();
    const page = await k('/runs?limit=1');
    expect(page.status).toBe(200);
    expect(page.body.runs).toHaveLength(1);
    expect(page.body.runs[0].run_id).toBe(b.run_id);
    expect(typeof page.body.next).toBe('string');
    const second = await k(`/runs?limit=1&after=${encodeURIComponent(page.body.next)}`);
    expect(second.body.runs[0].run_id).toBe(a.run_id);
    const all = await k('/runs?limit=500');
    expect(all.body.next).toBeNull();
    const ids = all.body.runs.map((r: any) => r.run_id);
    expect(ids).toEqual([...ids].sort().reverse());
    const dept = await k('/runs?department=nobody');
    expect(dept.body).toEqual({ runs: [], next: null });
    const support = await k('/runs?department=support&state=running&limit=500');
    expect(support.body.runs.length).toBeGreaterThan(1);
    expect(support.body.runs.every((r: any) => r.state === 'running' && r.department === 'support')).toBe(true);
  });

  it('GET /runs limit above 500 or not an integer is refused in the envelope (D §6, §10)', async () => {
    for (const bad of ['501', 'x', '0', '-1', '1.5']) expectError(await k(`/runs?limit=${bad}`), 400, 'request_invalid');
  });

  it('GET /runs with 51 runs and no limit answers 50 (default) and a cursor', async () => {
    const have = (await k('/runs?limit=500')).body.runs.length;
    for (let i = have; i < 51; i++) await newRun();
    const page = await k('/runs');
    expect(page.body.runs).toHaveLength(50);
    expect(page.body.next).not.toBeNull();
  });
});

describe('I 4.1 / 6 / D §7 events', () => {
  it('events: seq from 1, prev_hash "" then the previous hash, at ISO ms, hash = sha256(JCS({run_id, seq, prev_hash, kind, payload, actor, at}))', async () => {
    const { run_id } = await newRun();
    const ev = await k(`/runs/${run_id}/events`);
    expect(ev.status).toBe(200);
    expect(ev.body).toMatchObject({ events: expect.any(Array), next_seq: expect.any(Number) });
    const events = ev.body.events;
    expect(events[0].seq).toBe(1);
    expect(events[0].prev_hash).toBe('');
    expect(events[0].kind).toBe('run.created');
    events.forEach((e: any, i: number) => {
      expect(Object.keys(e).sort()).toEqual(expect.arrayContaining(['actor', 'at', 'hash', 'kind', 'payload', 'prev_hash', 'seq']));
      expect(e.at).toMatch(ISO_MS);
      if (i > 0) expect(e.prev_hash).toBe(events[i - 1].hash);
      const want = createHash('sha256').update(canonicalize({ run_id, seq: e.seq, prev_hash: e.prev_hash, kind: e.kind, payload: e.payload, actor: e.actor, at: e.at })).digest('hex');
      expect(e.hash).toBe(want);
    });
    expect(ev.body.next_seq).toBe(events.at(-1).seq + 1);
  });

  it('POST events: no header 401 credential_required, a bad one 401 credential_invalid, another kind 422 event_kind_not_external, a note 201 {seq, hash}', async () => {
    const { run_id, token } = await newRun();
    const note = { kind: 'note', payload: { text: 'hello' }, actor: { id: 'w', role: 'worker' } };
    expectError(await k(`/runs/${run_id}/events`, { body: note }), 401, 'credential_required');
    expectError(await k(`/runs/${run_id}/events`, { body: note, headers: { 'X-Svc-Lease': 'lse_01J00000000000000000000000' } }), 401, 'credential_invalid');
    expectError(await k(`/runs/${run_id}/events`, { body: note, headers: { 'X-Svc-Remit': 'krt1.x.y.z' } }), 401, 'credential_invalid');
    expectError(await k(`/runs/${run_id}/events`, { body: { ...note, kind: 'run.completed' }, headers: { 'X-Svc-Remit': token } }), 422, 'event_kind_not_external');
    const ok = await k(`/runs/${run_id}/events`, { body: note, headers: { 'X-Svc-Remit': token } });
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual({ seq: expect.any(Number), hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    for (const kind of ['tool.called', 'tool.refused', 'model.called']) {
      expect((await k(`/runs/${run_id}/events`, { body: { ...note, kind }, headers: { 'X-Svc-Remit': token } })).status, kind).toBe(201);
    }
  });

  it('a remit of another run is not a credential for this run', async () => {
    const a = await newRun();
    const b = await newRun();
    const posted = await k(`/runs/${a.run_id}/events`, { body: { kind: 'note', payload: {}, actor: { id: 'w', role: 'worker' } }, headers: { 'X-Svc-Remit': b.token } });
    expect(posted.status).toBe(401);
  });

  it('events limit: default 100, at most 1000; from_seq pages (D §7)', async () => {
    const { run_id } = await newRun();
    const page = await k(`/runs/${run_id}/events?from_seq=1&limit=1`);
    expect(page.body.events).toHaveLength(1);
    expect(page.body.next_seq).toBe(2);
    expectError(await k(`/runs/${run_id}/events?limit=1001`), 400, 'request_invalid');
    expect((await k(`/runs/${run_id}/events?limit=1000`)).status).toBe(200);
  });

  it('POST replay: exactly the members of I 4.1', async () => {
    const { run_id } = await newRun();
    const r = await k(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ chain_valid: true, events: expect.any(Number), state_matches: true, decisions: expect.any(Number), decision_mismatches: [], chain_errors: [] });
    expect(r.body).toHaveProperty('state');
  });
});

describe('I 2.6 / 4.1 / D §6 leases', () => {
  it('POST /leases: 204 with no body when idle', async () => {
    await drainReady();
    const idle = await takeLease(['model']);
    expect(idle.status).toBe(204);
    expect(idle.text).toBe('');
  });

  it('the lease object: members of I 2.6, heartbeat_seconds = floor(ttl/3), context members, run-bound remit_token, budget (D §8)', async () => {
    await drainReady();
    const { run_id, remit_id } = await newRun();
    const l = await takeLease(['model'], { ttl_seconds: 10 });
    expect(l.status).toBe(200);
    expect(l.body).toMatchObject({ lease_id: expect.stringMatching(new RegExp(`^lse_${ULID}$`)), run_id, step: 'triage', attempt: 1, heartbeat_seconds: 3, step_def: expect.any(Object) });
    expect(l.body.expires_at).toMatch(ISO_MS);
    const ms = new Date(l.body.expires_at).getTime() - Date.now();
    expect(ms).toBeGreaterThan(8_000);
    expect(ms).toBeLessThanOrEqual(10_000);
    const c = l.body.context;
    for (const key of ['input', 'steps', 'run', 'remit_token', 'remit', 'prompts', 'mock', 'tools', 'pacing', 'approved_actions', 'prior_events']) expect(c, key).toHaveProperty(key);
    expect(c.run).toMatchObject({ id: run_id, workflow: 'refund', requested_by: REQUESTER, department: 'support' });
    expect(c.run).toHaveProperty('bundle');
    expect(c.remit).toMatchObject({ autonomy: 'supervised', grants: ['pii'], tools: ['billing.*'], scopes: ['sql:table:*'] });
    expect(c.budget).toEqual({ tokens: 100_000, usd: 5, used_tokens: 0, used_usd: 0 });
    expect(c.input).toEqual({ invoice_id: 'inv-1', ticket: 't' });
    const p = b64urlJson(c.remit_token.split('.')[2]);
    expect(p).toMatchObject({ rid: remit_id, run: run_id });
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('ttl_seconds: default 60, a ttl of 2 gives heartbeat_seconds 1, above 3600 refused (D §6)', async () => {
    await drainReady();
    await newRun();
    expectError(await takeLease(['model'], { ttl_seconds: 3601 }), 400, 'request_invalid');
    const l = await takeLease(['model']);
    expect(l.body.heartbeat_seconds).toBe(20);
    const ms = new Date(l.body.expires_at).getTime() - Date.now();
    expect(ms).toBeGreaterThan(55_000);
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
    await newRun();
    const short = await takeLease(['model'], { ttl_seconds: 2 });
    expect(short.body.heartbeat_seconds).toBe(1);
    await k(`/leases/${short.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('kinds outside model, tool, action, compensation: 400 request_invalid', async () => {
    expectError(await takeLease(['model', 'bogus']), 400, 'request_invalid');
  });

  it('wait_seconds above 30 is refused (D §6)', async () => {
    expectError(await takeLease(['model'], { wait_seconds: 31 }), 400, 'request_invalid');
  });

  it('steps are handed out oldest-ready first (D §6)', async () => {
    await drainReady();
    const a = await newRun();
    const b = await newRun();
    const first = await takeLease(['model']);
    const second = await takeLease(['model']);
    expect([first.body.run_id, second.body.run_id]).toEqual([a.run_id, b.run_id]);
    for (const l of [first, second]) await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('heartbeat {expires_at}; complete {run_state, next_step}; then heartbeat, complete, fail on the ended lease: 410 lease_expired; unknown lease 404', async () => {
    await drainReady();
    await newRun();
    const l = await takeLease(['model']);
    const hb = await k(`/leases/${l.body.lease_id}/heartbeat`, { method: 'POST' });
    expect(hb.status).toBe(200);
    expect(hb.body).toEqual({ expires_at: expect.stringMatching(ISO_MS) });
    const done = await k(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 5 }, usage: { tokens: 1, usd: 0.001 } } });
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ run_state: 'running', next_step: 'lookup' });
    expectError(await k(`/leases/${l.body.lease_id}/heartbeat`, { method: 'POST' }), 410, 'lease_expired');
    expectError(await k(`/leases/${l.body.lease_id}/complete`, { body: { output: {}, usage: { tokens: 0, usd: 0 } } }), 410, 'lease_expired');
    expectError(await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: false } }), 410, 'lease_expired');
    expectError(await k(`/leases/${l.body.lease_id}/actions`, { body: { action: { tool: 'billing.refund', args: {} } } }), 410, 'lease_expired');
    expectError(await k('/leases/lse_01J00000000000000000000000/heartbeat', { method: 'POST' }), 404, 'not_found');
  });

  it('complete with output outside output_schema: 422 output_invalid', async () => {
    await drainReady();
    await newRun();
    const l = await takeLease(['model']);
    expectError(await k(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 'lots' }, usage: { tokens: 0, usd: 0 } } }), 422, 'output_invalid');
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('fail: {outcome: retry_scheduled, delay_ms} within ±20% of initial_delay; deterministic: quarantined, run parked quarantine; resume {run_id, state}; resume again 409 invalid_state', async () => {
    await drainReady();
    const { run_id } = await newRun();
    const l = await takeLease(['model']);
    const f = await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'flaky', message: 'x' }, deterministic: false } });
    expect(f.status).toBe(200);
    expect(f.body.outcome).toBe('retry_scheduled');
    expect(f.body.delay_ms).toBeGreaterThanOrEqual(160);
    expect(f.body.delay_ms).toBeLessThanOrEqual(240);
    await new Promise((r) => setTimeout(r, 300));
    const again = await takeLease(['model']);
    expect(again.body).toMatchObject({ run_id, attempt: 2 });
    const q = await k(`/leases/${again.body.lease_id}/fail`, { body: { error: { code: 'bad', message: 'x' }, deterministic: true } });
    expect(q.body).toMatchObject({ outcome: 'quarantined' });
    expect((await k(`/runs/${run_id}`)).body).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
    const resumed = await k(`/runs/${run_id}/resume`, { body: { actor: APPROVER } });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual({ run_id, state: 'running' });
    expectError(await k(`/runs/${run_id}/resume`, { body: { actor: APPROVER } }), 409, 'invalid_state');
    const fresh = await takeLease(['model']);
    expect(fresh.body).toMatchObject({ run_id, attempt: 1 });
    await k(`/leases/${fresh.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('a failure with code connector_quarantined parks the run connector_quarantined without spending an attempt', async () => {
    await drainReady();
    const { run_id } = await newRun();
    const l = await takeLease(['model']);
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'connector_quarantined', message: 'q' }, deterministic: false } });
    expect((await k(`/runs/${run_id}`)).body).toMatchObject({ state: 'parked', parked_reason: 'connector_quarantined' });
    await k(`/runs/${run_id}/resume`, { body: { actor: APPROVER } });
    const again = await takeLease(['model']);
    expect(again.body).toMatchObject({ run_id, attempt: 1 });
    await k(`/leases/${again.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });
});

describe('I 2.7 / 2.8 / 3 / D 5.4 actions and approvals', () => {
  /** A run whose action step is leased: triage (amount) and lookup completed. */
  async function atAction(amount: number): Promise<{ run_id: string; lease: any }> {
    await drainReady();
    const { run_id } = await newRun({ policy_set: ['refunds'] });
    for (const [kind, output] of [['model', { amount }], ['tool', { rows: [] }]] as const) {
      const l = await takeLease([kind]);
      expect((await k(`/leases/${l.body.lease_id}/complete`, { body: { output, usage: { tokens: 1, usd: 0 } } })).status).toBe(200);
    }
    const l = await takeLease(['action']);
    expect(l.status).toBe(200);
    return { run_id, lease: l.body };
  }

  it('allow: {action_id: act_ + 26 hex of sha256(run_id\\nstep\\nJCS(action)), decision, rule <policy>/<rule>, approval_id null}', async () => {
    const { run_id, lease } = await atAction(5);
    const action = { tool: 'billing.refund', args: { amount: 5 } };
    const a = await k(`/leases/${lease.lease_id}/actions`, { body: { action } });
    expect(a.status).toBe(200);
    const id = `act_${createHash('sha256').update(`${run_id}\n${lease.step}\n${canonicalize(action)}`).digest('hex').slice(0, 26)}`;
    expect(a.body).toEqual({ action_id: id, decision: 'allow', rule: 'refunds/small_refund', approval_id: null });
  });

  it('deny: 403 action_denied in the envelope', async () => {
    const { lease } = await atAction(5);
    const details = expectError(await k(`/leases/${lease.lease_id}/actions`, { body: { action: { tool: 'billing.export', args: {} } } }), 403, 'action_denied');
    expect(details).toMatchObject({ rule: 'refunds/no_export', action_id: expect.stringMatching(/^act_[0-9a-f]{26}$/) });
  });

  it('approval_required parks (human) and releases the lease; GET /approvals filters; wrong role and self-approval 403; approve {run_id, run_state}; twice 409; the re-lease carries approved_actions and the proposal is allowed as approved:<id>', async () => {
    const { run_id, lease } = await atAction(500);
    const action = { tool: 'billing.refund', args: { amount: 500 } };
    const p = await k(`/leases/${lease.lease_id}/actions`, { body: { action } });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ decision: 'approval_required', rule: 'refunds/large_refund', approval_id: expect.stringMatching(new RegExp(`^apr_${ULID}$`)) });
    expect((await k(`/runs/${run_id}`)).body).toMatchObject({ state: 'parked', parked_reason: 'human', pending_approval_id: p.body.approval_id });
    expectError(await k(`/leases/${lease.lease_id}/heartbeat`, { method: 'POST' }), 410, 'lease_expired');
    const pending = await k('/approvals?state=pending&approver=role:finance');
    expect(pending.status).toBe(200);
    const found = JSON.stringify(pending.body);
    expect(found).toContain(p.body.approval_id);
    const other = await k('/approvals?state=pending&approver=role:legal');
    expect(JSON.stringify(other.body)).not.toContain(p.body.approval_id);
    expectError(await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'approved', actor: { id: 'x', role: 'legal' }, reason: 'r' } }), 403, 'not_the_approver');
    expectError(await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'approved', actor: { id: REQUESTER.id, role: 'finance' }, reason: 'r' } }), 403, 'not_the_approver');
    const ok = await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'approved', actor: APPROVER, reason: 'fine' } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ run_id, run_state: 'running' });
    expectError(await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'again' } }), 409, 'already_decided');
    const relet = await takeLease(['action']);
    expect(relet.body.context.approved_actions).toContain(p.body.action_id);
    const again = await k(`/leases/${relet.body.lease_id}/actions`, { body: { action } });
    expect(again.body).toMatchObject({ action_id: p.body.action_id, decision: 'allow', rule: `approved:${p.body.approval_id}` });
    // An approval covers that proposal only: another amount is decided afresh.
    const another = await k(`/leases/${relet.body.lease_id}/actions`, { body: { action: { tool: 'billing.refund', args: { amount: 600 } } } });
    expect(another.body).toMatchObject({ decision: 'approval_required', rule: 'refunds/large_refund' });
    expect(another.body.approval_id).not.toBe(p.body.approval_id);
  });

  it('GET /approvals: an approver filter not of the form role:<role> is 400 request_invalid, not an empty inbox (I 4.1, D §10)', async () => {
    for (const bad of ['finance', 'role:', 'Role:finance']) {
      const a = await k(`/approvals?approver=${encodeURIComponent(bad)}`);
      expect(expectError(a, 400, 'request_invalid'), bad).toEqual({ path: '/querystring/approver' });
    }
    expect((await k('/approvals?approver=role:finance')).status).toBe(200);
  });

  it('an approval object has the members of D 5.4', async () => {
    const { lease } = await atAction(700);
    const p = await k(`/leases/${lease.lease_id}/actions`, { body: { action: { tool: 'billing.refund', args: { amount: 700 } } } });
    const list = await k('/approvals?state=pending');
    const items: any[] = Array.isArray(list.body) ? list.body : (list.body.approvals ?? []);
    const one = items.find((x) => x.approval_id === p.body.approval_id);
    expect(one).toMatchObject({ approval_id: p.body.approval_id, run_id: lease.run_id, step: 'refund', action_id: p.body.action_id, action: expect.any(Object), rule: 'refunds/large_refund', approver: 'role:finance', state: 'pending' });
    expect(one.created_at).toMatch(ISO_MS);
    const rejected = await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'no' } });
    expect(rejected.body.run_state).toBe('running');
    const relet = await takeLease(['action']);
    const denied = await k(`/leases/${relet.body.lease_id}/actions`, { body: { action: { tool: 'billing.refund', args: { amount: 700 } } } });
    expect(expectError(denied, 403, 'action_denied')).toMatchObject({ rule: `rejected:${p.body.approval_id}`, action_id: p.body.action_id });
  });

  it('abandon: 202 {compensations_scheduled}; the run is abandoned (none to compensate)', async () => {
    const { run_id } = await newRun();
    const a = await k(`/runs/${run_id}/abandon`, { body: { reason: 'stop', actor: APPROVER } });
    expect(a.status).toBe(202);
    expect(a.body).toMatchObject({ compensations_scheduled: 0 });
    expect((await k(`/runs/${run_id}`)).body.state).toBe('abandoned');
  });
});

describe('D §1 ids, D §6 retries, D §7 heads and credentials, D §10 body limits', () => {
  it('sorting ids sorts by creation, also within one millisecond (D §1)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await k('/remits', { body: remitRequest() })).body.remit_id);
    expect([...ids].sort()).toEqual(ids);
  });

  it('head_signature is Ed25519 by the control-plane key over JCS({run_id, seq, hash}) of the last event (D §7)', async () => {
    const { run_id } = await newRun();
    const run = (await k(`/runs/${run_id}`)).body;
    const events = (await k(`/runs/${run_id}/events`)).body.events;
    expect(run.last_seq).toBe(events.at(-1).seq);
    expect(run.head_hash).toBe(events.at(-1).hash);
    const keys = (await k('/keys')).body;
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(keys.public_key, 'base64url')]);
    const signed = Buffer.from(canonicalize({ run_id, seq: run.last_seq, hash: run.head_hash }), 'utf8');
    expect(verify(null, signed, createPublicKey({ key: spki, format: 'der', type: 'spki' }), Buffer.from(run.head_signature, 'base64url'))).toBe(true);
  });

  it('X-Svc-Lease: a lease of this run may post; a lease of another run is credential_invalid (I 5.2)', async () => {
    await drainReady();
    const a = await newRun();
    const b = await newRun();
    const l = await takeLease(['model']);
    expect(l.body.run_id).toBe(a.run_id);
    const note = { kind: 'note', payload: { n: 1 }, actor: { id: 'w', role: 'worker' } };
    expect((await k(`/runs/${a.run_id}/events`, { body: note, headers: { 'X-Svc-Lease': l.body.lease_id } })).status).toBe(201);
    expectError(await k(`/runs/${b.run_id}/events`, { body: note, headers: { 'X-Svc-Lease': l.body.lease_id } }), 401, 'credential_invalid');
    await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });

  it('retries double the delay and stop at max_attempts (3): the third failure is quarantined (D §6)', async () => {
    await drainReady();
    const { run_id } = await newRun();
    const delays: number[] = [];
    let outcome = '';
    for (let attempt = 1; attempt <= 3; attempt++) {
      let l = await takeLease(['model']);
      for (let i = 0; l.status === 204 && i < 40; i++) {
        await new Promise((r) => setTimeout(r, 50));
        l = await takeLease(['model']);
      }
      expect(l.body).toMatchObject({ run_id, attempt });
      const f = await k(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'flaky', message: 'x' }, deterministic: false } });
      outcome = f.body.outcome;
      if (attempt < 3) delays.push(f.body.delay_ms);
    }
    expect(outcome).toBe('quarantined');
    expect(delays[0]).toBeGreaterThanOrEqual(160);
    expect(delays[0]).toBeLessThanOrEqual(240);
    expect(delays[1]).toBeGreaterThanOrEqual(320);
    expect(delays[1]).toBeLessThanOrEqual(480);
    expect((await k(`/runs/${run_id}`)).body).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
  });

  it('events from a seq past the end: no events, next_seq unchanged', async () => {
    const { run_id } = await newRun();
    const page = await k(`/runs/${run_id}/events?from_seq=999`);
    expect(page.status).toBe(200);
    expect(page.body).toEqual({ events: [], next_seq: 999 });
  });

  it('bundles may be up to 8 MiB: a 2 MiB bundle is not 413, a 9 MiB one is (D §10)', async () => {
    const big = (size: number) => refundsBundle({ version: `7.0.${size}`, prompts: { triage: 'x'.repeat(size) } });
    const two = await pushBundle(big(2 * 1024 * 1024));
    expect(two.status).not.toBe(413);
    expect(two.status).toBeLessThan(500);
    expectError(await pushBundle(big(9 * 1024 * 1024)), 413, 'payload_too_large');
  });
});

describe('edges of the letter: budgets at the line, cursors, filters, default page, sub-run remits', () => {
  it('usage equal to spend does not exceed it: the run goes on (D §8 "exceeds")', async () => {
    await drainReady();
    const { run_id } = await newRun({ spend: { tokens: 10, usd: 0.3 } });
    const l = await takeLease(['model']);
    const done = await k(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 1 }, usage: { tokens: 10, usd: 0.1 } } });
    expect(done.body.run_state).toBe('running');
    const next = await takeLease(['tool']);
    expect(next.body).toMatchObject({ run_id, step: 'lookup' });
    expect(next.body.context.budget).toMatchObject({ used_tokens: 10 });
    const done2 = await k(`/leases/${next.body.lease_id}/complete`, { body: { output: { rows: [] }, usage: { tokens: 0, usd: 0.2 } } });
    expect(done2.body.run_state).toBe('running');
  });

  it('a cursor that is not one, or an unknown state filter: 400 request_invalid, never 500', async () => {
    expectError(await k('/runs?after=garbage!!'), 400, 'request_invalid');
    const st = await k('/runs?state=bogus');
    expect(st.status).toBeLessThan(500);
    expect([200, 400]).toContain(st.status);
    if (st.status === 200) expect(st.body).toEqual({ runs: [], next: null });
  });

  it('events: the default page is 100 (D §7)', async () => {
    const { run_id, token } = await newRun();
    for (let i = 0; i < 100; i++) {
      await k(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { i }, actor: { id: 'w', role: 'worker' } }, headers: { 'X-Svc-Remit': token } });
    }
    const page = await k(`/runs/${run_id}/events`);
    expect(page.body.events).toHaveLength(100);
    expect(page.body.next_seq).toBe(101);
  });

  it('lease ttl_seconds 0 or a fraction: 400 request_invalid', async () => {
    expectError(await takeLease(['model'], { ttl_seconds: 0 }), 400, 'request_invalid');
    expectError(await takeLease(['model'], { ttl_seconds: 1.5 }), 400, 'request_invalid');
  });

  it('a sub-run only through derive: a child of a bound remit is unbound and starts its own run (I 4.1 rule 5)', async () => {
    const { remit_id } = await newRun();
    const child = await k(`/remits/${remit_id}/derive`, { body: { spend: { tokens: 10, usd: 0.1 } } });
    expect(child.status).toBe(201);
    expect((await k(`/remits/${child.body.remit_id}`)).body).toMatchObject({ parent_id: remit_id, run_id: null });
    const sub = await k('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: child.body.remit_id, requested_by: REQUESTER } });
    expect(sub.status).toBe(201);
  });

  it('a rejection is seen in prior_events of the re-leased step (D 5.4)', async () => {
    await drainReady();
    const { run_id } = await newRun({ policy_set: ['refunds'] });
    for (const [kind, output] of [['model', { amount: 900 }], ['tool', { rows: [] }]] as const) {
      const l = await takeLease([kind]);
      await k(`/leases/${l.body.lease_id}/complete`, { body: { output, usage: { tokens: 1, usd: 0 } } });
    }
    const l = await takeLease(['action']);
    const p = await k(`/leases/${l.body.lease_id}/actions`, { body: { action: { tool: 'billing.refund', args: { amount: 900 } } } });
    await k(`/approvals/${p.body.approval_id}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'too much' } });
    const relet = await takeLease(['action']);
    expect(relet.body.run_id).toBe(run_id);
    const kinds = relet.body.context.prior_events.map((e: any) => e.kind);
    expect(kinds).toContain('approval.decided');
    expect(JSON.stringify(relet.body.context.prior_events)).toContain('rejected');
    await k(`/leases/${relet.body.lease_id}/fail`, { body: { error: { code: 'x', message: 'x' }, deterministic: true } });
  });
});

describe('D §10 request errors and I 4.1 metrics', () => {
  it('body not JSON: 400 request_invalid; wrong field type: 400 request_invalid with details.path; over 1 MiB: 413 payload_too_large', async () => {
    expectError(await k('/remits', { body: '{not json' }), 400, 'request_invalid');
    const typed = await k('/remits', { body: remitRequest({ tools: 'billing.*' }) });
    expect(expectError(typed, 400, 'request_invalid').path).toMatch(/tools/);
    const big = await k('/policies', { body: { name: 'big', version: '1', source: `# ${'x'.repeat(1_100_000)}\n` } });
    expectError(big, 413, 'payload_too_large');
  });

  it('an unknown run is 404 not_found with details.resource and details.id, for every run route', async () => {
    const id = 'run_01J00000000000000000000000';
    for (const [path, init] of [
      [`/runs/${id}`, {}],
      [`/runs/${id}/events`, {}],
      [`/runs/${id}/replay`, { method: 'POST' }],
      [`/runs/${id}/abandon`, { body: { reason: 'r', actor: APPROVER } }],
      [`/runs/${id}/resume`, { body: { actor: APPROVER } }],
    ] as const) {
      const a = await k(path, init as never);
      expect(expectError(a, 404, 'not_found'), path).toMatchObject({ id });
    }
    expectError(await k('/remits/rmt_01J00000000000000000000000'), 404, 'not_found');
    expectError(await k('/approvals/apr_01J00000000000000000000000', { body: { decision: 'approved', actor: APPROVER, reason: 'r' } }), 404, 'not_found');
  });

  it('GET /metrics is Prometheus text with every kernel metric of I 4.1', async () => {
    const m = await k('/metrics');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const name of ['svc_runs', 'svc_steps_leased_total', 'svc_step_latency_seconds', 'svc_usage_usd_total', 'svc_approvals_pending', 'svc_leases_expired_total', 'svc_events_total']) {
      expect(m.text, name).toMatch(new RegExp(`^${name}(_bucket|_sum|_count)?(\\{| )`, 'm'));
    }
    expect(m.text).toMatch(/^svc_runs\{state="running"\} \d+/m);
    expect(m.text).toMatch(/^svc_events_total\{kind="run\.created"\} \d+/m);
    expect(m.text).toMatch(/^svc_usage_usd_total\{department="support"\}/m);
  });
});
