/**
 * Ed25519 through node:crypto (the hot path; decisions §2). Raw 32-byte keys are wrapped in
 * the fixed DER prefixes of PKCS#8 and SPKI so callers only ever handle raw bytes.
 * @noble/ed25519 checks configured public keys for small order (publicKeyProblem).
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import * as noble from '@noble/ed25519';

// noble's synchronous API needs a SHA-512; node:crypto provides it.
noble.hashes.sha512 = (message: Uint8Array) => new Uint8Array(createHash('sha512').update(message).digest());

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

export interface Ed25519KeyPair {
  seed: Buffer;
  publicKey: Buffer;
}

export function generateKeyPair(): Ed25519KeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  return keyPairFromSeed(Buffer.from(seed));
}

export function keyPairFromSeed(seed: Uint8Array): Ed25519KeyPair {
  if (seed.length !== 32) throw new RangeError('an Ed25519 seed is 32 bytes');
  const priv = privateKeyObject(seed);
  const spki = createPublicKey(priv).export({ format: 'der', type: 'spki' });
  return { seed: Buffer.from(seed), publicKey: Buffer.from(spki.subarray(SPKI_PREFIX.length)) };
}

export function privateKeyObject(seed: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

const publicKeyCache = new Map<string, KeyObject>();

/** A node:crypto public key for raw bytes (cached: verification is on every gateway call). */
export function publicKeyObject(raw: Uint8Array): KeyObject {
  const k = Buffer.from(raw).toString('hex');
  let obj = publicKeyCache.get(k);
  if (!obj) {
    obj = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
    publicKeyCache.set(k, obj);
  }
  return obj;
}

export function signBytes(seedOrKey: Uint8Array | KeyObject, message: Uint8Array): Buffer {
  const key = seedOrKey instanceof Uint8Array ? privateKeyObject(seedOrKey) : seedOrKey;
  return sign(null, message, key);
}

/** Verifies; never throws (a malformed key or signature is simply false). */
export function verifyBytes(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    return verify(null, message, publicKeyObject(publicKey), signature);
  } catch {
    return false;
  }
}

/**
 * Why `raw` cannot be trusted as an Ed25519 public key, or null when it can (decisions §2):
 * not 32 bytes, not the canonical encoding of a curve point, or a point of small order (any
 * signature verifies under a small-order key, so such a key would trust every bundle).
 */
export function publicKeyProblem(raw: Uint8Array): string | null {
  if (raw.length !== 32) return `is ${raw.length} bytes, an Ed25519 public key is 32`;
  let point: InstanceType<typeof noble.Point>;
  try {
    point = noble.Point.fromBytes(raw, false); // RFC 8032 strict decoding: y < p, no (x=0, sign=1)
  } catch {
    return 'is not a valid Ed25519 point';
  }
  if (point.isSmallOrder()) return 'is a small-order point (every signature would verify under it)';
  if (!point.isTorsionFree()) return 'is not in the prime-order subgroup';
  return null;
}
