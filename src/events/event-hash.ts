/**
 * The hash chain of decisions §7: `hash` = hex sha256 of JCS({run_id, seq, prev_hash, kind,
 * payload, actor, at}); `prev_hash` is the previous event's hash, "" for seq 1. The head
 * `{run_id, seq, hash}` is signed with the control-plane key after every append, so a log cut
 * short at its end no longer matches its signed head.
 */
import { canonicalJson, sha256Hex } from '../encoding/canonical-json.js';
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { verifyBytes } from '../keys/ed25519.js';
import type { RunEvent, TrustedKeys } from '../types.js';

/** What an event hash covers. */
export interface HashedEventFields {
  seq: number;
  prev_hash: string;
  kind: string;
  payload: Record<string, unknown>;
  actor: RunEvent['actor'];
  at: string;
}

/** Hex sha256 of the canonical JSON of the event with its run id. */
export function eventHash(runId: string, ev: HashedEventFields): string {
  return sha256Hex(eventHashInput(runId, ev));
}

/**
 * JCS({run_id, seq, prev_hash, kind, payload, actor, at}), written with its members already
 * in JCS order (actor, at, kind, payload, prev_hash, run_id, seq) so that only `payload` and
 * `actor` go through the general canonicalizer: replay hashes every event of a log. RFC 8785
 * serializes strings as JSON.stringify does, and `seq` is a safe integer. Equal to
 * canonicalJson of the object (test/unit/events-chain.test.ts checks it as a property).
 */
export function eventHashInput(runId: string, ev: HashedEventFields): string {
  if (!Number.isSafeInteger(ev.seq)) return canonicalJson({ run_id: runId, seq: ev.seq, prev_hash: ev.prev_hash, kind: ev.kind, payload: ev.payload, actor: ev.actor, at: ev.at });
  return eventHashInputOfTexts(runId, ev, ev.payload === undefined ? undefined : canonicalJson(ev.payload), ev.actor === undefined ? undefined : canonicalJson(ev.actor));
}

/** The canonical texts of an event's payload and actor, as the store keeps them. */
export interface CanonicalEventTexts {
  payload: string;
  actor: string;
}

/** JCS texts of payload and actor: written to the store, so that replay can hash the stored text as it is. */
export function canonicalEventTexts(ev: Pick<HashedEventFields, 'payload' | 'actor'>): CanonicalEventTexts {
  return { payload: canonicalJson(ev.payload), actor: canonicalJson(ev.actor ?? null) };
}

/** eventHashInput with payload and actor given as their JCS texts (`seq` a safe integer). */
function eventHashInputOfTexts(runId: string, ev: Omit<HashedEventFields, 'payload' | 'actor'>, payloadText: string | undefined, actorText: string | undefined): string {
  const members: string[] = [];
  if (actorText !== undefined) members.push(`"actor":${actorText}`);
  if (ev.at !== undefined) members.push(`"at":${JSON.stringify(ev.at)}`);
  if (ev.kind !== undefined) members.push(`"kind":${JSON.stringify(ev.kind)}`);
  if (payloadText !== undefined) members.push(`"payload":${payloadText}`);
  if (ev.prev_hash !== undefined) members.push(`"prev_hash":${JSON.stringify(ev.prev_hash)}`);
  members.push(`"run_id":${JSON.stringify(runId)}`, `"seq":${JSON.stringify(ev.seq)}`);
  return `{${members.join(',')}}`;
}

/** The hash of an event whose payload and actor are already JCS texts (the live path computes them once). */
export function eventHashOfTexts(runId: string, ev: Omit<HashedEventFields, 'payload' | 'actor'>, texts: CanonicalEventTexts): string {
  return sha256Hex(eventHashInputOfTexts(runId, ev, texts.payload, texts.actor));
}

/**
 * Whether a stored event's hash matches, reading payload and actor as stored. The writer stores
 * their JCS texts, so hashing the stored text is enough when it matches: sha256 then says the
 * text is the canonical form of what was hashed. Only when it does not (a row written before
 * texts were stored canonically, or one edited since) are the parsed values canonicalized, so a
 * reformatted but equal row is not reported.
 */
export function storedEventHashMatches(runId: string, ev: HashedEventFields & { hash: string }, stored?: CanonicalEventTexts): boolean {
  if (stored && Number.isSafeInteger(ev.seq) && eventHashOfTexts(runId, ev, stored) === ev.hash) return true;
  return eventHash(runId, ev) === ev.hash;
}

/** A run's head: the last event's seq and hash. seq 0 / "" for an empty log. */
export interface RunHead {
  run_id: string;
  seq: number;
  hash: string;
}

/** The exact bytes the head signature covers: JCS({run_id, seq, hash}). */
export function headMessage(head: RunHead): Buffer {
  return Buffer.from(canonicalJson({ run_id: head.run_id, seq: head.seq, hash: head.hash }), 'utf8');
}

/** Signs a head: base64url (no padding) of Ed25519 over headMessage. */
export function signHead(sign: (message: Uint8Array) => Uint8Array, head: RunHead): string {
  return encodeBase64url(sign(headMessage(head)));
}

/** True when `signature` is a valid signature of `head` under the key named `keyId`. */
export function verifyHead(keys: TrustedKeys, keyId: string, head: RunHead, signature: string): boolean {
  const pub = keys.lookup(keyId);
  const sig = decodeBase64url(signature);
  if (!pub || !sig) return false;
  return verifyBytes(pub, headMessage(head), sig);
}
