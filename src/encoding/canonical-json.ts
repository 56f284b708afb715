/**
 * RFC 8785 (JCS) canonical JSON through the maintained `canonicalize` package, and the
 * hashes built on it: bundle ids, event hashes and action ids are computed over these bytes.
 */
import * as crypto from 'node:crypto';
import canonicalizeImpl from 'canonicalize';

const canonicalizeFn = canonicalizeImpl as unknown as (value: unknown) => string | undefined;

/** JCS text of a JSON value. Throws on values JSON cannot carry (undefined at top level, cycles). */
export function canonicalJson(value: unknown): string {
  const text = canonicalizeFn(value);
  if (text === undefined) throw new TypeError('value has no canonical JSON form');
  return text;
}

// crypto.hash (Node ≥ 20.12) hashes in one call, about twice as fast as a Hash object for the
// short inputs of event hashes; the engines field allows older 20.x, which takes the fallback.
const oneShot = (crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: 'hex') => string }).hash;

export function sha256Hex(data: string | Uint8Array): string {
  return oneShot ? oneShot('sha256', data, 'hex') : crypto.createHash('sha256').update(data).digest('hex');
}

/** sha256 hex of the canonical JSON of `value`. */
export function canonicalHash(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
