/**
 * The one remit check (interface 5.3 steps 1–7). Pure: the caller passes the trusted keys,
 * the time and what the call asks for; the answer is the payload or the first refusal, in
 * the order of the table. Steps whose call field is undefined are skipped, so the kernel
 * can check "is this token valid for this run" with the same function the gateway uses.
 *
 * Decoding and the Ed25519 check (steps 1–2) are cached per token string in a bounded LRU:
 * a repeat costs a map lookup. The cache never skips steps 3–7, and a hit re-checks that the
 * key id still resolves to the same public key, so a key that stops being trusted stops
 * verifying at once.
 */
import { verifyBytes } from '../keys/ed25519.js';
import type { RefusalReason, RemitCallCheck, RemitPayload, TrustedKeys, VerifyResult } from '../types.js';
import { deepFreeze } from '../util/deep-freeze.js';
import { anyScopeMatches, anyToolMatches } from './patterns.js';
import { decodeToken } from './token.js';

export interface VerifyOptions {
  /** Clock leeway for nbf and exp, seconds. (Default: 0; svcd reads SVC_CLOCK_SKEW_SECONDS) */
  skewSeconds?: number;
}

interface CacheEntry {
  payload: RemitPayload;
  publicKey: Uint8Array;
}

/** A bounded least-recently-used map (Map keeps insertion order; a hit re-inserts). */
export class LruCache<K, V> {
  private readonly map = new Map<K, V>();
  constructor(readonly capacity: number) {}

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: K, value: V): void {
    if (this.map.has(key)) this.map.delete(key);
    else if (this.map.size >= this.capacity) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(key, value);
  }

  get size(): number {
    return this.map.size;
  }

  clear(): void {
    this.map.clear();
  }
}

/** Verified tokens, by token string. (Default capacity: 10000 entries) */
const verified = new LruCache<string, CacheEntry>(10_000);

/** Empties the verified-token cache (tests; key rotation does not need it). */
export function clearVerifiedTokenCache(): void {
  verified.clear();
}

/** Number of cached verified tokens. */
export function verifiedTokenCacheSize(): number {
  return verified.size;
}

function refuse(reason: RefusalReason, detail: string): VerifyResult {
  return { ok: false, reason, detail };
}

function sameKey(a: Uint8Array, b: Uint8Array): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Steps 1–2: decode and check the signature (cached). */
function verifySignature(token: string, keys: TrustedKeys): { ok: true; payload: RemitPayload } | { ok: false; reason: RefusalReason; detail: string } {
  const hit = verified.get(token);
  if (hit) {
    const current = keys.lookup(hit.payload.iss);
    if (current && sameKey(current, hit.publicKey)) return { ok: true, payload: hit.payload };
  }
  const d = decodeToken(token);
  if (!d.ok) return { ok: false, reason: 'token_malformed', detail: d.detail };
  const publicKey = keys.lookup(d.keyId);
  if (!publicKey) return { ok: false, reason: 'signature_invalid', detail: `unknown key_id ${d.keyId}` };
  if (d.payload.iss !== d.keyId) return { ok: false, reason: 'signature_invalid', detail: `key_id ${d.keyId} differs from the payload's iss` };
  if (!verifyBytes(publicKey, d.payloadBytes, d.signature)) return { ok: false, reason: 'signature_invalid', detail: `signature does not verify under key ${d.keyId}` };
  const payload = deepFreeze(d.payload);
  verified.set(token, { payload, publicKey: Uint8Array.from(publicKey) });
  return { ok: true, payload };
}

/**
 * Steps 1–2 alone: whether `token` is well formed and signed by a trusted key, whatever its
 * times. Replay checks a run's stored token with it (a remit long expired still says what the
 * run was given). The returned payload is frozen.
 */
export function verifyRemitSignature(token: string, keys: TrustedKeys): { ok: true; payload: RemitPayload } | { ok: false; detail: string } {
  const sig = verifySignature(token, keys);
  return sig.ok ? sig : { ok: false, detail: sig.detail };
}

/**
 * Interface 5.3 steps 1–7 for `token` at `nowSeconds`. The returned payload is frozen (it is
 * shared with the cache); copy it before changing it.
 */
export function verifyRemit(token: string, keys: TrustedKeys, nowSeconds: number, call: RemitCallCheck, opts: VerifyOptions = {}): VerifyResult {
  const sig = verifySignature(token, keys);
  if (!sig.ok) return refuse(sig.reason, sig.detail);
  const p = sig.payload;
  const skew = opts.skewSeconds ?? 0;

  // Step 3. exp is the first second at which the remit is no longer valid.
  // The details name this verifier's clock too: a gateway whose clock is off from the kernel's
  // that minted the remit otherwise refused with two times that both looked right.
  if (nowSeconds - skew >= p.exp) return refuse('remit_expired', `remit ${p.rid} expired at ${new Date(p.exp * 1000).toISOString()} (the clock here reads ${clockReads(nowSeconds)})`);
  if (p.nbf > nowSeconds + skew) return refuse('remit_not_yet_valid', `remit ${p.rid} is not valid before ${new Date(p.nbf * 1000).toISOString()} (the clock here reads ${clockReads(nowSeconds)}; behind the issuer's? see SVC_CLOCK_SKEW_SECONDS)`);

  // Step 4.
  if (call.run_id !== undefined && p.run !== undefined && p.run !== call.run_id) {
    return refuse('remit_run_mismatch', `remit ${p.rid} is bound to run ${p.run}, not ${call.run_id ?? 'none'}`);
  }
  // Step 5.
  if (call.tool !== undefined && !anyToolMatches(p.tools, call.tool)) {
    return refuse('tool_not_in_remit', `tool ${call.tool} is not in remit ${p.rid}`);
  }
  // Step 6: every scope the call touches must be granted (gateway call rule 3).
  if (call.scopes !== undefined) {
    for (const scope of call.scopes) {
      if (anyScopeMatches(p.scopes, scope) || (call.scopeAlternatives?.(scope) ?? []).some((alt) => p.scopes.includes(alt))) continue;
      return refuse('scope_not_granted', `scope ${scope} is not granted by remit ${p.rid}`);
    }
  }
  // Step 7: observe and propose may read and propose, never write.
  if (call.writes === true && (p.autonomy === 'observe' || p.autonomy === 'propose')) {
    return refuse('autonomy_too_low', `${call.tool ? `tool ${call.tool}` : 'the call'} writes; remit ${p.rid} has autonomy ${p.autonomy}`);
  }
  return { ok: true, payload: p };
}

/** `nowSeconds` as ISO 8601 for a refusal's detail (whole seconds, as the checks compare). */
function clockReads(nowSeconds: number): string {
  const d = new Date(nowSeconds * 1000);
  return Number.isFinite(d.getTime()) ? d.toISOString().replace('.000Z', 'Z') : String(nowSeconds);
}
