/**
 * Remit tokens for gateway tests, signed here with src/keys/ed25519.ts in the decisions §3
 * format (`krt1.<key_id>.<payload>.<signature>`), so the gateway can be tested without a
 * kernel minting them. `rawToken` signs arbitrary bytes for the malformed cases.
 */
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { controlPlaneKeyId } from '../../src/keys/keyring.js';
import type { RemitPayload, TrustedKeys } from '../../src/types.js';

export interface TestSigner extends TrustedKeys {
  keyId: string;
  seed: Buffer;
  publicKey: Buffer;
}

/** A fresh control-plane-like key that also serves as the TrustedKeys holding it. */
export function testSigner(): TestSigner {
  const pair = generateKeyPair();
  const keyId = controlPlaneKeyId(pair.publicKey);
  return { keyId, seed: pair.seed, publicKey: pair.publicKey, lookup: (id) => (id === keyId ? pair.publicKey : null) };
}

/** Trusts several signers at once. */
export function trustAll(...signers: TestSigner[]): TrustedKeys {
  return { lookup: (id) => signers.find((s) => s.keyId === id)?.publicKey ?? null };
}

/** A payload valid for an hour from `nowSeconds`, with every field of interface 2.1. */
export function remitPayload(signer: TestSigner, over: Partial<RemitPayload> = {}, nowSeconds = Math.floor(Date.now() / 1000)): RemitPayload {
  return {
    rid: 'rmt_01TESTREMIT0000000000000000',
    iss: signer.keyId,
    iat: nowSeconds,
    nbf: nowSeconds,
    exp: nowSeconds + 3600,
    tools: ['test.*'],
    scopes: ['test:*'],
    grants: [],
    spend: { tokens: 1000, usd: 1 },
    autonomy: 'autonomous',
    policy_set: [],
    requested_by: { id: 'ana', role: 'agent', manager: 'lead' },
    ...over,
  };
}

/** Signs the exact JSON bytes of `payload` (no canonicalization needed: the bytes are what is signed). */
export function mintToken(signer: TestSigner, payload: RemitPayload | Record<string, unknown>, keyId = signer.keyId): string {
  return rawToken(signer, Buffer.from(JSON.stringify(payload), 'utf8'), keyId);
}

/** Signs arbitrary payload bytes (malformed payloads, wrong keys). */
export function rawToken(signer: TestSigner, bytes: Uint8Array, keyId = signer.keyId, prefix = 'krt1'): string {
  return [prefix, keyId, encodeBase64url(bytes), encodeBase64url(signBytes(signer.seed, bytes))].join('.');
}
