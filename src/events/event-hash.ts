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
  const members: string[] = [];
  if (ev.actor !== undefined) members.push(`"actor":${canonicalJson(ev.actor)}`);
  if (ev.at !== undefined) members.push(`"at":${JSON.stringify(ev.at)}`);
  if (ev.kind !== undefined) members.push(`"kind":${JSON.stringify(ev.kind)}`);
  if (ev.payload !== undefined) members.push(`"payload":${canonicalJson(ev.payload)}`);
  if (ev.prev_hash !== undefined) members.push(`"prev_hash":${JSON.stringify(ev.prev_hash)}`);
  members.push(`"run_id":${JSON.stringify(runId)}`, `"seq":${JSON.stringify(ev.seq)}`);
  return `{${members.join(',')}}`;
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
