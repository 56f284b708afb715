/**
 * RFC 8785 (JCS) canonical JSON through the maintained `canonicalize` package, and the
 * hashes built on it: bundle ids, event hashes and action ids are computed over these bytes.
 */
import { createHash } from 'node:crypto';
import canonicalizeImpl from 'canonicalize';

const canonicalizeFn = canonicalizeImpl as unknown as (value: unknown) => string | undefined;

/** JCS text of a JSON value. Throws on values JSON cannot carry (undefined at top level, cycles). */
export function canonicalJson(value: unknown): string {
  const text = canonicalizeFn(value);
  if (text === undefined) throw new TypeError('value has no canonical JSON form');
  return text;
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** sha256 hex of the canonical JSON of `value`. */
export function canonicalHash(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
