/**
 * verifyRemit: interface 5.3 steps 1–7 in order, decisions §3 (token_malformed rules,
 * signature_invalid cases, no leeway unless configured) and the verified-token cache.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { KeyRing, controlPlaneKeyId } from '../../src/keys/keyring.js';
import { encodeToken } from '../../src/remit/token.js';
import { LruCache, clearVerifiedTokenCache, verifiedTokenCacheSize, verifyRemit } from '../../src/remit/verify.js';
import type { RemitPayload, TrustedKeys } from '../../src/types.js';

const NOW = 1_800_000_000;
const ring = new KeyRing(generateKeyPair().seed);
const other = new KeyRing(generateKeyPair().seed);

function payload(over: Partial<RemitPayload> = {}): RemitPayload {
  return {
    rid: 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA',
    iss: ring.keyId,
    iat: NOW - 10,
    nbf: NOW - 10,
    exp: NOW + 3600,
    tools: ['billing.*', 'crm.lookup'],
    scopes: ['sql:table:invoices', 'http:host:*', 'mcp:files:*'],
    grants: ['pii'],
    spend: { tokens: 1000, usd: 5 },
    autonomy: 'supervised',
    policy_set: ['refunds'],
    requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
    ...over,
  };
}

/** A token over arbitrary bytes, signed by `signer` under `keyId`. */
function rawToken(bytes: Buffer, keyId = ring.keyId, signer: KeyRing = ring): string {
  return ['krt1', keyId, encodeBase64url(bytes), encodeBase64url(signer.sign(bytes))].join('.');
}
function jsonToken(value: unknown, keyId = ring.keyId, signer: KeyRing = ring): string {
  return rawToken(Buffer.from(JSON.stringify(value)), keyId, signer);
}

const good = encodeToken(payload(), ring);

beforeEach(() => clearVerifiedTokenCache());

describe('verifyRemit success (I 5.3)', () => {
  it('returns the payload for a valid token and skips steps whose call field is undefined', () => {
    const r = verifyRemit(good, ring, NOW, {});
    expect(r).toEqual({ ok: true, payload: payload() });
  });

  it('passes every step when the call is inside the remit', () => {
    const r = verifyRemit(good, ring, NOW, { run_id: 'run_x', tool: 'billing.refund', scopes: ['sql:table:invoices', 'http:host:api.example.com'], writes: true });
    expect(r.ok).toBe(true);
  });
});

describe('step 1: token_malformed (D §3)', () => {
  const cases: Array<[string, string]> = [
    ['longer than 16 KiB', 'krt1.' + ring.keyId + '.' + 'A'.repeat(16 * 1024) + '.AA'],
    ['three parts', good.split('.').slice(0, 3).join('.')],
    ['five parts', good + '.AA'],
    ['one part', 'garbage'],
    ['empty string', ''],
    ['unknown prefix', good.replace(/^krt1/, 'krt2')],
    ['upper-case prefix', good.replace(/^krt1/, 'KRT1')],
    ['padded payload', (() => { const p = good.split('.'); p[2] += '='; return p.join('.'); })()],
    ['payload with a character outside the alphabet', (() => { const p = good.split('.'); p[2] = p[2]!.slice(0, 4) + '+' + p[2]!.slice(5); return p.join('.'); })()],
    ['signature with non-canonical trailing bits', (() => { const p = good.split('.'); const s = p[3]!; const last = s[s.length - 1]!; const alt = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'; p[3] = s.slice(0, -1) + alt[alt.indexOf(last) + 1]; return p.join('.'); })()],
    ['empty signature', good.split('.').slice(0, 3).join('.') + '.'],
    ['empty payload', (() => { const p = good.split('.'); p[2] = ''; return p.join('.'); })()],
    ['key id with a dot-free but non-alphabet character', (() => { const p = good.split('.'); p[1] = 'cp-!!'; return p.join('.'); })()],
    ['key id with a non-alphabet character before base64url text', (() => { const p = good.split('.'); p[1] = '!' + p[1]; return p.join('.'); })()],
    ['payload not JSON', rawToken(Buffer.from('not json'))],
    ['payload not UTF-8', rawToken(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))],
    ['payload an array', jsonToken([payload()])],
    ['payload a string', jsonToken('x')],
    ['payload null', jsonToken(null)],
    ['payload nested deeper than 32', jsonToken({ ...payload(), extra: JSON.parse('['.repeat(32) + ']'.repeat(32)) })],
    ['payload with a member name repeated (last would win in JSON.parse)', rawToken(Buffer.from(JSON.stringify(payload()).slice(0, -1) + ',"autonomy":"autonomous"}'))],
    ['payload holding a lone surrogate', rawToken(Buffer.from(JSON.stringify(payload()).slice(0, -1) + ',"x":"\\ud800"}'))],
    ['payload nested deeper than 32 inside a string-bearing value', rawToken(Buffer.from(JSON.stringify(payload()).slice(0, -1) + ',"x":' + '{"a":'.repeat(40) + '1' + '}'.repeat(40) + '}'))],
  ];
  for (const field of ['rid', 'iss', 'iat', 'nbf', 'exp', 'tools', 'scopes', 'grants', 'spend', 'autonomy', 'policy_set', 'requested_by'] as const) {
    const p = payload() as unknown as Record<string, unknown>;
    delete p[field];
    cases.push([`missing ${field}`, jsonToken(p)]);
  }
  const wrongTypes: Array<[string, Record<string, unknown>]> = [
    ['rid a number', { rid: 5 }],
    ['iss null', { iss: null }],
    ['iat a string', { iat: String(NOW) }],
    ['nbf a float', { nbf: NOW + 0.5 }],
    ['exp a string', { exp: 'tomorrow' }],
    ['tools a string', { tools: 'billing.*' }],
    ['scopes with a number', { scopes: ['a', 1] }],
    ['grants an object', { grants: { pii: true } }],
    ['spend.tokens a float', { spend: { tokens: 1.5, usd: 1 } }],
    ['spend.usd a string', { spend: { tokens: 1, usd: '1' } }],
    ['spend.usd missing', { spend: { tokens: 1 } }],
    ['spend an array', { spend: [1, 2] }],
    ['autonomy unknown', { autonomy: 'godmode' }],
    ['policy_set null', { policy_set: null }],
    ['requested_by.manager missing', { requested_by: { id: 'a', role: 'b' } }],
    ['requested_by a string', { requested_by: 'ana' }],
    ['run a number', { run: 7 }],
    ['parent null', { parent: null }],
    // I 2.1: run and parent are strings naming a run and a remit; an empty name names nothing.
    ['run empty', { run: '' }],
    ['parent empty', { parent: '' }],
    // null is typeof "object": refused as malformed, never read as one (the decoder never throws).
    ['spend null', { spend: null }],
    ['spend.usd negative', { spend: { tokens: 1, usd: -0.5 } }],
    // Past ±8.64e15 ms a Date has no ISO form, which the time refusals' details print.
    ['nbf past the last time a Date holds', { nbf: 8.64e12 + 1 }],
    ['exp before the first time a Date holds', { exp: -8.64e12 - 1 }],
    ['requested_by null', { requested_by: null }],
  ];
  for (const [name, over] of wrongTypes) cases.push([name, jsonToken({ ...payload(), ...over })]);
  // JSON.parse reads 1e999 as Infinity: no budget (I 2.1 spend.usd is a number; JCS has no Infinity).
  cases.push(['spend.usd beyond a double (1e999)', rawToken(Buffer.from(JSON.stringify(payload()).replace('"usd":5', '"usd":1e999')))]);

  for (const [name, token] of cases) {
    it(`refuses a token with ${name}`, () => {
      const r = verifyRemit(token, ring, NOW, {});
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.reason).toBe('token_malformed');
        expect(r.detail).toEqual(expect.any(String));
      }
    });
  }

  it('refuses non-string input without throwing', () => {
    expect(verifyRemit(undefined as unknown as string, ring, NOW, {})).toMatchObject({ ok: false, reason: 'token_malformed' });
    expect(verifyRemit(42 as unknown as string, ring, NOW, {})).toMatchObject({ ok: false, reason: 'token_malformed' });
  });

  it('refuses a validly signed token longer than 16 KiB, for its length', () => {
    const huge = encodeToken(payload({ grants: ['x'.repeat(13_000)] }), ring);
    expect(huge.length).toBeGreaterThan(16 * 1024);
    expect(verifyRemit(huge, ring, NOW, {})).toMatchObject({ ok: false, reason: 'token_malformed', detail: expect.stringMatching(/longer than 16384/) });
  });

  it('accepts a token under 16 KiB when otherwise valid', () => {
    const big = encodeToken(payload({ grants: ['x'.repeat(11_000)] }), ring);
    expect(big.length).toBeLessThanOrEqual(16 * 1024);
    expect(verifyRemit(big, ring, NOW, {}).ok).toBe(true);
  });

  it('accepts a token of exactly 16 KiB (D §3: only a longer one is malformed)', () => {
    // Unpadded base64url never has a length of 4n+1, so the filler steps one byte at a time until the token lands on the limit.
    const tokenWith = (fill: number) => encodeToken(payload({ grants: ['x'.repeat(fill)] }), ring);
    let fill = Math.floor(((16 * 1024 - tokenWith(0).length) * 3) / 4) - 2;
    while (tokenWith(fill).length < 16 * 1024) fill++;
    const t = tokenWith(fill);
    expect(t.length).toBe(16 * 1024);
    expect(verifyRemit(t, ring, NOW, {}).ok).toBe(true);
  });

  it('accepts a remit with no budget at all (I 2.1: spend is non-negative, zero included)', () => {
    expect(verifyRemit(encodeToken(payload({ spend: { tokens: 0, usd: 0 } }), ring), ring, NOW, {}).ok).toBe(true);
  });

  it('checks malformation before the signature (step 1 before step 2)', () => {
    const p = payload() as unknown as Record<string, unknown>;
    delete p.exp;
    const unsigned = ['krt1', ring.keyId, encodeBase64url(JSON.stringify(p)), encodeBase64url(Buffer.alloc(64))].join('.');
    expect(verifyRemit(unsigned, ring, NOW, {})).toMatchObject({ reason: 'token_malformed' });
  });
});

describe('step 2: signature_invalid (D §3)', () => {
  it('refuses an unknown key_id', () => {
    const t = encodeToken(payload({ iss: other.keyId }), other);
    expect(verifyRemit(t, ring, NOW, {})).toMatchObject({ ok: false, reason: 'signature_invalid' });
  });

  it('refuses a key_id that differs from the payload iss', () => {
    const keys: TrustedKeys = { lookup: (id) => (id === ring.keyId ? ring.publicKey : id === other.keyId ? other.publicKey : null) };
    const t = jsonToken(payload({ iss: other.keyId }), ring.keyId, ring);
    expect(verifyRemit(t, keys, NOW, {})).toMatchObject({ ok: false, reason: 'signature_invalid' });
  });

  it('refuses a signature by another key under our key_id', () => {
    const t = jsonToken(payload(), ring.keyId, other);
    expect(verifyRemit(t, ring, NOW, {})).toMatchObject({ ok: false, reason: 'signature_invalid' });
  });

  it('refuses a payload changed after signing (one byte)', () => {
    const bytes = Buffer.from(JSON.stringify(payload()));
    const sig = ring.sign(bytes);
    const tampered = Buffer.from(JSON.stringify(payload({ autonomy: 'autonomous' })));
    const t = ['krt1', ring.keyId, encodeBase64url(tampered), encodeBase64url(sig)].join('.');
    expect(verifyRemit(t, ring, NOW, {})).toMatchObject({ ok: false, reason: 'signature_invalid' });
  });

  it('refuses a flipped signature bit and a signature of the wrong length', () => {
    const parts = good.split('.');
    const sig = Buffer.from(parts[3]!, 'base64url');
    sig[10]! ^= 1;
    expect(verifyRemit([...parts.slice(0, 3), encodeBase64url(sig)].join('.'), ring, NOW, {})).toMatchObject({ reason: 'signature_invalid' });
    expect(verifyRemit([...parts.slice(0, 3), encodeBase64url(sig.subarray(0, 63))].join('.'), ring, NOW, {})).toMatchObject({ reason: 'signature_invalid' });
  });

  it('verifies under a previous (rotated) key still trusted for verification (D §2)', () => {
    const old = new KeyRing(generateKeyPair().seed);
    const rotated = new KeyRing(generateKeyPair().seed, [{ key_id: old.keyId, public_key: encodeBase64url(old.publicKey), retired_at: '2026-01-01T00:00:00.000Z' }]);
    const t = encodeToken(payload({ iss: old.keyId }), old);
    expect(verifyRemit(t, rotated, NOW, {}).ok).toBe(true);
  });

  it('uses the signed bytes exactly: a non-canonical but signed JSON payload verifies', () => {
    const text = Buffer.from(JSON.stringify(payload(), null, 2));
    expect(verifyRemit(rawToken(text), ring, NOW, {}).ok).toBe(true);
  });

  it('checks key id derivation of a signer without a KeyRing', () => {
    const pair = generateKeyPair();
    const keyId = controlPlaneKeyId(pair.publicKey);
    const bytes = Buffer.from(JSON.stringify(payload({ iss: keyId })));
    const t = ['krt1', keyId, encodeBase64url(bytes), encodeBase64url(signBytes(pair.seed, bytes))].join('.');
    expect(verifyRemit(t, { lookup: (id) => (id === keyId ? pair.publicKey : null) }, NOW, {}).ok).toBe(true);
  });
});

describe('step 3: remit_expired / remit_not_yet_valid (D §3: no leeway unless configured)', () => {
  const t = encodeToken(payload({ nbf: NOW, exp: NOW + 60 }), ring);
  it('is valid from nbf through exp - 1', () => {
    expect(verifyRemit(t, ring, NOW, {}).ok).toBe(true);
    expect(verifyRemit(t, ring, NOW + 59, {}).ok).toBe(true);
  });
  it('is expired at exp and after', () => {
    expect(verifyRemit(t, ring, NOW + 60, {})).toMatchObject({ ok: false, reason: 'remit_expired' });
    expect(verifyRemit(t, ring, NOW + 10_000, {})).toMatchObject({ ok: false, reason: 'remit_expired' });
  });
  it('is not yet valid before nbf', () => {
    expect(verifyRemit(t, ring, NOW - 1, {})).toMatchObject({ ok: false, reason: 'remit_not_yet_valid' });
  });
  it('the detail names the verifier\'s own clock, so a skewed gateway is told apart from a bad remit', () => {
    const early = verifyRemit(t, ring, NOW - 1, {});
    expect(early.ok ? '' : early.detail).toContain(`the clock here reads ${new Date((NOW - 1) * 1000).toISOString().replace('.000Z', 'Z')}`);
    const late = verifyRemit(t, ring, NOW + 60, {});
    expect(late.ok ? '' : late.detail).toContain(`the clock here reads ${new Date((NOW + 60) * 1000).toISOString().replace('.000Z', 'Z')}`);
    // ...and the remit's own times, as the times they are.
    expect(early.ok ? '' : early.detail).toContain(`not valid before ${new Date(NOW * 1000).toISOString()}`);
    expect(late.ok ? '' : late.detail).toContain(`expired at ${new Date((NOW + 60) * 1000).toISOString()}`);
  });
  it('applies a configured skew both ways', () => {
    expect(verifyRemit(t, ring, NOW - 5, {}, { skewSeconds: 5 }).ok).toBe(true);
    expect(verifyRemit(t, ring, NOW + 64, {}, { skewSeconds: 5 }).ok).toBe(true);
    expect(verifyRemit(t, ring, NOW + 65, {}, { skewSeconds: 5 })).toMatchObject({ reason: 'remit_expired' });
  });
  it('reports expiry before the later steps', () => {
    expect(verifyRemit(t, ring, NOW + 60, { tool: 'nope.nope', scopes: ['x'], writes: true, run_id: 'run_other' })).toMatchObject({ reason: 'remit_expired' });
  });
});

describe('steps 4–7 (I 5.3)', () => {
  const bound = encodeToken(payload({ run: 'run_A', autonomy: 'propose' }), ring);
  it('step 4: remit_run_mismatch when run is set and differs', () => {
    expect(verifyRemit(bound, ring, NOW, { run_id: 'run_B' })).toMatchObject({ ok: false, reason: 'remit_run_mismatch' });
    expect(verifyRemit(bound, ring, NOW, { run_id: null })).toMatchObject({ ok: false, reason: 'remit_run_mismatch' });
    expect(verifyRemit(bound, ring, NOW, { run_id: 'run_A' }).ok).toBe(true);
  });
  it('step 4: an unbound remit accepts any run', () => {
    expect(verifyRemit(good, ring, NOW, { run_id: 'run_B' }).ok).toBe(true);
  });
  it('step 5: tool_not_in_remit', () => {
    expect(verifyRemit(good, ring, NOW, { tool: 'crm.export' })).toMatchObject({ reason: 'tool_not_in_remit' });
    expect(verifyRemit(good, ring, NOW, { tool: 'Billing.refund' })).toMatchObject({ reason: 'tool_not_in_remit' });
    expect(verifyRemit(good, ring, NOW, { tool: 'crm.lookup' }).ok).toBe(true);
    expect(verifyRemit(good, ring, NOW, { tool: 'billing.anything' }).ok).toBe(true);
  });
  it('step 6: every scope must be granted', () => {
    expect(verifyRemit(good, ring, NOW, { scopes: ['sql:table:invoices', 'sql:table:users'] })).toMatchObject({ reason: 'scope_not_granted' });
    expect(verifyRemit(good, ring, NOW, { scopes: ['sql:table:invoices', 'http:host:x.example'] }).ok).toBe(true);
    expect(verifyRemit(good, ring, NOW, { scopes: [] }).ok).toBe(true);
  });
  it('step 6: a connector without derivation needs the literal <connector>:* pattern', () => {
    expect(verifyRemit(good, ring, NOW, { scopes: ['mcp:files:*'] }).ok).toBe(true);
    const exactOnly = encodeToken(payload({ scopes: ['mcp:files:readme'] }), ring);
    expect(verifyRemit(exactOnly, ring, NOW, { scopes: ['mcp:files:*'] })).toMatchObject({ reason: 'scope_not_granted' });
  });
  it("step 6: a scope the connector spells another way is granted by that spelling, given exactly (an MCP server's literal files:*)", () => {
    const literal = encodeToken(payload({ scopes: ['files:*'] }), ring);
    const alternatives = (scope: string) => (scope === 'mcp:files:*' ? ['files:*'] : []);
    expect(verifyRemit(literal, ring, NOW, { scopes: ['mcp:files:*'], scopeAlternatives: alternatives }).ok).toBe(true);
    expect(verifyRemit(literal, ring, NOW, { scopes: ['mcp:files:*'] })).toMatchObject({ reason: 'scope_not_granted' });
    // The alternative is compared as a literal, not matched as a pattern: `fi*` does not grant the server `files`.
    const prefix = encodeToken(payload({ scopes: ['fi*'] }), ring);
    expect(verifyRemit(prefix, ring, NOW, { scopes: ['mcp:files:*'], scopeAlternatives: alternatives })).toMatchObject({ reason: 'scope_not_granted' });
  });
  it('step 7: autonomy_too_low for writes under observe and propose only', () => {
    expect(verifyRemit(bound, ring, NOW, { writes: true })).toMatchObject({ reason: 'autonomy_too_low' });
    expect(verifyRemit(bound, ring, NOW, { writes: false }).ok).toBe(true);
    const observe = encodeToken(payload({ autonomy: 'observe' }), ring);
    expect(verifyRemit(observe, ring, NOW, { writes: true })).toMatchObject({ reason: 'autonomy_too_low' });
    for (const a of ['supervised', 'autonomous'] as const) {
      expect(verifyRemit(encodeToken(payload({ autonomy: a }), ring), ring, NOW, { writes: true }).ok).toBe(true);
    }
  });
  it('reports the first failing step in table order', () => {
    const call = { run_id: 'run_B', tool: 'x.y', scopes: ['nope'], writes: true };
    expect(verifyRemit(bound, ring, NOW, call)).toMatchObject({ reason: 'remit_run_mismatch' });
    expect(verifyRemit(bound, ring, NOW, { ...call, run_id: 'run_A' })).toMatchObject({ reason: 'tool_not_in_remit' });
    expect(verifyRemit(bound, ring, NOW, { ...call, run_id: 'run_A', tool: 'billing.x' })).toMatchObject({ reason: 'scope_not_granted' });
    expect(verifyRemit(bound, ring, NOW, { ...call, run_id: 'run_A', tool: 'billing.x', scopes: ['http:host:a'] })).toMatchObject({ reason: 'autonomy_too_low' });
  });
});

describe('verified-token cache (issue 2)', () => {
  it('caches the signature result but still checks time, run, tool, scope and autonomy', () => {
    const t = encodeToken(payload({ run: 'run_A', exp: NOW + 10 }), ring);
    expect(verifyRemit(t, ring, NOW, {}).ok).toBe(true);
    expect(verifiedTokenCacheSize()).toBe(1);
    expect(verifyRemit(t, ring, NOW + 10, {})).toMatchObject({ reason: 'remit_expired' });
    expect(verifyRemit(t, ring, NOW, { run_id: 'run_B' })).toMatchObject({ reason: 'remit_run_mismatch' });
    expect(verifyRemit(t, ring, NOW, { tool: 'x.y' })).toMatchObject({ reason: 'tool_not_in_remit' });
  });

  it('does not let a cached token verify under keys that no longer trust its key', () => {
    expect(verifyRemit(good, ring, NOW, {}).ok).toBe(true);
    expect(verifyRemit(good, other, NOW, {})).toMatchObject({ reason: 'signature_invalid' });
    const impostor: TrustedKeys = { lookup: (id) => (id === ring.keyId ? other.publicKey : null) };
    expect(verifyRemit(good, impostor, NOW, {})).toMatchObject({ reason: 'signature_invalid' });
  });

  // How fast a repeat is belongs to `npm run bench -- remit` (a timed assertion failed under load).
  it('returns a frozen payload so a caller cannot poison the cache', () => {
    const r = verifyRemit(good, ring, NOW, {});
    expect(r.ok && Object.isFrozen(r.payload) && Object.isFrozen(r.payload.tools)).toBe(true);
  });
});
