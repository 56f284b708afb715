/**
 * Publisher keys: the Ed25519 keys trusted to sign bundles (interface 4.1 rule 1, decisions §2).
 * They come from the kernel config `publishers: [{key_id, public_key}]`, repeated
 * `--publisher KEY_ID:PUBLIC_KEY` flags and `SVC_PUBLISHERS` (comma-separated), all collected
 * as `KEY_ID:PUBLIC_KEY` strings. A key that is not 32 bytes of canonical base64url, not a
 * valid point, or of small order is refused with an error naming it, and svcd does not start.
 */
import { createHash } from 'node:crypto';
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import type { TrustedKeys } from '../types.js';
import { generateKeyPair, publicKeyProblem } from './ed25519.js';

/** Publisher key ids: letters, digits, `.`, `_`, `-`; 1–128 characters. */
export const PUBLISHER_KEY_ID = /^[A-Za-z0-9._-]{1,128}$/;

export interface PublisherKey {
  key_id: string;
  /** base64url (no padding) of the 32-byte public key. */
  public_key: string;
  raw: Uint8Array;
}

/** The key id `svc keys gen` gives a new publisher key: `pub-` + first 16 chars of base64url(sha256(public key)). */
export function publisherKeyId(publicKey: Uint8Array): string {
  return 'pub-' + encodeBase64url(createHash('sha256').update(publicKey).digest()).slice(0, 16);
}

/** A new publisher key pair file body `{key_id, public_key, private_key}` (private_key: base64url seed). */
export function generatePublisherKey(): { key_id: string; public_key: string; private_key: string } {
  const pair = generateKeyPair();
  return { key_id: publisherKeyId(pair.publicKey), public_key: encodeBase64url(pair.publicKey), private_key: encodeBase64url(pair.seed) };
}

/** Parses and checks one `KEY_ID:PUBLIC_KEY`; throws an Error naming the key on any problem. */
export function parsePublisher(spec: string): PublisherKey {
  const text = String(spec).trim();
  const colon = text.indexOf(':');
  // A key file's path (or its public key alone) is what a newcomer passes first.
  if (colon <= 0) throw new Error(`publisher key "${text}" must be KEY_ID:PUBLIC_KEY (svc keys publisher KEYFILE prints it for a key file)`);
  const keyId = text.slice(0, colon);
  const publicKey = text.slice(colon + 1);
  if (!PUBLISHER_KEY_ID.test(keyId)) throw new Error(`publisher key id "${keyId}" may use only letters, digits, ".", "_" and "-" (1-128 characters)`);
  const raw = decodeBase64url(publicKey);
  if (!raw || publicKey === '') throw new Error(`publisher key ${keyId}: public key is not unpadded base64url`);
  const problem = publicKeyProblem(raw);
  if (problem) throw new Error(`publisher key ${keyId}: public key ${problem}; refusing to trust it`);
  return { key_id: keyId, public_key: publicKey, raw: new Uint8Array(raw) };
}

/** The trusted publisher keys, by key id. */
export class PublisherKeys implements TrustedKeys {
  private readonly byId = new Map<string, PublisherKey>();

  constructor(keys: readonly PublisherKey[] = []) {
    for (const k of keys) {
      const seen = this.byId.get(k.key_id);
      if (seen && seen.public_key !== k.public_key) throw new Error(`publisher key ${k.key_id} is configured twice with different public keys`);
      this.byId.set(k.key_id, k);
    }
  }

  lookup(keyId: string): Uint8Array | null {
    return this.byId.get(keyId)?.raw ?? null;
  }

  /** Every trusted publisher key, in configuration order. */
  list(): Array<{ key_id: string; public_key: string }> {
    return [...this.byId.values()].map((k) => ({ key_id: k.key_id, public_key: k.public_key }));
  }

  get size(): number {
    return this.byId.size;
  }
}

/**
 * Parses every `KEY_ID:PUBLIC_KEY` (config, SVC_PUBLISHERS and --publisher, already collected
 * by svcd); collects all problems and throws one Error listing them.
 */
export function loadPublishers(specs: readonly string[]): PublisherKeys {
  const keys: PublisherKey[] = [];
  const problems: string[] = [];
  for (const spec of specs) {
    try {
      keys.push(parsePublisher(spec));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length === 0) {
    try {
      return new PublisherKeys(keys);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  throw new Error(problems.join('; '));
}
