/**
 * The remit token `krt1.<key_id>.<payload>.<signature>` (interface 2.1, decisions §3).
 *
 * `payload` is base64url (no padding) of the exact UTF-8 JSON bytes issued and `signature`
 * is base64url of Ed25519 over those bytes. `key_id` is the literal key id published at
 * GET /v1/keys (`cp-…`, all base64url-alphabet characters, not itself encoded).
 *
 * The decoder never throws: every input it cannot accept comes back as a refusal with a
 * detail saying which token_malformed rule it broke.
 */
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { canonicalJson } from '../encoding/canonical-json.js';
import { jsonDepth, textProblem } from '../encoding/json-limits.js';
import { decodeUtf8Strict } from '../encoding/utf8.js';
import { AUTONOMY_ORDER, type Autonomy, type RemitPayload } from '../types.js';
import { isRecord } from '../util/is-record.js';
import { TOKEN_PREFIX } from './token-prefix.js';

/** The token format prefix; any other prefix is refused (interface 9). */
export { TOKEN_PREFIX };
/** A longer token is token_malformed (decisions §3). */
export const MAX_TOKEN_LENGTH = 16 * 1024;
/** A payload nested deeper than this is token_malformed (decisions §3). */
export const MAX_PAYLOAD_DEPTH = 32;
/** Longest key id accepted inside a token. */
export const MAX_KEY_ID_LENGTH = 128;

const KEY_ID = /^[A-Za-z0-9_-]+$/;

/** Something that signs with a published key: the control-plane KeyRing. */
export interface TokenSigner {
  readonly keyId: string;
  sign(message: Uint8Array): Uint8Array;
}

export interface DecodedToken {
  keyId: string;
  payload: RemitPayload;
  /** The exact bytes the signature covers. */
  payloadBytes: Buffer;
  signature: Buffer;
}

export type DecodeResult = ({ ok: true } & DecodedToken) | { ok: false; detail: string };

/** Issues a token: the payload's canonical JSON bytes, signed with `signer`. */
export function encodeToken(payload: RemitPayload, signer: TokenSigner): string {
  return encodeCanonicalToken(payload, canonicalJson(payload), signer);
}

/** `encodeToken` for a caller that already holds `canonicalJson(payload)` (and stores it too). */
export function encodeCanonicalToken(payload: RemitPayload, canonical: string, signer: TokenSigner): string {
  if (payload.iss !== signer.keyId) throw new Error(`payload iss ${payload.iss} does not name the signing key ${signer.keyId}`);
  const bytes = Buffer.from(canonical, 'utf8');
  return [TOKEN_PREFIX, signer.keyId, encodeBase64url(bytes), encodeBase64url(signer.sign(bytes))].join('.');
}

/**
 * Splits and decodes a token and checks the payload's fields (verification step 1). Does not
 * check the signature. Never throws.
 */
export function decodeToken(token: unknown): DecodeResult {
  if (typeof token !== 'string') return { ok: false, detail: 'token is not a string' };
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, detail: `token is longer than ${MAX_TOKEN_LENGTH} characters` };
  const parts = token.split('.');
  if (parts.length !== 4) return { ok: false, detail: `token has ${parts.length} part${parts.length === 1 ? '' : 's'}, expected 4` };
  const [prefix, keyId, payloadPart, sigPart] = parts as [string, string, string, string];
  if (prefix !== TOKEN_PREFIX) return { ok: false, detail: `unknown token prefix (expected ${TOKEN_PREFIX})` };
  if (!KEY_ID.test(keyId) || keyId.length > MAX_KEY_ID_LENGTH) return { ok: false, detail: 'key_id part is not base64url text' };
  const payloadBytes = payloadPart === '' ? null : decodeBase64url(payloadPart);
  if (!payloadBytes) return { ok: false, detail: 'payload part is not canonical base64url' };
  const signature = sigPart === '' ? null : decodeBase64url(sigPart);
  if (!signature) return { ok: false, detail: 'signature part is not canonical base64url' };

  const text = decodeUtf8Strict(payloadBytes);
  if (text === null) return { ok: false, detail: 'payload is not UTF-8' };
  const depth = jsonDepth(text);
  if (depth > MAX_PAYLOAD_DEPTH) return { ok: false, detail: `payload is nested deeper than ${MAX_PAYLOAD_DEPTH}` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, detail: 'payload is not JSON' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, detail: 'payload is not a JSON object' };
  // Repeated member names (JSON.parse keeps the last) would let a reader that keeps the first
  // see another grant than the one verified; refused like in request bodies.
  const notIJson = textProblem(text);
  if (notIJson) return { ok: false, detail: `payload is not I-JSON: ${notIJson.message}` };
  const problem = payloadProblem(value as Record<string, unknown>);
  if (problem) return { ok: false, detail: problem };
  return { ok: true, keyId, payload: value as RemitPayload, payloadBytes, signature };
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** The most epoch seconds a Date holds (±8.64e15 ms): a time past it has no ISO 8601 form. */
const MAX_EPOCH_SECONDS = 8.64e12;

/** Epoch seconds: interface 2.1 types iat, nbf and exp as integers, and before 1970 is one too. */
function isEpoch(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && Math.abs(v) <= MAX_EPOCH_SECONDS;
}

/** The first required field (interface 2.1) that is missing or of the wrong type, or null. */
export function payloadProblem(p: Record<string, unknown>): string | null {
  for (const f of ['rid', 'iss'] as const) {
    if (typeof p[f] !== 'string' || p[f] === '') return `payload field ${f} must be a non-empty string`;
  }
  for (const f of ['parent', 'run'] as const) {
    if (f in p && (typeof p[f] !== 'string' || p[f] === '')) return `payload field ${f} must be a non-empty string when present`;
  }
  for (const f of ['iat', 'nbf', 'exp'] as const) {
    if (!isEpoch(p[f])) return `payload field ${f} must be an integer (epoch seconds)`;
  }
  for (const f of ['tools', 'scopes', 'grants', 'policy_set'] as const) {
    if (!isStringArray(p[f])) return `payload field ${f} must be an array of strings`;
  }
  const spend = p.spend;
  if (!isRecord(spend)) return 'payload field spend must be an object';
  if (typeof spend.tokens !== 'number' || !Number.isSafeInteger(spend.tokens) || spend.tokens < 0) return 'payload field spend.tokens must be a non-negative integer';
  if (typeof spend.usd !== 'number' || !Number.isFinite(spend.usd) || spend.usd < 0) return 'payload field spend.usd must be a non-negative number';
  if (typeof p.autonomy !== 'string' || !AUTONOMY_ORDER.includes(p.autonomy as Autonomy)) return `payload field autonomy must be one of ${AUTONOMY_ORDER.join(', ')}`;
  const rb = p.requested_by;
  if (!isRecord(rb)) return 'payload field requested_by must be an object';
  for (const f of ['id', 'role', 'manager'] as const) {
    if (typeof rb[f] !== 'string') return `payload field requested_by.${f} must be a string`;
  }
  return null;
}
