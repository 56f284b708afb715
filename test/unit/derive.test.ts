/**
 * RemitService: derive applies every narrowing rule of interface 5.4 both ways, with
 * decisions §3 (inheritance, exp = min, requested_by) and 8.3 (spend reserved from the parent);
 * binding a remit to a run (decisions §3, interface 2.4). Property (fast-check): a derived remit
 * never permits a tool or scope its parent does not.
 */
import fc from 'fast-check';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { SvcError } from '../../src/errors.js';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { KeyRing } from '../../src/keys/keyring.js';
import { anyScopeMatches, anyToolMatches } from '../../src/remit/patterns.js';
import { RemitService } from '../../src/remit/remit-service.js';
import { REMIT_MIGRATIONS } from '../../src/remit/schema.js';
import { migrate, SqliteDb } from '../../src/store/sqlite-db.js';
import type { RemitPayload } from '../../src/types.js';

const keys = new KeyRing(generateKeyPair().seed);
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const db = new SqliteDb({ path: ':memory:' });
await migrate(db, REMIT_MIGRATIONS);
const svc = new RemitService({ db, keys, clock, options: {} });
afterAll(() => db.close());

const base = {
  tools: ['billing.*', 'crm.lookup'],
  scopes: ['sql:table:*', 'http:host:api.example.com'],
  grants: ['pii', 'finance'],
  spend: { tokens: 1000, usd: 10 },
  autonomy: 'supervised',
  ttl_seconds: 3600,
  policy_set: ['refunds', 'baseline@2'],
  requested_by: { id: 'ana', role: 'agent', manager: 'lead' },
};

let parentId: string;
beforeEach(async () => {
  parentId = (await svc.mint(base)).remit_id;
});

async function derive(body: unknown, from = parentId) {
  return svc.derive(from, body);
}
async function widens(body: unknown, field: string, from = parentId) {
  const err = await derive(body, from).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, JSON.stringify(body)).toBeInstanceOf(SvcError);
  expect((err as SvcError).code).toBe('remit_widens');
  expect((err as SvcError).status).toBe(422);
  expect((err as SvcError).details.field).toBe(field);
}
const payloadOf = async (id: string) => svc.getPayload(id);

describe('mint (I 4.1, D §3)', () => {
  it('iat = nbf = now, exp = now + ttl, iss = the control-plane key', async () => {
    const p = await payloadOf(parentId);
    const now = Math.floor(clock.now() / 1000);
    expect(p).toMatchObject({ iat: now, nbf: now, exp: now + 3600, iss: keys.keyId });
    expect(p.parent).toBeUndefined();
  });
});

describe('derive narrows: every 5.4 rule both ways', () => {
  it('tools: each child pattern covered by a parent pattern', async () => {
    for (const tools of [['billing.refund'], ['billing.*'], ['billing.*', 'crm.lookup'], [], ['crm.lookup', 'billing.void']]) {
      expect((await payloadOf((await derive({ tools })).remit_id)).tools).toEqual(tools);
    }
    for (const tools of [['crm.*'], ['crm.export'], ['billing.refund', 'hr.read'], ['billingx.refund']]) await widens({ tools }, 'tools');
  });

  it('scopes: each child pattern covered by a parent pattern', async () => {
    for (const scopes of [['sql:table:invoices'], ['sql:table:inv*'], ['sql:table:*'], ['http:host:api.example.com'], []]) {
      expect((await payloadOf((await derive({ scopes })).remit_id)).scopes).toEqual(scopes);
    }
    for (const scopes of [['sql:*'], ['http:host:*'], ['http:host:evil.example.com'], ['*'], ['sql:view:x']]) await widens({ scopes }, 'scopes');
  });

  it('grants: a subset', async () => {
    for (const grants of [['pii'], [], ['finance', 'pii']]) expect((await payloadOf((await derive({ grants })).remit_id)).grants).toEqual(grants);
    for (const grants of [['secrets'], ['pii', 'hr']]) await widens({ grants }, 'grants');
  });

  it('spend.tokens and spend.usd: less than or equal', async () => {
    const ok = await derive({ spend: { tokens: 1000, usd: 10 } });
    expect((await payloadOf(ok.remit_id)).spend).toEqual({ tokens: 1000, usd: 10 });
    const other = (await svc.mint(base)).remit_id;
    await widens({ spend: { tokens: 1001, usd: 1 } }, 'spend', other);
    await widens({ spend: { tokens: 1, usd: 10.000001 } }, 'spend', other);
    expect((await derive({ spend: { tokens: 1, usd: 9.99 } }, other)).remit_id).toMatch(/^rmt_/);
  });

  it('autonomy: less than or equal in the order observe < propose < supervised < autonomous', async () => {
    for (const autonomy of ['observe', 'propose', 'supervised']) expect((await payloadOf((await derive({ autonomy })).remit_id)).autonomy).toBe(autonomy);
    await widens({ autonomy: 'autonomous' }, 'autonomy');
    const observer = (await derive({ autonomy: 'observe' })).remit_id;
    await widens({ autonomy: 'propose' }, 'autonomy', observer);
  });

  it('exp: earlier (a ttl ending after the parent is remit_widens, field exp); not given, inherited', async () => {
    const p = await payloadOf(parentId);
    const shorter = await payloadOf((await derive({ ttl_seconds: 60 })).remit_id);
    expect(shorter.exp).toBe(shorter.iat + 60);
    const same = await payloadOf((await derive({ ttl_seconds: 3600 })).remit_id);
    expect(same.exp).toBe(p.exp);
    await widens({ ttl_seconds: 3601 }, 'exp');
    clock.advance(1000_000); // 1000 s later: at most 2600 s are left
    await widens({ ttl_seconds: 2601 }, 'exp');
    const inherited = await payloadOf((await derive({})).remit_id);
    expect(inherited.exp).toBe(p.exp);
  });

  it('nbf: later (the child is valid from now, never before the parent)', async () => {
    const p = await payloadOf(parentId);
    clock.advance(5000);
    const c = await payloadOf((await derive({})).remit_id);
    expect(c.nbf).toBe(p.nbf + 5);
    expect(c.iat).toBe(c.nbf);
  });

  it('policy_set: may grow; removing a policy widens', async () => {
    for (const policy_set of [['refunds', 'baseline@2'], ['baseline@2', 'refunds'], ['refunds', 'baseline@2', 'extra']]) {
      expect((await payloadOf((await derive({ policy_set })).remit_id)).policy_set).toEqual(policy_set);
    }
    for (const policy_set of [['refunds'], [], ['refunds', 'baseline@1']]) await widens({ policy_set }, 'policy_set');
  });

  it('requested_by: inherited; the same one is fine, a different one widens (D §3)', async () => {
    const same = await payloadOf((await derive({ requested_by: base.requested_by })).remit_id);
    expect(same.requested_by).toEqual(base.requested_by);
    await widens({ requested_by: { ...base.requested_by, id: 'bob' } }, 'requested_by');
    await widens({ requested_by: { ...base.requested_by, manager: 'ceo' } }, 'requested_by');
  });

  it('fields not given are inherited; the child records parent and is unbound', async () => {
    const d = await derive({ tools: ['billing.refund'] });
    expect(d.parent_id).toBe(parentId);
    const c = await svc.get(d.remit_id);
    const p = await payloadOf(parentId);
    expect(c).toMatchObject({ parent: parentId, parent_id: parentId, run_id: null, scopes: p.scopes, grants: p.grants, autonomy: p.autonomy, policy_set: p.policy_set, requested_by: p.requested_by, exp: p.exp });
    expect(c.run).toBeUndefined();
  });

  it('narrowing is transitive: a grandchild is checked against its own parent', async () => {
    const child = (await derive({ tools: ['billing.refund'], autonomy: 'propose', spend: { tokens: 100, usd: 1 } })).remit_id;
    await widens({ tools: ['billing.*'] }, 'tools', child);
    await widens({ autonomy: 'supervised' }, 'autonomy', child);
    await widens({ spend: { tokens: 101, usd: 1 } }, 'spend', child);
    expect((await payloadOf((await derive({ spend: { tokens: 50, usd: 0.5 } }, child)).remit_id)).parent).toBe(child);
  });

  it('an unknown parent is 404 not_found; an expired parent cannot be derived from', async () => {
    await expect(derive({}, 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA')).rejects.toMatchObject({ code: 'not_found', details: { resource: 'remit', id: 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA' } });
    clock.advance(3600_000);
    await expect(derive({})).rejects.toMatchObject({ code: 'remit_invalid', details: { reason: 'remit_expired' } });
  });
});

describe('spend reservation (D 8.3)', () => {
  it("children reserve from the parent's unreserved budget; what is left can be taken, not more", async () => {
    await derive({ spend: { tokens: 600, usd: 2.5 } });
    expect(await svc.reserved(parentId)).toEqual({ tokens: 600, usd: 2.5 });
    await widens({ spend: { tokens: 401, usd: 1 } }, 'spend');
    await widens({ spend: { tokens: 1, usd: 7.51 } }, 'spend');
    const rest = await derive({ spend: { tokens: 400, usd: 7.5 } });
    expect((await payloadOf(rest.remit_id)).spend).toEqual({ tokens: 400, usd: 7.5 });
    await widens({ spend: { tokens: 1, usd: 0 } }, 'spend');
    const zero = await derive({ spend: { tokens: 0, usd: 0 } });
    expect((await payloadOf(zero.remit_id)).spend).toEqual({ tokens: 0, usd: 0 });
  });

  it('an inherited spend takes what is left; usd sums stay exact', async () => {
    for (let i = 0; i < 3; i++) await derive({ spend: { tokens: 1, usd: 0.1 } });
    expect((await svc.reserved(parentId)).usd).toBe(0.3);
    const rest = await payloadOf((await derive({})).remit_id);
    expect(rest.spend).toEqual({ tokens: 997, usd: 9.7 });
    await widens({ spend: { tokens: 0, usd: 0.000001 } }, 'spend');
  });

  it('concurrent derives never reserve more than the parent has', async () => {
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => derive({ spend: { tokens: 300, usd: 1 } })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    expect((await svc.reserved(parentId)).tokens).toBe(900);
  });
});

describe('bindToRun (D §3, I 2.4)', () => {
  it('binds once, issuing a run-bound token with the same rid; a second bind is 409 remit_bound', async () => {
    const bound = await db.tx((tx) => svc.bindToRun(tx, parentId, 'run_A'));
    expect(bound.payload).toMatchObject({ rid: parentId, run: 'run_A' });
    const v = svc.verify(bound.token, { run_id: 'run_A' });
    expect(v.ok).toBe(true);
    expect(svc.verify(bound.token, { run_id: 'run_B' })).toMatchObject({ ok: false, reason: 'remit_run_mismatch' });
    expect(await svc.tokenFor(parentId)).toBe(bound.token);
    expect(await svc.get(parentId)).toMatchObject({ run: 'run_A', run_id: 'run_A', parent_id: null });
    await expect(db.tx((tx) => svc.bindToRun(tx, parentId, 'run_B'))).rejects.toMatchObject({ code: 'remit_bound', status: 409 });
  });

  it('a derived child of a bound remit is unbound', async () => {
    await db.tx((tx) => svc.bindToRun(tx, parentId, 'run_A'));
    const child = await derive({ tools: ['billing.refund'] });
    expect(await svc.get(child.remit_id)).toMatchObject({ run_id: null, parent_id: parentId });
    expect((await payloadOf(child.remit_id)).run).toBeUndefined();
  });

  it('rolls back with the caller transaction', async () => {
    await expect(
      db.tx(async (tx) => {
        await svc.bindToRun(tx, parentId, 'run_A');
        throw new Error('run creation failed');
      }),
    ).rejects.toThrow('run creation failed');
    expect((await svc.get(parentId)).run_id).toBeNull();
  });

  it('refuses an unknown, expired or not yet valid remit', async () => {
    await expect(db.tx((tx) => svc.bindToRun(tx, 'rmt_nope', 'run_A'))).rejects.toMatchObject({ code: 'not_found' });
    clock.advance(3600_000);
    await expect(db.tx((tx) => svc.bindToRun(tx, parentId, 'run_A'))).rejects.toMatchObject({ code: 'remit_invalid', details: { reason: 'remit_expired' } });
    clock.advance(-3600_000);
  });

  it('re-signs a bound token with the current key after rotation', async () => {
    const rotated = new KeyRing(generateKeyPair().seed, [{ key_id: keys.keyId, public_key: keys.publicKey.toString('base64url'), retired_at: 'x' }]);
    const svc2 = new RemitService({ db, keys: rotated, clock, options: {} });
    const bound = await db.tx((tx) => svc2.bindToRun(tx, parentId, 'run_R'));
    expect(bound.payload.iss).toBe(rotated.keyId);
    expect(svc2.verify(bound.token, { run_id: 'run_R' }).ok).toBe(true);
    expect(svc2.verify(await svc2.tokenFor((await svc.mint(base)).remit_id)).ok).toBe(true); // old-key tokens still verify
  });
});

// ------------------------------------------------------------------ property

const seg = fc.constantFrom('a', 'b', 'ab');
const toolPattern = fc.tuple(seg, fc.oneof(seg, fc.constant('*'))).map(([c, o]) => `${c}.${o}`);
const toolId = fc.tuple(seg, seg).map(([c, o]) => `${c}.${o}`);
const scopeText = fc.array(fc.constantFrom('a', 'b', ':'), { minLength: 1, maxLength: 5 }).map((xs) => xs.join(''));
// An exact scope is <system>:<kind>:<key> (I 2.1); a glob may be any prefix.
const exactScope = fc.tuple(seg, seg, fc.constantFrom('a', 'b', 'a:b')).map(([s, k, x]) => `${s}:${k}:${x}`);
const scopePattern = fc.oneof(exactScope, scopeText.map((s) => s + '*'), fc.constant('*'));
const callScope = fc.oneof(exactScope, scopeText);

describe('a derived remit never permits a tool or scope its parent does not (property, I 5.4)', () => {
  it('holds for random parents, derive requests and calls', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(toolPattern, { maxLength: 4 }),
        fc.uniqueArray(scopePattern, { maxLength: 4 }),
        fc.option(fc.uniqueArray(toolPattern, { maxLength: 4 }), { nil: undefined }),
        fc.option(fc.uniqueArray(scopePattern, { maxLength: 4 }), { nil: undefined }),
        fc.array(toolId, { minLength: 1, maxLength: 8 }),
        fc.array(callScope, { minLength: 1, maxLength: 8 }),
        async (pTools, pScopes, cTools, cScopes, ids, scopes) => {
          const parent = await svc.mint({ ...base, tools: pTools, scopes: pScopes });
          let child: RemitPayload;
          try {
            child = await svc.getPayload((await svc.derive(parent.remit_id, { tools: cTools, scopes: cScopes })).remit_id);
          } catch (err) {
            expect((err as SvcError).code).toBe('remit_widens');
            return;
          }
          for (const id of ids) if (anyToolMatches(child.tools, id)) expect(anyToolMatches(pTools, id)).toBe(true);
          for (const s of scopes) if (anyScopeMatches(child.scopes, s)) expect(anyScopeMatches(pScopes, s)).toBe(true);
        },
      ),
      { numRuns: 150 },
    );
  });
});
