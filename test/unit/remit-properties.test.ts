/**
 * Remit patterns, coverage and tokens as properties: matching agrees with a reference written
 * from the text of I 2.1; what derive lets through (D §3 "Pattern coverage", I 5.4) never grants
 * a call the parent would refuse, the gateway's literal `<connector>:*` (I 5.3 step 6)
 * included; tokens round-trip (D §3) and a token changed in any character does not verify;
 * verifyRemit refuses with the first failing step of the I 5.3 table; and through the remit
 * service, chains of derives narrow every field and never reserve more than a parent has (D 8.3).
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeBase64url, encodeBase64url } from '../../src/encoding/base64url.js';
import { SvcError } from '../../src/errors.js';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { KeyRing } from '../../src/keys/keyring.js';
import { anyScopeMatches, anyToolMatches, scopeMatches, scopePatternProblem, toolMatches, toolPatternProblem, uncoveredScope, uncoveredTool } from '../../src/remit/patterns.js';
import { decodeToken, encodeToken } from '../../src/remit/token.js';
import { RemitService } from '../../src/remit/remit-service.js';
import { REMIT_MIGRATIONS } from '../../src/remit/schema.js';
import { clearVerifiedTokenCache, verifyRemit } from '../../src/remit/verify.js';
import { usdMicro } from '../../src/spend.js';
import { migrate, SqliteDb } from '../../src/store/sqlite-db.js';
import { AUTONOMY_ORDER, type Autonomy, type RemitCallCheck, type RemitPayload } from '../../src/types.js';

// ---- A reference of I 2.1 "Patterns", written from the text, not from patterns.ts ----

/** I 2.1: a tool pattern is an exact id or `<connector>.*`; a tool id is `<connector>.<operation>`. */
function refToolMatches(pattern: string, id: string): boolean {
  const dot = id.indexOf('.');
  if (dot <= 0 || dot === id.length - 1) return false; // not a tool id at all
  const connector = id.slice(0, dot);
  if (pattern.endsWith('.*') && !pattern.slice(0, -2).includes('.')) return pattern.slice(0, -2) === connector;
  return pattern === id;
}

/** I 2.1: a scope pattern may end in `*` to match a prefix; else it is the exact scope. Case sensitive, no regexps. */
function refScopeMatches(pattern: string, scope: string): boolean {
  if (pattern.endsWith('*')) {
    const prefix = pattern.slice(0, -1);
    return scope.length >= prefix.length && scope.slice(0, prefix.length) === prefix;
  }
  return pattern === scope;
}

/**
 * What a remit grants at the gateway for one derived scope (I 5.3 step 6): a pattern matches
 * it, or — for a connector with no derivation, whose derived scope is `mcp:<name>:*` — the
 * remit names the literal `<name>:*`.
 */
function grantsScope(patterns: readonly string[], scope: string): boolean {
  const literal = /^mcp:([a-z0-9_-]+):\*$/.exec(scope);
  return anyScopeMatches(patterns, scope) || (literal !== null && patterns.includes(`${literal[1]}:*`));
}

// Small alphabets, so patterns, ids and scopes collide often.
const seg = fc.constantFrom('a', 'b', 'ab', 'mcp');
const op = fc.constantFrom('a', 'b', 'ab', 'a.b', 'x_y');
const toolId = fc.tuple(seg, op).map(([c, o]) => `${c}.${o}`);
const toolPattern = fc.oneof(toolId, seg.map((c) => `${c}.*`)).filter((p) => toolPatternProblem(p) === null);
const anyToolText = fc.oneof(toolId, fc.array(fc.constantFrom('a', '.', '*', 'b'), { maxLength: 5 }).map((x) => x.join('')));
const scopeText = fc.array(fc.constantFrom('a', 'b', ':', 'mcp', 'mcp:', '*'), { maxLength: 6 }).map((xs) => xs.join(''));
const scopePattern = fc.oneof(
  fc.tuple(seg, seg, fc.constantFrom('a', 'b', 'a:b', '*')).map(([s, k, x]) => `${s}:${k}:${x}`),
  fc.tuple(scopeText, fc.constant('*')).map(([s, g]) => s + g),
  seg.map((c) => `${c}:*`), // the connector literal
).filter((p) => scopePatternProblem(p) === null);
/** A scope a call derives: `<system>:<kind>:<key>`, or an MCP server's whole `mcp:<name>:*`. */
const callScope = fc.oneof(fc.tuple(seg, seg, fc.constantFrom('a', 'b', 'a:b', 'ab')).map(([s, k, x]) => `${s}:${k}:${x}`), seg.map((n) => `mcp:${n}:*`));

describe('pattern matching agrees with I 2.1', () => {
  it('tool patterns: exact id, or `<connector>.*` for every operation of that connector', () => {
    fc.assert(
      fc.property(toolPattern, anyToolText, (p, id) => {
        expect(toolMatches(p, id)).toBe(refToolMatches(p, id));
      }),
      { numRuns: 2000 },
    );
  });

  it('scope patterns: exact, or a prefix when ending in `*`; case sensitive', () => {
    fc.assert(
      fc.property(scopePattern, fc.oneof(scopeText, callScope), fc.boolean(), (p, s, upper) => {
        const scope = upper ? s.toUpperCase() : s;
        expect(scopeMatches(p, scope)).toBe(refScopeMatches(p, scope));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('a derived remit never grants more than its parent (I 5.4, D §3)', () => {
  it('tools: every call the child permits, the parent permits', () => {
    fc.assert(
      fc.property(fc.array(toolPattern, { maxLength: 4 }), fc.array(toolPattern, { maxLength: 4 }), fc.array(toolId, { minLength: 1, maxLength: 8 }), (parent, child, calls) => {
        if (uncoveredTool(parent, child) !== null) return;
        for (const id of calls) if (anyToolMatches(child, id)) expect(anyToolMatches(parent, id)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('scopes: every scope the child grants at the gateway, the connector literal included, the parent grants', () => {
    fc.assert(
      fc.property(fc.array(scopePattern, { maxLength: 4 }), fc.array(scopePattern, { maxLength: 4 }), fc.array(callScope, { minLength: 1, maxLength: 8 }), (parent, child, calls) => {
        if (uncoveredScope(parent, child) !== null) return;
        for (const s of calls) if (grantsScope(child, s)) expect(grantsScope(parent, s), `${JSON.stringify({ parent, child, s })}`).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('a derive with the parent\'s own lists, or any sublist of them, is never a widening', () => {
    fc.assert(
      fc.property(fc.array(toolPattern, { maxLength: 4 }), fc.array(scopePattern, { maxLength: 4 }), fc.func(fc.boolean()), (tools, scopes, keep) => {
        expect(uncoveredTool(tools, tools.filter((t) => keep(t)))).toBeNull();
        expect(uncoveredScope(scopes, scopes.filter((s) => keep(s)))).toBeNull();
      }),
      { numRuns: 500 },
    );
  });
});

// ---- Tokens ----

const ring = new KeyRing(generateKeyPair().seed);
const other = new KeyRing(generateKeyPair().seed);
const NOW = 1_800_000_000;

const payloadArb: fc.Arbitrary<RemitPayload> = fc.record(
  {
    rid: fc.constantFrom('rmt_01JAAAAAAAAAAAAAAAAAAAAAAA', 'rmt_é😀'),
    parent: fc.constant('rmt_parent'),
    run: fc.constantFrom('run_1', 'run_2'),
    iss: fc.constant(ring.keyId),
    iat: fc.constant(NOW - 100),
    nbf: fc.integer({ min: NOW - 100, max: NOW + 100 }),
    exp: fc.integer({ min: NOW - 100, max: NOW + 100 }),
    tools: fc.array(toolPattern, { maxLength: 3 }),
    scopes: fc.array(scopePattern, { maxLength: 3 }),
    grants: fc.array(fc.constantFrom('pii', 'phi', 'é'), { maxLength: 2 }),
    spend: fc.record({ tokens: fc.nat(), usd: fc.double({ min: 0, max: 1e9, noNaN: true }).map((u) => Math.round(u * 1e6) / 1e6) }),
    autonomy: fc.constantFrom(...AUTONOMY_ORDER),
    policy_set: fc.array(fc.constantFrom('refunds', 'pii@2'), { maxLength: 2 }),
    requested_by: fc.record({ id: fc.string({ maxLength: 4 }), role: fc.string({ maxLength: 4 }), manager: fc.string({ maxLength: 4 }) }),
  },
  { requiredKeys: ['rid', 'iss', 'iat', 'nbf', 'exp', 'tools', 'scopes', 'grants', 'spend', 'autonomy', 'policy_set', 'requested_by'] },
);

const callArb: fc.Arbitrary<RemitCallCheck> = fc.record(
  { run_id: fc.constantFrom('run_1', 'run_2'), tool: toolId, scopes: fc.array(callScope, { maxLength: 3 }), writes: fc.boolean() },
  { requiredKeys: [] },
);

/** I 5.3 steps 3–7 from the table, for a token whose steps 1–2 pass. */
function refReason(p: RemitPayload, now: number, call: RemitCallCheck): string | null {
  if (now >= p.exp) return 'remit_expired';
  if (p.nbf > now) return 'remit_not_yet_valid';
  if (call.run_id !== undefined && p.run !== undefined && p.run !== call.run_id) return 'remit_run_mismatch';
  if (call.tool !== undefined && !p.tools.some((t) => refToolMatches(t, call.tool!))) return 'tool_not_in_remit';
  if (call.scopes !== undefined && !call.scopes.every((s) => grantsScope(p.scopes, s))) return 'scope_not_granted';
  const writesAllowed = AUTONOMY_ORDER.indexOf(p.autonomy as Autonomy) >= AUTONOMY_ORDER.indexOf('supervised');
  if (call.writes === true && !writesAllowed) return 'autonomy_too_low';
  return null;
}

/** The gateway's alternatives for the MCP servers `a`, `b`, `ab` and `mcp` (src/gateway/connectors/mcp.ts). */
const mcpAlternatives = (scope: string): string[] => {
  const m = /^mcp:([a-z0-9_-]+):\*$/.exec(scope);
  return m ? [`${m[1]}:*`] : [];
};

describe('remit tokens (D §3, I 5.3)', () => {
  it('round-trip: the decoded payload is the one issued, and it verifies', () => {
    fc.assert(
      fc.property(payloadArb, (p) => {
        const token = encodeToken(p, ring);
        const d = decodeToken(token);
        expect(d.ok).toBe(true);
        if (!d.ok) return;
        expect(d.payload).toEqual(p);
        expect(d.keyId).toBe(ring.keyId);
        const v = verifyRemit(token, ring, Math.max(p.nbf, NOW - 100), {});
        if (p.exp > Math.max(p.nbf, NOW - 100)) expect(v.ok).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses with the first failing step of the I 5.3 table, as a reference of the table does', () => {
    fc.assert(
      fc.property(payloadArb, callArb, fc.integer({ min: NOW - 150, max: NOW + 150 }), (p, call, now) => {
        const token = encodeToken(p, ring);
        const v = verifyRemit(token, ring, now, { ...call, scopeAlternatives: mcpAlternatives });
        expect(v.ok ? null : v.reason).toBe(refReason(p, now, call));
      }),
      { numRuns: 500 },
    );
  });

  it('a token changed in any one character does not verify (token_malformed or signature_invalid)', () => {
    const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=';
    fc.assert(
      fc.property(payloadArb, fc.nat(), fc.constantFrom(...chars), (p, at, c) => {
        const token = encodeToken({ ...p, nbf: NOW - 100, exp: NOW + 100 }, ring);
        const i = at % token.length;
        fc.pre(token[i] !== c);
        const changed = token.slice(0, i) + c + token.slice(i + 1);
        const v = verifyRemit(changed, ring, NOW, {});
        expect(v.ok).toBe(false);
        if (!v.ok) expect(['token_malformed', 'signature_invalid']).toContain(v.reason);
      }),
      { numRuns: 500 },
    );
  });

  it('a payload or signature byte flipped, re-encoded canonically, does not verify; nor a token under a key not trusted', () => {
    fc.assert(
      fc.property(payloadArb, fc.nat(), fc.integer({ min: 0, max: 7 }), fc.boolean(), (p, at, bit, inSignature) => {
        clearVerifiedTokenCache();
        const token = encodeToken({ ...p, nbf: NOW - 100, exp: NOW + 100 }, ring);
        const parts = token.split('.');
        const k = inSignature ? 3 : 2;
        const bytes = decodeBase64url(parts[k]!)!;
        bytes[at % bytes.length]! ^= 1 << bit;
        parts[k] = encodeBase64url(bytes);
        const v = verifyRemit(parts.join('.'), ring, NOW, {});
        expect(v.ok).toBe(false);
        // The same payload issued by a key the verifier does not trust.
        const foreign = encodeToken({ ...p, iss: other.keyId, nbf: NOW - 100, exp: NOW + 100 }, other);
        const w = verifyRemit(foreign, ring, NOW, {});
        expect(w.ok ? null : w.reason).toBe('signature_invalid');
      }),
      { numRuns: 200 },
    );
  });
});

// ---- Derive through the service: every field narrows (I 5.4), reservations add up (D 8.3) ----


const svcClock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const svcDb = new SqliteDb({ path: ':memory:' });
await migrate(svcDb, REMIT_MIGRATIONS);
const svc = new RemitService({ db: svcDb, keys: ring, clock: svcClock, options: {} });
afterAll(() => svcDb.close());

const grantsArb = fc.subarray(['pii', 'phi', 'finance']);
const policiesArb = fc.subarray(['refunds', 'baseline@2', 'extra']);
/** Dollars as people ask for them: whole micro-dollars, sub-micro fractions, and sums that float badly. */
const usdArb = fc.oneof(fc.integer({ min: 0, max: 20_000_000 }).map((m) => m / 1e6), fc.constantFrom(0.1, 0.2, 0.3, 0.0000004, 0.0000005, 1e-7, 19.999999));
const deriveBody = fc.record(
  {
    grants: grantsArb,
    policy_set: policiesArb,
    autonomy: fc.constantFrom(...AUTONOMY_ORDER),
    spend: fc.record({ tokens: fc.integer({ min: 0, max: 1200 }), usd: usdArb }, { requiredKeys: [] }),
    ttl_seconds: fc.integer({ min: 1, max: 8000 }),
    nbf: fc.integer({ min: 0, max: 8000 }).map((d) => Math.floor(svcClock.now() / 1000) + d - 100),
  },
  { requiredKeys: [] },
);

describe('derive through the service (I 5.4, D §3, D 8.3)', () => {
  it('a derived remit narrows every field, and children never reserve more than their parent has', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ tokens: fc.integer({ min: 0, max: 1000 }), usd: usdArb }),
        fc.constantFrom(...AUTONOMY_ORDER),
        grantsArb,
        policiesArb,
        fc.array(fc.tuple(fc.nat(), deriveBody, fc.integer({ min: 0, max: 600 })), { minLength: 1, maxLength: 6 }),
        async (spend, autonomy, grants, policySet, derives) => {
          const root = await svc.mint({ tools: ['a.*'], scopes: ['x:*'], grants, spend, autonomy, ttl_seconds: 3600, policy_set: policySet, requested_by: { id: 'ana', role: 'agent', manager: 'lead' } });
          const ids = [root.remit_id];
          for (const [pick, body, advance] of derives) {
            svcClock.advance(advance * 1000);
            const parentId = ids[pick % ids.length]!;
            const parent = await svc.getPayload(parentId);
            let childId: string;
            try {
              childId = (await svc.derive(parentId, body)).remit_id;
            } catch (err) {
              expect(err).toBeInstanceOf(SvcError);
              expect(['remit_widens', 'request_invalid', 'remit_invalid']).toContain((err as SvcError).code);
              continue;
            }
            ids.push(childId);
            const child = await svc.getPayload(childId);
            expect(child.parent).toBe(parent.rid);
            expect(child.run).toBeUndefined();
            expect(child.grants.every((g) => parent.grants.includes(g))).toBe(true);
            expect(parent.policy_set.every((p) => child.policy_set.includes(p))).toBe(true);
            expect(AUTONOMY_ORDER.indexOf(child.autonomy)).toBeLessThanOrEqual(AUTONOMY_ORDER.indexOf(parent.autonomy));
            expect(child.exp).toBeLessThanOrEqual(parent.exp);
            expect(child.nbf).toBeGreaterThanOrEqual(parent.nbf);
            expect(child.nbf).toBeLessThan(child.exp);
            expect(child.spend.tokens).toBeLessThanOrEqual(parent.spend.tokens);
            expect(usdMicro(child.spend.usd)).toBeLessThanOrEqual(usdMicro(parent.spend.usd));
            expect(child.requested_by).toEqual(parent.requested_by);
            // The child's budget is whole micro-dollars: what it spends is what the parent reserved.
            expect(child.spend.usd).toBe(usdMicro(child.spend.usd) / 1e6);
          }
          // D 8.3: for every remit, its children's spend together stays within its own.
          for (const id of ids) {
            const own = await svc.getPayload(id);
            const children = await Promise.all(ids.slice(1).map((c) => svc.getPayload(c)));
            const mine = children.filter((c) => c.parent === own.rid);
            const tokens = mine.reduce((n, c) => n + c.spend.tokens, 0);
            const micros = mine.reduce((n, c) => n + usdMicro(c.spend.usd), 0);
            expect(tokens).toBeLessThanOrEqual(own.spend.tokens);
            expect(micros).toBeLessThanOrEqual(usdMicro(own.spend.usd));
            const reserved = await svc.reserved(id);
            expect(reserved.tokens).toBe(tokens);
            expect(usdMicro(reserved.usd)).toBe(micros);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
