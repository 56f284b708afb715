/**
 * Bundle signatures and ids (interface 4.1 rule 1, decisions 4): Ed25519 over the UTF-8 bytes
 * of JCS(bundle), base64url without padding; `bundle_id` = `bnd_` + the first 26 hex digits of
 * sha256(JCS(bundle)), so the same content always has the same id whoever signed it.
 */
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { canonicalJson, sha256Hex } from '../encoding/canonical-json.js';
import { SvcError } from '../errors.js';
import { keyPairFromSeed, signBytes, verifyBytes } from '../keys/ed25519.js';
import type { TrustedKeys } from '../types.js';

/** A publisher key pair file as `svc keys gen` writes it (base64url; private_key is the 32-byte seed). */
export interface PublisherKeyFile {
  key_id: string;
  public_key: string;
  private_key: string;
}

export interface BundleSignature {
  key_id: string;
  signature: string;
}

/** The content address of a bundle. */
export function bundleId(bundle: unknown): string {
  return 'bnd_' + sha256Hex(canonicalJson(bundle)).slice(0, 26);
}

/** The seed of a key file, checked against its public key; throws an Error saying what is wrong. */
export function keyFileSeed(key: PublisherKeyFile): Buffer {
  if (!key || typeof key.key_id !== 'string' || key.key_id === '') throw new Error('key file has no key_id');
  const seed = typeof key.private_key === 'string' ? decodeBase64url(key.private_key) : null;
  if (!seed || seed.length !== 32) throw new Error('key file private_key must be base64url of a 32-byte Ed25519 seed');
  const pub = encodeBase64url(keyPairFromSeed(seed).publicKey);
  if (typeof key.public_key === 'string' && key.public_key !== pub) throw new Error('key file public_key does not belong to its private_key');
  return seed;
}

/** Signs JCS(bundle) with a publisher key file. */
export function signBundle(bundle: unknown, key: PublisherKeyFile): BundleSignature {
  const seed = keyFileSeed(key);
  const sig = signBytes(seed, Buffer.from(canonicalJson(bundle), 'utf8'));
  return { key_id: key.key_id, signature: encodeBase64url(sig) };
}

/**
 * Checks a signature against the trusted publishers; throws 422 `bundle_signature_invalid`
 * when the bundle is unsigned, the key is unknown, or the signature does not verify.
 */
export function verifyBundleSignature(bundle: unknown, signature: unknown, publishers: TrustedKeys): void {
  const sig = signature as Partial<BundleSignature> | undefined | null;
  if (sig === undefined || sig === null) throw new SvcError('bundle_signature_invalid', 'the bundle is unsigned: post {bundle, signature: {key_id, signature}}', {});
  if (typeof sig !== 'object' || typeof sig.key_id !== 'string' || typeof sig.signature !== 'string') {
    throw new SvcError('bundle_signature_invalid', 'the bundle is unsigned: signature must be {key_id: string, signature: string}', {});
  }
  const publicKey = publishers.lookup(sig.key_id);
  if (!publicKey) throw new SvcError('bundle_signature_invalid', `key ${sig.key_id} is not a trusted publisher key (svcd trusts the keys given as --publisher KEY_ID:PUBLIC_KEY or in kernel.publishers)`, { key_id: sig.key_id });
  const raw = decodeBase64url(sig.signature);
  let message: Buffer;
  try {
    message = Buffer.from(canonicalJson(bundle), 'utf8');
  } catch {
    throw new SvcError('bundle_signature_invalid', 'the bundle has no canonical JSON form', { key_id: sig.key_id });
  }
  if (!raw || !verifyBytes(publicKey, message, raw)) {
    throw new SvcError('bundle_signature_invalid', `the signature does not verify under key ${sig.key_id}: the bundle was changed after it was signed, or signed with another key of that id; sign it again (svc bundle sign)`, { key_id: sig.key_id });
  }
}
