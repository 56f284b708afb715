/**
 * KeyRing.load (decisions §2 keys, §3 remit tokens, §7 signed run heads): a signing key from
 * SVC_SIGNING_KEY keeps the key file's keys trusted for verification, the file records the
 * variable's public key (never its seed), and a key file that cannot be used is named with
 * what is wrong with it.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { verifyHead, signHead, type RunHead } from '../../src/events/event-hash.js';
import { KeyRing, keyFilePath } from '../../src/keys/keyring.js';
import { encodeToken } from '../../src/remit/token.js';
import { clearVerifiedTokenCache, verifyRemit } from '../../src/remit/verify.js';
import type { RemitPayload } from '../../src/types.js';

const NOW = 1_800_000_000;
const T0 = new Date('2026-11-01T00:00:00.000Z');
const T1 = new Date('2026-11-02T00:00:00.000Z');
const T2 = new Date('2026-11-03T00:00:00.000Z');
const seedA = Buffer.alloc(32, 0xa1);
const seedB = Buffer.alloc(32, 0xb2);
const envA = encodeBase64url(seedA);
const envB = encodeBase64url(seedB);
const smallOrder = Buffer.from('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa', 'hex').toString('base64url');

const dirs: string[] = [];
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-keyring-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function payload(iss: string): RemitPayload {
  return {
    rid: 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA',
    iss,
    iat: NOW - 10,
    nbf: NOW - 10,
    exp: NOW + 3600,
    tools: ['billing.*'],
    scopes: ['sql:table:invoices'],
    grants: [],
    spend: { tokens: 10, usd: 1 },
    autonomy: 'supervised',
    policy_set: [],
    requested_by: { id: 'ana', role: 'agent', manager: 'lead' },
    run: 'run_01JAAAAAAAAAAAAAAAAAAAAAAA',
  };
}

const head: RunHead = { run_id: 'run_01JAAAAAAAAAAAAAAAAAAAAAAA', seq: 7, hash: 'sha256:' + 'ab'.repeat(32) };

/** A remit token and a signed head made by `signer`, as a kernel signs them before a restart. */
function signedBy(signer: KeyRing): { token: string; headSignature: string; keyId: string } {
  return { token: encodeToken(payload(signer.keyId), signer), headSignature: signHead((m) => signer.sign(m), head), keyId: signer.keyId };
}

function expectVerifies(ring: KeyRing, signed: { token: string; headSignature: string; keyId: string }): void {
  clearVerifiedTokenCache();
  expect(verifyRemit(signed.token, ring, NOW, {})).toMatchObject({ ok: true });
  expect(verifyHead(ring, signed.keyId, head, signed.headSignature)).toBe(true);
}

function fileOf(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(keyFilePath(dir), 'utf8')) as Record<string, unknown>;
}

beforeEach(() => clearVerifiedTokenCache());

describe('SVC_SIGNING_KEY over an existing key file (D §2, D §3 tokens, D §7 signed heads)', () => {
  it('keeps the file key as a verification-only previous key: tokens and heads it signed still verify', () => {
    const dir = dataDir();
    const fileRing = KeyRing.load(dir, undefined, T0); // svcd's first start makes the file key
    const before = signedBy(fileRing);

    const ring = KeyRing.load(dir, envA, T1);
    expect(ring.keyId).toBe(new KeyRing(seedA).keyId); // signs with the env key
    expect(ring.published().previous).toEqual([{ key_id: fileRing.keyId, public_key: encodeBase64url(fileRing.publicKey), retired_at: T1.toISOString() }]);
    expectVerifies(ring, before);
    // New signatures are the env key's, not the file key's.
    const after = signedBy(ring);
    expect(after.keyId).toBe(ring.keyId);
    expect(verifyHead({ lookup: (id) => (id === fileRing.keyId ? fileRing.publicKey : null) }, fileRing.keyId, head, after.headSignature)).toBe(false);
  });

  it("keeps the file's retired keys too, newest first, and never lists the signing key under previous", () => {
    const dir = dataDir();
    const first = KeyRing.load(dir, undefined, T0);
    const rotated = KeyRing.rotate(dir, T1, undefined);
    const ring = KeyRing.load(dir, envA, T2);
    expect(ring.published().previous.map((p) => [p.key_id, p.retired_at])).toEqual([
      [rotated.keyId, T2.toISOString()],
      [first.keyId, T1.toISOString()],
    ]);
    expectVerifies(ring, signedBy(first));
    expectVerifies(ring, signedBy(rotated));
    // SVC_SIGNING_KEY set to the file's own seed: one key, nothing doubled.
    const own = encodeBase64url(Buffer.from(fileOf(dir).private_key as string, 'base64url'));
    const same = KeyRing.load(dir, own, T2);
    expect(same.keyId).toBe(rotated.keyId);
    expect(same.published().previous.map((p) => p.key_id)).toEqual([new KeyRing(seedA).keyId, first.keyId]);
  });

  it('records the env key in the key file by its public part only, and a switch to another value still verifies what the first signed', () => {
    const dir = dataDir();
    const fileRing = KeyRing.load(dir, undefined, T0);
    const a = KeyRing.load(dir, envA, T1);
    const stored = fileOf(dir);
    expect(stored.env_key).toEqual({ key_id: a.keyId, public_key: encodeBase64url(a.publicKey), since: T1.toISOString() });
    expect(stored.private_key).not.toBe(envA); // the file keeps its own key
    expect(readFileSync(keyFilePath(dir), 'utf8')).not.toContain(envA);
    expect(statSync(keyFilePath(dir)).mode & 0o777).toBe(0o600);

    const b = KeyRing.load(dir, envB, T2);
    expect(b.published().previous).toEqual([
      { key_id: a.keyId, public_key: encodeBase64url(a.publicKey), retired_at: T2.toISOString() },
      { key_id: fileRing.keyId, public_key: encodeBase64url(fileRing.publicKey), retired_at: T1.toISOString() },
    ]);
    expectVerifies(b, signedBy(a));
    expectVerifies(b, signedBy(fileRing));
    expect(readFileSync(keyFilePath(dir), 'utf8')).not.toContain(envB);

    // Back to the file key: both env keys stay trusted, under previous.
    const back = KeyRing.load(dir, undefined, new Date('2026-11-04T00:00:00.000Z'));
    expect(back.keyId).toBe(fileRing.keyId);
    expect(back.published().previous.map((p) => p.key_id)).toEqual([b.keyId, a.keyId]);
    expectVerifies(back, signedBy(a));
    expectVerifies(back, signedBy(b));
    expect(fileOf(dir).env_key).toBeUndefined();
  });

  it('does not rewrite the key file on a restart with the same SVC_SIGNING_KEY', () => {
    const dir = dataDir();
    KeyRing.load(dir, undefined, T0);
    KeyRing.load(dir, envA, T1);
    const text = readFileSync(keyFilePath(dir), 'utf8');
    const again = KeyRing.load(dir, envA, T2);
    expect(readFileSync(keyFilePath(dir), 'utf8')).toBe(text);
    expect(again.published().previous[0]!.retired_at).toBe(T1.toISOString());
  });

  it('a data dir that only ever had SVC_SIGNING_KEY: the file holds public keys only; a later value and a later file key trust the earlier ones', () => {
    const dir = dataDir();
    const a = KeyRing.load(dir, envA, T0);
    expect(a.published().previous).toEqual([]);
    expect(Object.keys(fileOf(dir)).sort()).toEqual(['env_key', 'previous']);
    expect(readFileSync(keyFilePath(dir), 'utf8')).not.toContain(envA);
    expect(() => KeyRing.rotate(dir, T1, undefined)).toThrow(/no control-plane key to rotate in .*control-plane\.json: svcd has only signed with SVC_SIGNING_KEY/);

    const b = KeyRing.load(dir, envB, T1);
    expect(b.published().previous.map((p) => p.key_id)).toEqual([a.keyId]);
    expectVerifies(b, signedBy(a));

    const file = KeyRing.load(dir, undefined, T2); // first start without the variable makes the file key
    expect([a.keyId, b.keyId]).not.toContain(file.keyId);
    expect(file.published().previous.map((p) => p.key_id)).toEqual([b.keyId, a.keyId]);
    expectVerifies(file, signedBy(a));
    expectVerifies(file, signedBy(b));
    expect(KeyRing.load(dir, undefined, T2).keyId).toBe(file.keyId);
  });

  it("still checks the file's keys: a small-order env_key or previous key stops the load (D §2)", () => {
    const dir = dataDir();
    KeyRing.load(dir, envA, T0);
    const good = fileOf(dir);
    writeFileSync(keyFilePath(dir), JSON.stringify({ ...good, env_key: { key_id: 'cp-evil', public_key: smallOrder, since: T0.toISOString() } }));
    expect(() => KeyRing.load(dir, envB, T1)).toThrow(/env_key \(cp-evil\): public key is a small-order point .*refusing to trust it/);
    expect(() => KeyRing.load(dir, undefined, T1)).toThrow(/env_key \(cp-evil\): public key is a small-order point/);
    writeFileSync(keyFilePath(dir), JSON.stringify({ ...good, previous: [{ key_id: 'cp-evil', public_key: smallOrder, retired_at: 'x' }] }));
    expect(() => KeyRing.load(dir, envA, T1)).toThrow(/previous\[0\] \(cp-evil\): public key is a small-order point/);
  });
});

describe('the key file stays private (svcd(8) FILES: mode 0600)', () => {
  it('a key file restored with a wider mode is narrowed to 0600 when svcd loads it, with or without SVC_SIGNING_KEY', () => {
    for (const env of [undefined, envA]) {
      const dir = dataDir();
      const ring = KeyRing.load(dir, undefined, T0);
      chmodSync(keyFilePath(dir), 0o644); // restored from a backup as any file is
      const again = KeyRing.load(dir, env, T1);
      expect(statSync(keyFilePath(dir)).mode & 0o777).toBe(0o600);
      expect(env ? again.published().previous.map((p) => p.key_id) : [again.keyId]).toContain(ring.keyId);
    }
  });
});

describe('an unusable key file is named with what is wrong (svcd(8) KEYS)', () => {
  const cases: Array<[string, (good: string) => string, RegExp]> = [
    ['empty', () => '', /control-plane\.json: the control-plane key file is empty; restore it from a backup/],
    ['truncated', (good) => good.slice(0, 40), /control-plane\.json: the control-plane key file is not JSON \(.+\); restore it/],
    ['not an object', () => '[]', /control-plane\.json: the control-plane key file must be a JSON object/],
    ['no private_key', (good) => JSON.stringify({ ...JSON.parse(good), private_key: undefined }), /control-plane\.json: private_key is missing or not a string/],
    ['no key at all', () => JSON.stringify({ previous: [] }), /control-plane\.json: key_id, public_key and private_key are missing/],
    ['a short seed', (good) => JSON.stringify({ ...JSON.parse(good), private_key: Buffer.alloc(31, 1).toString('base64url') }), /control-plane\.json: private_key is not a 32-byte base64url seed/],
    ['another public key', (good) => JSON.stringify({ ...JSON.parse(good), public_key: encodeBase64url(new KeyRing(seedB).publicKey) }), /control-plane\.json: public_key is not the public key of private_key/],
    ['a key_id not of its key', (good) => JSON.stringify({ ...JSON.parse(good), key_id: 'cp-AAAAAAAAAAAAAAAA' }), /control-plane\.json: key_id cp-AAAAAAAAAAAAAAAA is not the id of its key \(cp-[A-Za-z0-9_-]{16}\)/],
    ['a created_at not a string', (good) => JSON.stringify({ ...JSON.parse(good), created_at: 5 }), /control-plane\.json: created_at must be a string/],
    ['previous not a list', (good) => JSON.stringify({ ...JSON.parse(good), previous: {} }), /control-plane\.json: previous must be a list of retired keys/],
    ['a retired key not base64url', (good) => JSON.stringify({ ...JSON.parse(good), previous: [{ key_id: 'cp-x', public_key: 'a+b=', retired_at: T0.toISOString() }] }), /control-plane\.json: previous\[0\] \(cp-x\): public_key is not unpadded base64url/],
    ['an env_key without since', (good) => JSON.stringify({ ...JSON.parse(good), env_key: { key_id: 'cp-x', public_key: smallOrder } }), /control-plane\.json: env_key must have a key_id, a public_key and a since/],
    ['a small-order env_key', (good) => JSON.stringify({ ...JSON.parse(good), env_key: { key_id: 'cp-x', public_key: smallOrder, since: T0.toISOString() } }), /control-plane\.json: env_key \(cp-x\): public key .*; refusing to trust it/],
  ];
  for (const [name, corrupt, message] of cases) {
    it(`${name}: refused with the file's path, with or without SVC_SIGNING_KEY`, () => {
      const dir = dataDir();
      KeyRing.load(dir, undefined, T0);
      writeFileSync(keyFilePath(dir), corrupt(readFileSync(keyFilePath(dir), 'utf8')));
      expect(() => KeyRing.load(dir, undefined, T1)).toThrow(message);
      expect(() => KeyRing.load(dir, envA, T1)).toThrow(message);
      expect(() => KeyRing.load(dir, undefined, T1)).toThrow(keyFilePath(dir));
    });
  }

  it('an SVC_SIGNING_KEY that is no 32-byte unpadded base64url seed stops the load, naming the variable, never its value (D §1, D §2)', () => {
    for (const bad of ['not a seed!', encodeBase64url(Buffer.alloc(31, 1)), `${envA}=`, Buffer.alloc(32, 0xa1).toString('base64')]) {
      expect(() => KeyRing.load(dataDir(), bad, T0), bad).toThrow(new Error('SVC_SIGNING_KEY must be base64url (no padding) of a 32-byte Ed25519 seed'));
    }
    // Whitespace around it (a newline from a file) is not part of it.
    expect(KeyRing.load(dataDir(), `${envA}\n`, T0).keyId).toBe(KeyRing.load(dataDir(), envA, T0).keyId);
  });

  it('a key file that cannot be read is named too', () => {
    const dir = dataDir();
    mkdirSync(keyFilePath(dir), { recursive: true }); // a directory where the file should be
    expect(existsSync(keyFilePath(dir))).toBe(true);
    expect(() => KeyRing.load(dir, undefined, T0)).toThrow(new RegExp(`${keyFilePath(dir).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: cannot read the control-plane key file: EISDIR`));
  });
});
