/**
 * Bundle signatures and ids (interface 4.1 rule 1, decisions 4): Ed25519 over JCS(bundle),
 * `bnd_` + 26 hex of sha256(JCS(bundle)).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleId, keyFileSeed, signBundle, verifyBundleSignature, type PublisherKeyFile } from '../../src/bundle/sign.js';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { SvcError } from '../../src/errors.js';
import { generatePublisherKey, loadPublishers } from '../../src/keys/publishers.js';
import { verifyBytes } from '../../src/keys/ed25519.js';
import { ROOT } from '../helpers/daemon.js';

const demo = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/demo-publisher.json'), 'utf8')) as PublisherKeyFile;
const trusted = loadPublishers([`${demo.key_id}:${demo.public_key}`]);
const bundle = { name: 'b', version: '1.0.0', workflows: { w: { input_schema: {}, steps: [] } }, description: 'é ✓' };

function code(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SvcError);
    return (err as SvcError).code;
  }
  return 'none';
}

describe('bundle ids (D 4)', () => {
  it('is bnd_ + the first 26 hex digits of sha256(JCS(bundle))', () => {
    const expected = 'bnd_' + createHash('sha256').update(canonicalJson(bundle)).digest('hex').slice(0, 26);
    expect(bundleId(bundle)).toBe(expected);
    expect(bundleId(bundle)).toMatch(/^bnd_[0-9a-f]{26}$/);
  });

  it('does not depend on member order, but on content', () => {
    const reordered = { workflows: bundle.workflows, description: bundle.description, version: '1.0.0', name: 'b' };
    expect(bundleId(reordered)).toBe(bundleId(bundle));
    expect(bundleId({ ...bundle, version: '1.0.1' })).not.toBe(bundleId(bundle));
  });
});

describe('signatures (I 4.1 rule 1)', () => {
  it('signs JCS(bundle) with Ed25519, base64url without padding', () => {
    const sig = signBundle(bundle, demo);
    expect(sig.key_id).toBe('demo-publisher');
    expect(sig.signature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    const ok = verifyBytes(Buffer.from(demo.public_key, 'base64url'), Buffer.from(canonicalJson(bundle)), Buffer.from(sig.signature, 'base64url'));
    expect(ok).toBe(true);
    expect(() => verifyBundleSignature(bundle, sig, trusted)).not.toThrow();
  });

  it('verifies regardless of member order (JCS)', () => {
    const sig = signBundle(bundle, demo);
    const reordered = JSON.parse(JSON.stringify({ workflows: bundle.workflows, name: 'b', description: bundle.description, version: '1.0.0' }));
    expect(() => verifyBundleSignature(reordered, sig, trusted)).not.toThrow();
  });

  it('refuses unsigned, malformed, unknown-key, tampered and wrong-key signatures', () => {
    const sig = signBundle(bundle, demo);
    expect(code(() => verifyBundleSignature(bundle, undefined, trusted))).toBe('bundle_signature_invalid');
    expect(code(() => verifyBundleSignature(bundle, { key_id: 'demo-publisher' }, trusted))).toBe('bundle_signature_invalid');
    expect(code(() => verifyBundleSignature(bundle, 'abc', trusted))).toBe('bundle_signature_invalid');
    expect(code(() => verifyBundleSignature(bundle, { ...sig, key_id: 'stranger' }, trusted))).toBe('bundle_signature_invalid');
    expect(code(() => verifyBundleSignature({ ...bundle, version: '9.9.9' }, sig, trusted))).toBe('bundle_signature_invalid');
    // The usual cause, an edit after signing, is named with the remedy.
    expect(() => verifyBundleSignature({ ...bundle, version: '9.9.9' }, sig, trusted)).toThrow(/changed after it was signed.*sign it again \(svc bundle sign\)$/);
    expect(code(() => verifyBundleSignature(bundle, { ...sig, signature: sig.signature + '=' }, trusted))).toBe('bundle_signature_invalid');
    const other = generatePublisherKey();
    const forged = signBundle(bundle, { ...other, key_id: 'demo-publisher' });
    expect(code(() => verifyBundleSignature(bundle, forged, trusted))).toBe('bundle_signature_invalid');
  });

  it('checks key files: the seed must be 32 bytes and match the public key', () => {
    expect(keyFileSeed(demo)).toHaveLength(32);
    expect(() => keyFileSeed({ ...demo, private_key: 'AAAA' })).toThrow(/32-byte/);
    expect(() => keyFileSeed({ ...demo, public_key: generatePublisherKey().public_key })).toThrow(/does not belong/);
    expect(() => keyFileSeed({ ...demo, key_id: '' })).toThrow(/key_id/);
  });
});
