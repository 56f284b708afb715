/**
 * The remit token codec `krt1.<key_id>.<payload>.<signature>` (interface 2.1, decisions §3):
 * encoding, the depth scan, required fields, and fast-check properties: the decoder and
 * verifyRemit never throw on arbitrary input, they only refuse.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { KeyRing } from '../../src/keys/keyring.js';
import { jsonDepth } from '../../src/encoding/json-limits.js';
import { MAX_TOKEN_LENGTH, decodeToken, encodeToken, payloadProblem } from '../../src/remit/token.js';
import { verifyRemit } from '../../src/remit/verify.js';
import type { RemitPayload } from '../../src/types.js';

const ring = new KeyRing(generateKeyPair().seed);
const payload: RemitPayload = {
  rid: 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA',
  iss: ring.keyId,
  iat: 1000,
  nbf: 1000,
  exp: 2000,
  tools: ['a.*'],
  scopes: ['x:y:*'],
  grants: [],
  spend: { tokens: 10, usd: 0.5 },
  autonomy: 'observe',
  policy_set: [],
  requested_by: { id: 'i', role: 'r', manager: 'm' },
};

describe('encodeToken / decodeToken (D §3)', () => {
  it('has four parts: krt1, the literal key id, base64url of the payload bytes, base64url of the signature', () => {
    const t = encodeToken(payload, ring);
    const [prefix, keyId, p, s] = t.split('.');
    expect(prefix).toBe('krt1');
    expect(keyId).toBe(ring.keyId);
    expect(JSON.parse(Buffer.from(p!, 'base64url').toString('utf8'))).toEqual(payload);
    expect(Buffer.from(s!, 'base64url')).toHaveLength(64);
    expect(t).not.toContain('=');
    const d = decodeToken(t);
    expect(d.ok && d.keyId === ring.keyId && d.payload.rid === payload.rid).toBe(true);
  });

  it('signs the canonical JSON, so equal payloads give equal tokens', () => {
    const reordered = JSON.parse(JSON.stringify({ ...payload, requested_by: { manager: 'm', role: 'r', id: 'i' } })) as RemitPayload;
    expect(encodeToken(reordered, ring)).toBe(encodeToken(payload, ring));
  });

  it('refuses to issue a token whose iss is not the signing key', () => {
    expect(() => encodeToken({ ...payload, iss: 'cp-other' }, ring)).toThrow(/iss/);
  });

  it('keeps unknown payload members (they are signed) and accepts optional parent and run', () => {
    const t = encodeToken({ ...payload, parent: 'rmt_p', run: 'run_r', ...({ future: 1 } as object) }, ring);
    const d = decodeToken(t);
    expect(d.ok).toBe(true);
    if (d.ok) expect(d.payload).toMatchObject({ parent: 'rmt_p', run: 'run_r', future: 1 });
  });
});

describe('jsonDepth', () => {
  it('counts nested containers, ignoring brackets inside strings', () => {
    expect(jsonDepth('1')).toBe(0);
    expect(jsonDepth('{}')).toBe(1);
    expect(jsonDepth('{"a":[{"b":[]}]}')).toBe(4);
    expect(jsonDepth('{"a":"[[[[{{{{"}')).toBe(1);
    expect(jsonDepth('{"a":"\\"[[["}')).toBe(1);
    expect(jsonDepth('[' .repeat(33) + ']'.repeat(33))).toBe(33);
  });
  it('a payload at depth 32 is accepted, 33 refused (D §3: deeper than 32)', () => {
    const nest = (n: number) => JSON.parse('['.repeat(n) + ']'.repeat(n));
    const ok = { ...payload, x: nest(31) }; // the object itself is depth 1
    const bad = { ...payload, x: nest(32) };
    expect(jsonDepth(JSON.stringify(ok))).toBe(32);
    const okBytes = Buffer.from(JSON.stringify(ok));
    const badBytes = Buffer.from(JSON.stringify(bad));
    const mk = (b: Buffer) => ['krt1', ring.keyId, encodeBase64url(b), encodeBase64url(ring.sign(b))].join('.');
    expect(decodeToken(mk(okBytes)).ok).toBe(true);
    expect(decodeToken(mk(badBytes))).toMatchObject({ ok: false, detail: expect.stringMatching(/deeper than 32/) });
  });
});

describe('payloadProblem (required fields and types, I 2.1)', () => {
  it('accepts a complete payload and names the first bad field', () => {
    expect(payloadProblem(payload as unknown as Record<string, unknown>)).toBeNull();
    expect(payloadProblem({ ...payload, iat: 1.5 })).toMatch(/iat/);
    expect(payloadProblem({ ...payload, iat: '1' })).toMatch(/iat/);
    expect(payloadProblem({ ...payload, iat: -1, nbf: -1 })).toBeNull(); // an integer, as interface 2.1 types it
    expect(payloadProblem({ ...payload, rid: '' })).toMatch(/rid/);
    expect(payloadProblem({ ...payload, spend: { tokens: -1, usd: 0 } })).toMatch(/spend.tokens/);
    expect(payloadProblem({ ...payload, requested_by: { id: 'a', role: 1, manager: 'c' } })).toMatch(/requested_by.role/);
  });
});

const b64json = (v: unknown) => encodeBase64url(Buffer.from(JSON.stringify(v) ?? 'null'));

describe('the decoder never throws, only refuses (property)', () => {
  it('arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => {
        const d = decodeToken(s);
        expect(d.ok).toBe(false);
        const v = verifyRemit(s, ring, 1500, { tool: 'a.b', scopes: ['x:y:z'], writes: true, run_id: 'r' });
        expect(v.ok).toBe(false);
        if (!v.ok) expect(v.reason).toBe('token_malformed');
      }),
      { numRuns: 3000 },
    );
  });

  it('well-shaped tokens with arbitrary parts and JSON payloads', () => {
    const part = fc.oneof(fc.string({ maxLength: 40 }), fc.base64String({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 }).map((b) => encodeBase64url(b)));
    const jsonPayload = fc.oneof(
      fc.jsonValue({ maxDepth: 40 }).map(b64json),
      fc.record({ ...Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, fc.oneof(fc.constant(v), fc.jsonValue({ maxDepth: 3 }))])) }).map(b64json),
    );
    fc.assert(
      fc.property(fc.constantFrom('krt1', 'krt2', '', 'KRT1'), fc.oneof(fc.constant(ring.keyId), part), fc.oneof(jsonPayload, part), part, (prefix, keyId, p, s) => {
        const token = [prefix, keyId, p, s].join('.');
        const v = verifyRemit(token, ring, 1500, { tool: 'a.b', scopes: ['x:y:z'], writes: false });
        expect(v.ok).toBe(false);
        if (!v.ok) expect(['token_malformed', 'signature_invalid']).toContain(v.reason);
      }),
      { numRuns: 3000 },
    );
  });

  it('over-long and deeply nested inputs are refused quickly', () => {
    const long = 'krt1.' + ring.keyId + '.' + 'A'.repeat(MAX_TOKEN_LENGTH) + '.AA';
    expect(decodeToken(long)).toMatchObject({ ok: false });
    const deep = ['krt1', ring.keyId, encodeBase64url('['.repeat(5000) + ']'.repeat(5000)), 'AA'].join('.');
    expect(decodeToken(deep)).toMatchObject({ ok: false, detail: expect.stringMatching(/deeper/) });
  });
});
