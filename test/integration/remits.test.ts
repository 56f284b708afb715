/**
 * Remit endpoints against the real svcd on port 0: interface 4.1 (POST /remits, derive, GET),
 * 5.1 (auth), 5.4 (derive narrows), 7.1 and decisions §3, §10 (envelopes, 400/404, never 500).
 */
import { describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { verifyRemit } from '../../src/remit/verify.js';
import type { TrustedKeys } from '../../src/types.js';
import { startTestDaemon } from '../helpers/daemon.js';
import { pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

const mintBody = {
  tools: ['billing.*', 'crm.lookup'],
  scopes: ['sql:table:*', 'http:host:api.example.com'],
  grants: ['pii', 'finance'],
  spend: { tokens: 100_000, usd: 5 },
  autonomy: 'supervised',
  ttl_seconds: 600,
  policy_set: ['refunds', 'baseline@1.0.0'],
  requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
};

async function keysOf(d: { kernel_: (p: string) => Promise<{ body: any }> }): Promise<TrustedKeys> {
  const k = (await d.kernel_('/keys')).body;
  const map = new Map<string, Uint8Array>([[k.key_id, Buffer.from(k.public_key, 'base64url')]]);
  for (const p of k.previous) map.set(p.key_id, Buffer.from(p.public_key, 'base64url'));
  return { lookup: (id) => map.get(id) ?? null };
}

describe('POST /v1/remits (I 4.1, D §3)', () => {
  it('mints a signed remit: 201 {remit_id, token, expires_at}; the token verifies against /keys', async () => {
    await using d = await startTestDaemon();
    const before = Math.floor(Date.now() / 1000);
    const res = await d.kernel_('/remits', { body: mintBody });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['expires_at', 'remit_id', 'token']);
    expect(res.body.remit_id).toMatch(/^rmt_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(res.body.token).toMatch(/^krt1\.cp-[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(res.body.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);

    const v = verifyRemit(res.body.token, await keysOf(d), Math.floor(Date.now() / 1000), {});
    expect(v.ok).toBe(true);
    if (!v.ok) return;
    const p = v.payload;
    expect(p.rid).toBe(res.body.remit_id);
    expect(p.iss).toBe((await d.kernel_('/keys')).body.key_id);
    expect(p.iat).toBe(p.nbf);
    expect(p.iat).toBeGreaterThanOrEqual(before);
    expect(p.exp).toBe(p.iat + 600);
    expect(new Date(res.body.expires_at).getTime()).toBe(p.exp * 1000);
    expect(p).toMatchObject({ tools: mintBody.tools, scopes: mintBody.scopes, grants: mintBody.grants, spend: mintBody.spend, autonomy: 'supervised', policy_set: mintBody.policy_set, requested_by: mintBody.requested_by });
    expect(p.run).toBeUndefined();
    expect(p.parent).toBeUndefined();
  });

  it('defaults ttl_seconds to 3600, grants and policy_set to empty', async () => {
    await using d = await startTestDaemon();
    const { ttl_seconds: _t, grants: _g, policy_set: _p, ...minimal } = mintBody;
    const res = await d.kernel_('/remits', { body: minimal });
    expect(res.status).toBe(201);
    const rec = (await d.kernel_(`/remits/${res.body.remit_id}`)).body;
    expect(rec.exp - rec.iat).toBe(3600);
    expect(rec.grants).toEqual([]);
    expect(rec.policy_set).toEqual([]);
  });

  it('accepts the 30-day maximum ttl and refuses one second more', async () => {
    await using d = await startTestDaemon();
    expect((await d.kernel_('/remits', { body: { ...mintBody, ttl_seconds: 2_592_000 } })).status).toBe(201);
    const over = await d.kernel_('/remits', { body: { ...mintBody, ttl_seconds: 2_592_001 } });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/ttl_seconds' } });
  });
});

describe('malformed bodies are 400 request_invalid with details.path, never 500 (D §10)', () => {
  const cases: Array<[string, unknown, string]> = [
    ['a JSON array', [mintBody], ''],
    ['a JSON string', '"hello"', ''],
    ['JSON null', 'null', ''],
    ['no body', undefined, ''],
    ['tools missing', { ...mintBody, tools: undefined }, '/tools'],
    ['requested_by missing', { ...mintBody, requested_by: undefined }, '/requested_by'],
    ['spend missing', { ...mintBody, spend: undefined }, '/spend'],
    ['autonomy missing', { ...mintBody, autonomy: undefined }, '/autonomy'],
    ['tools a string', { ...mintBody, tools: 'billing.*' }, '/tools'],
    ['a tool not a string', { ...mintBody, tools: ['billing.*', 5] }, '/tools/1'],
    ['a tool pattern with a mid glob', { ...mintBody, tools: ['billing.re*'] }, '/tools/0'],
    ['a tool pattern without a connector', { ...mintBody, tools: ['*'] }, '/tools/0'],
    ['a scope with an inner star', { ...mintBody, scopes: ['sql:*:x'] }, '/scopes/0'],
    ['an empty scope', { ...mintBody, scopes: [''] }, '/scopes/0'],
    ['an exact scope that is not <system>:<kind>:<key> (I 2.1)', { ...mintBody, scopes: ['sql:table:*', 'nocolons'] }, '/scopes/1'],
    ['grants an object', { ...mintBody, grants: { pii: true } }, '/grants'],
    ['spend.tokens a string', { ...mintBody, spend: { tokens: '5', usd: 1 } }, '/spend/tokens'],
    ['spend.tokens a float', { ...mintBody, spend: { tokens: 1.5, usd: 1 } }, '/spend/tokens'],
    ['spend.usd negative', { ...mintBody, spend: { tokens: 1, usd: -1 } }, '/spend/usd'],
    ['spend.usd missing', { ...mintBody, spend: { tokens: 1 } }, '/spend/usd'],
    ['an unknown autonomy', { ...mintBody, autonomy: 'godmode' }, '/autonomy'],
    ['an unknown member whose name has a slash (a JSON pointer escapes it)', { ...mintBody, 'a/b~c': 1 }, '/a~1b~0c'],
    ['ttl_seconds zero', { ...mintBody, ttl_seconds: 0 }, '/ttl_seconds'],
    ['ttl_seconds a string', { ...mintBody, ttl_seconds: '60' }, '/ttl_seconds'],
    ['a policy_set entry with two @', { ...mintBody, policy_set: ['a@1@2'] }, '/policy_set/0'],
    ['a policy_set entry with a space', { ...mintBody, policy_set: ['my policy'] }, '/policy_set/0'],
    ['a policy_set name longer than a policy may be named (64)', { ...mintBody, policy_set: ['refunds', 'p'.repeat(65)] }, '/policy_set/1'],
    ['requested_by without manager', { ...mintBody, requested_by: { id: 'a', role: 'b' } }, '/requested_by/manager'],
    ['requested_by.id with a NUL', { ...mintBody, requested_by: { ...mintBody.requested_by, id: 'ana\u0000' } }, '/requested_by/id'],
    ['requested_by.manager with a right-to-left override (reads as another name)', { ...mintBody, requested_by: { ...mintBody.requested_by, manager: '\u202eevad' } }, '/requested_by/manager'],
    ['a grant with a bidirectional isolate', { ...mintBody, grants: ['pii', '\u2067pii'] }, '/grants/1'],
    ['requested_by.id a number', { ...mintBody, requested_by: { id: 1, role: 'b', manager: 'c' } }, '/requested_by/id'],
    ['an unknown field (a misspelt scope)', { ...mintBody, scope: ['x'] }, '/scope'],
    ['too many tools', { ...mintBody, tools: Array.from({ length: 300 }, (_, i) => `c.op${i}`) }, '/tools'],
  ];
  for (const [name, body, path] of cases) {
    it(`POST /remits with ${name}`, async () => {
      await using d = await startTestDaemon();
      const raw = typeof body === 'string' ? body : body === undefined ? undefined : JSON.stringify(body);
      const res = await d.kernel_('/remits', { method: 'POST', body: raw, headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', message: expect.any(String), details: { path } });
    });
  }

  it('a remit too large for a 16 KiB token is a 400, not a token nobody can decode', async () => {
    await using d = await startTestDaemon();
    const scopes = Array.from({ length: 60 }, (_, i) => `sql:table:${'t'.repeat(300)}${i}`);
    const res = await d.kernel_('/remits', { body: { ...mintBody, scopes } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('request_invalid');
  });

  it('derive bodies are validated the same way', async () => {
    await using d = await startTestDaemon();
    const parent = (await d.kernel_('/remits', { body: mintBody })).body;
    for (const [body, path] of [
      [{ tools: 'x' }, '/tools'],
      [{ autonomy: 'root' }, '/autonomy'],
      [{ spend: { tokens: -1, usd: 0 } }, '/spend/tokens'],
      [{ exp: 123 }, '/exp'],
      [[], ''],
    ] as const) {
      const res = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', details: { path } });
    }
    const bad = await d.kernel_(`/remits/${parent.remit_id}/derive`, { method: 'POST', body: '{"tools": [', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('request_invalid');
  });
});

describe('GET /v1/remits/{id} and derive (I 4.1, 5.4, D §3, 8.3)', () => {
  it('returns the payload plus parent_id and run_id', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: mintBody })).body;
    const res = await d.kernel_(`/remits/${m.remit_id}`);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(
      ['autonomy', 'exp', 'grants', 'iat', 'iss', 'nbf', 'parent_id', 'policy_set', 'requested_by', 'rid', 'run_id', 'scopes', 'spend', 'tools'].sort(),
    );
    expect(res.body).toMatchObject({ rid: m.remit_id, parent_id: null, run_id: null, spend: mintBody.spend });
  });

  it('derives a narrower child: 201 {remit_id, parent_id, token, expires_at}, inheriting what is not given', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: mintBody })).body;
    const res = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { tools: ['billing.refund'], scopes: ['sql:table:invoices'], spend: { tokens: 1000, usd: 1.25 }, ttl_seconds: 60 } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['expires_at', 'parent_id', 'remit_id', 'token']);
    expect(res.body.parent_id).toBe(m.remit_id);
    const v = verifyRemit(res.body.token, await keysOf(d), Math.floor(Date.now() / 1000), { tool: 'billing.refund', scopes: ['sql:table:invoices'] });
    expect(v.ok).toBe(true);
    const rec = (await d.kernel_(`/remits/${res.body.remit_id}`)).body;
    expect(rec).toMatchObject({
      parent: m.remit_id,
      parent_id: m.remit_id,
      run_id: null,
      tools: ['billing.refund'],
      grants: mintBody.grants,
      autonomy: 'supervised',
      policy_set: mintBody.policy_set,
      requested_by: mintBody.requested_by,
      spend: { tokens: 1000, usd: 1.25 },
    });
    expect(rec.exp - rec.iat).toBe(60);
  });

  it('derive with no body inherits everything, taking what the parent has left (D 8.3)', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: mintBody })).body;
    await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: 40_000, usd: 2 } } });
    const res = await d.kernel_(`/remits/${m.remit_id}/derive`, { method: 'POST' });
    expect(res.status).toBe(201);
    const rec = (await d.kernel_(`/remits/${res.body.remit_id}`)).body;
    const parent = (await d.kernel_(`/remits/${m.remit_id}`)).body;
    expect(rec.spend).toEqual({ tokens: 60_000, usd: 3 });
    expect(rec.exp).toBe(parent.exp);
    expect(rec.tools).toEqual(parent.tools);
    const none = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: 1, usd: 0 } } });
    expect(none.status).toBe(422);
    expect(none.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'spend' } });
  });

  it('a widening derive is 422 remit_widens with details.field (I 5.4)', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: mintBody })).body;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tools: ['crm.*'] }, 'tools'],
      [{ scopes: ['http:host:*'] }, 'scopes'],
      [{ grants: ['pii', 'secrets'] }, 'grants'],
      [{ spend: { tokens: 100_001, usd: 1 } }, 'spend'],
      [{ spend: { tokens: 1, usd: 5.01 } }, 'spend'],
      [{ autonomy: 'autonomous' }, 'autonomy'],
      [{ ttl_seconds: 601 }, 'exp'],
      [{ policy_set: ['refunds'] }, 'policy_set'],
      [{ requested_by: { id: 'bob', role: 'agent', manager: 'support-lead' } }, 'requested_by'],
    ];
    for (const [body, field] of cases) {
      const res = await d.kernel_(`/remits/${m.remit_id}/derive`, { body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'remit_widens', message: expect.any(String), details: { field } });
    }
  });

  it("a child naming a connector's literal `<name>:*` needs a parent that grants that connector (I 5.3 step 6, 5.4)", async () => {
    await using d = await startTestDaemon();
    const parent = (await d.kernel_('/remits', { body: { ...mintBody, scopes: ['ev*'] } })).body;
    const widened = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { scopes: ['everything:*'] } });
    expect(widened.status).toBe(422);
    expect(widened.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'scopes' } });
    expect((await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { scopes: ['ev*'] } })).status).toBe(201);
    const wide = (await d.kernel_('/remits', { body: { ...mintBody, scopes: ['*'] } })).body;
    expect((await d.kernel_(`/remits/${wide.remit_id}/derive`, { body: { scopes: ['everything:*'] } })).status).toBe(201);
  });

  it('derive narrows exp and nbf given as epoch seconds: earlier / later, else remit_widens (I 5.4, D §3)', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: { ...mintBody, ttl_seconds: 3600 } })).body;
    const parent = (await d.kernel_(`/remits/${m.remit_id}`)).body;
    // Earlier exp and later nbf: taken as given.
    const narrow = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { exp: parent.exp - 600, nbf: parent.nbf + 60 } });
    expect(narrow.status).toBe(201);
    const child = (await d.kernel_(`/remits/${narrow.body.remit_id}`)).body;
    expect(child).toMatchObject({ exp: parent.exp - 600, nbf: parent.nbf + 60 });
    expect(narrow.body.expires_at).toBe(new Date((parent.exp - 600) * 1000).toISOString());
    // With ttl_seconds too, the earlier end wins.
    const both = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { exp: parent.exp - 600, ttl_seconds: 60 } });
    expect((await d.kernel_(`/remits/${both.body.remit_id}`)).body.exp - parent.iat).toBeLessThanOrEqual(62);
    // Later exp, earlier nbf: widenings.
    for (const [body, field] of [
      [{ exp: parent.exp + 1 }, 'exp'],
      [{ nbf: parent.nbf - 1 }, 'nbf'],
    ] as const) {
      const res = await d.kernel_(`/remits/${m.remit_id}/derive`, { body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'remit_widens', details: { field } });
    }
    // A window that has ended, or never opens, is a request error.
    for (const [body, path] of [
      [{ exp: 123 }, '/exp'],
      [{ nbf: parent.exp }, '/nbf'],
      [{ exp: 1.5 }, '/exp'],
      [{ nbf: 'soon' }, '/nbf'],
    ] as const) {
      const res = await d.kernel_(`/remits/${m.remit_id}/derive`, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', details: { path } });
    }
  });

  it('a derive spend may name one member and inherit what is left of the other (D §3, 8.3)', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: mintBody })).body;
    const first = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: 40_000 } } });
    expect(first.status).toBe(201);
    expect((await d.kernel_(`/remits/${first.body.remit_id}`)).body.spend).toEqual({ tokens: 40_000, usd: mintBody.spend.usd });
    // The first child took all the usd: the second may have tokens, and no usd.
    const second = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: 1000 } } });
    expect(second.status).toBe(201);
    expect((await d.kernel_(`/remits/${second.body.remit_id}`)).body.spend).toEqual({ tokens: 1000, usd: 0 });
    const tooMuch = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { usd: 0.01 } } });
    expect(tooMuch.status).toBe(422);
    expect(tooMuch.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'spend' } });
    // The message names the member over and what it is over, not the other member's figure.
    expect(tooMuch.body.error.message).toBe('spend.usd 0.01 exceeds 0, what the parent has left (not spent by its run, not reserved for other children)');
    const overParent = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: mintBody.spend.tokens + 1, usd: mintBody.spend.usd + 1 } } });
    expect(overParent.body.error.message).toBe(
      `spend.tokens ${mintBody.spend.tokens + 1} exceeds ${mintBody.spend.tokens} and spend.usd ${mintBody.spend.usd + 1} exceeds ${mintBody.spend.usd}, the parent's spend`,
    );
    const empty = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: {} } });
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/spend' } });
  });

  it('spend.usd is counted in whole micro-dollars: the token states the rounded amount, so no child outgrows its parent (I 5.4, D 8.3)', async () => {
    await using d = await startTestDaemon();
    const m = (await d.kernel_('/remits', { body: { ...mintBody, spend: { tokens: 10, usd: 1.0000004 } } })).body;
    expect((await d.kernel_(`/remits/${m.remit_id}`)).body.spend).toEqual({ tokens: 10, usd: 1 });
    // 1.0000004 rounds to the parent's 1: allowed, and signed as 1, never as more.
    const even = await d.kernel_(`/remits/${m.remit_id}/derive`, { body: { spend: { tokens: 1, usd: 1.0000004 } } });
    expect(even.status).toBe(201);
    const payload = JSON.parse(Buffer.from(even.body.token.split('.')[2], 'base64url').toString('utf8'));
    expect(payload.spend).toEqual({ tokens: 1, usd: 1 });
    // Nothing is left now: three sub-micro reservations cannot add up to more than the parent.
    const tiny = (await d.kernel_('/remits', { body: { ...mintBody, spend: { tokens: 10, usd: 0.000001 } } })).body;
    const first = await d.kernel_(`/remits/${tiny.remit_id}/derive`, { body: { spend: { tokens: 1, usd: 0.0000006 } } });
    expect(first.status).toBe(201);
    const second = await d.kernel_(`/remits/${tiny.remit_id}/derive`, { body: { spend: { tokens: 1, usd: 0.0000006 } } });
    expect(second.status).toBe(422);
    expect(second.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'spend' } });
    // Above a billion dollars micro-dollars would stop being exact: 400.
    const huge = await d.kernel_('/remits', { body: { ...mintBody, spend: { tokens: 10, usd: 1e11 } } });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/spend/usd' } });
  });

  it('unknown ids are 404 not_found with details.resource and details.id', async () => {
    await using d = await startTestDaemon();
    for (const id of ['rmt_01JAAAAAAAAAAAAAAAAAAAAAAA', 'nope', encodeBase64url('x')]) {
      const get = await d.kernel_(`/remits/${id}`);
      expect(get.status).toBe(404);
      expect(get.body.error).toEqual({ code: 'not_found', message: expect.any(String), details: { resource: 'remit', id } });
      const der = await d.kernel_(`/remits/${id}/derive`, { body: {} });
      expect(der.status).toBe(404);
      expect(der.body.error.details).toEqual({ resource: 'remit', id });
    }
  });
});

describe('GET /v1/remits: the grants that exist (svcd(8); docs/design.md "Remits")', () => {
  it('lists records as GET /remits/{id} gives them, newest first, paged, filtered by state, parent and run', async () => {
    await using d = await startTestDaemon();
    const a = (await d.kernel_('/remits', { body: mintBody })).body.remit_id as string;
    const b = (await d.kernel_('/remits', { body: { ...mintBody, ttl_seconds: 1 } })).body.remit_id as string;
    const c = (await d.kernel_(`/remits/${a}/derive`, { body: { tools: ['crm.lookup'] } })).body.remit_id as string;
    const all = await d.kernel_('/remits?limit=500');
    expect(all.status).toBe(200);
    expect(all.body.remits.map((r: { rid: string }) => r.rid)).toEqual([c, b, a]);
    expect(all.body.next).toBeNull();
    expect(all.body.remits[0]).toEqual((await d.kernel_(`/remits/${c}`)).body);
    // No token in a list: a token is a bearer credential, returned once, at mint or derive.
    expect(JSON.stringify(all.body)).not.toMatch(/krt1\./);

    const first = await d.kernel_('/remits?limit=2');
    expect(first.body.remits.map((r: { rid: string }) => r.rid)).toEqual([c, b]);
    const second = await d.kernel_(`/remits?limit=2&after=${encodeURIComponent(first.body.next)}`);
    expect(second.body).toEqual({ remits: [expect.objectContaining({ rid: a })], next: null });

    expect((await d.kernel_(`/remits?parent_id=${a}`)).body.remits.map((r: { rid: string }) => r.rid)).toEqual([c]);
    const exp = (await d.kernel_(`/remits/${b}`)).body.exp as number;
    while (Date.now() / 1000 < exp) await new Promise((r) => setTimeout(r, 50));
    expect((await d.kernel_('/remits?state=expired')).body.remits.map((r: { rid: string }) => r.rid)).toEqual([b]);
    expect((await d.kernel_('/remits?state=active')).body.remits.map((r: { rid: string }) => r.rid)).toEqual([c, a]);
    expect((await d.kernel_('/remits?run_id=run_01JAAAAAAAAAAAAAAAAAAAAAAA')).body).toEqual({ remits: [], next: null });
  });

  it('run_id finds the remit bound to a run, its record the run-bound one', async () => {
    await using d = await startRunDaemon();
    const { run_id, remit_id } = await startRun(d, await pushBundle(d));
    await d.kernel_('/remits', { body: mintBody }); // unbound: not listed for the run
    const res = await d.kernel_(`/remits?run_id=${run_id}`);
    expect(res.body).toEqual({ remits: [expect.objectContaining({ rid: remit_id, run: run_id, run_id })], next: null });
  });

  it('refuses bad queries with 400 request_invalid naming the parameter (D §10)', async () => {
    await using d = await startTestDaemon();
    for (const [query, path] of [
      ['state=live', '/querystring/state'],
      ['limit=0', '/querystring/limit'],
      ['limit=501', '/querystring/limit'],
      ['after=not-a-cursor', '/querystring/after'],
    ]) {
      const res = await d.kernel_(`/remits?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error, query).toMatchObject({ code: 'request_invalid', details: { path } });
    }
  });
});

describe('auth on remit endpoints (I 5.1)', () => {
  it('requires the bearer token when one is set', async () => {
    await using d = await startTestDaemon({ token: 'remit-test-token' });
    const noAuth = await fetch(`${d.kernelUrl}/v1/remits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(mintBody) });
    expect(noAuth.status).toBe(401);
    expect(((await noAuth.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    const get = await fetch(`${d.kernelUrl}/v1/remits/rmt_01JAAAAAAAAAAAAAAAAAAAAAAA`);
    expect(get.status).toBe(401);
    expect((await fetch(`${d.kernelUrl}/v1/remits`)).status).toBe(401);
    const ok = await d.kernel_('/remits', { body: mintBody });
    expect(ok.status).toBe(201);
  });

  it('serves loopback clients without a token', async () => {
    await using d = await startTestDaemon();
    const res = await fetch(`${d.kernelUrl}/v1/remits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(mintBody) });
    expect(res.status).toBe(201);
  });
});

describe('identity strings (I 2.1; docs/design.md "Remits")', () => {
  it('say which characters they may not hold; names in any script are taken', async () => {
    await using d = await startTestDaemon();
    const nul = await d.kernel_('/remits', { body: { ...mintBody, requested_by: { ...mintBody.requested_by, role: 'fin\u0007' } } });
    expect(nul.body.error).toMatchObject({ code: 'request_invalid', message: '/requested_by/role must not contain control, format (bidirectional or zero-width) or line-separator characters' });
    for (const id of ['ana\u200b', 'ana\u00ad', '\ufeffana', 'ana\u2028']) {
      const r = await d.kernel_('/remits', { body: { ...mintBody, requested_by: { ...mintBody.requested_by, id } } });
      expect(r.body.error?.details, JSON.stringify(id)).toEqual({ path: '/requested_by/id' });
    }
    const spaced = await d.kernel_('/remits', { body: { ...mintBody, grants: ['p ii'] } });
    expect(spaced.body.error.message).toBe('/grants/0 must not contain whitespace');
    const ok = await d.kernel_('/remits', { body: { ...mintBody, requested_by: { id: 'José Ñúñez', role: 'финансы', manager: '王伟' } } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
  });
});
