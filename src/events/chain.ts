/**
 * Chain verification for replay (decisions §7): every hash recomputed, every link checked,
 * seqs contiguous from 1, and the last event equal to the signed head. Pure: callers pass
 * rows as stored, so a row edited in the database is caught here.
 */
import type { TrustedKeys } from '../types.js';
import { storedEventHashMatches, verifyHead, type CanonicalEventTexts, type HashedEventFields, type RunHead } from './event-hash.js';

/** One stored event row; payload and actor may fail to parse when the row was tampered with. */
export interface StoredEventRow extends HashedEventFields {
  hash: string;
  /** payload and actor exactly as stored, when the caller has them (the fast path of replay). */
  stored?: CanonicalEventTexts;
}

export type ChainErrorReason =
  | 'seq_gap' // seq is not the previous seq + 1 (an event is missing or out of place)
  | 'prev_hash_mismatch' // prev_hash differs from the previous event's hash
  | 'hash_mismatch' // the stored hash differs from the hash of the stored fields
  | 'unparseable' // payload or actor is not JSON (or nested deeper than svc ever writes)
  | 'head_mismatch' // the signed head names a seq/hash that is not the last event
  | 'head_signature_invalid'; // the head signature does not verify

export interface ChainError {
  seq: number;
  reason: ChainErrorReason;
  detail?: string;
}

/** The signed head as stored with the run. */
export interface SignedHead extends RunHead {
  signature: string;
  key_id: string;
}

/**
 * Whether a row's hash matches its fields. A row edited by hand may hold a value svc never
 * writes and JCS cannot serialize (a number too large for a double, 1e400): it matches nothing.
 */
function hashMatches(runId: string, ev: StoredEventRow): boolean {
  try {
    return storedEventHashMatches(runId, ev, ev.stored);
  } catch {
    return false;
  }
}

/** Checks a whole log; an empty result means the chain is valid. */
export function verifyChain(runId: string, events: readonly (StoredEventRow & { unparseable?: boolean })[], head: SignedHead | null, keys: TrustedKeys): ChainError[] {
  const v = new ChainVerifier(runId);
  v.push(events);
  return v.finish(head, keys);
}

/** verifyChain in pieces: the rows in seq order, a page at a time, then the head. */
export class ChainVerifier {
  private readonly errors: ChainError[] = [];
  private prevHash = '';
  private expectSeq = 1;
  private lastSeq = 0;
  private lastHash = '';

  constructor(private readonly runId: string) {}

  push(events: readonly (StoredEventRow & { unparseable?: boolean })[]): void {
    for (const ev of events) {
      if (ev.seq !== this.expectSeq) this.errors.push({ seq: ev.seq, reason: 'seq_gap', detail: `expected seq ${this.expectSeq}` });
      if (ev.prev_hash !== this.prevHash) this.errors.push({ seq: ev.seq, reason: 'prev_hash_mismatch' });
      if (ev.unparseable) this.errors.push({ seq: ev.seq, reason: 'unparseable' });
      else if (!hashMatches(this.runId, ev)) this.errors.push({ seq: ev.seq, reason: 'hash_mismatch' });
      this.prevHash = ev.hash;
      this.expectSeq = ev.seq + 1;
      this.lastSeq = ev.seq;
      this.lastHash = ev.hash;
    }
  }

  finish(head: SignedHead | null, keys: TrustedKeys): ChainError[] {
    if (head) {
      if (!verifyHead(keys, head.key_id, head, head.signature)) {
        this.errors.push({ seq: head.seq, reason: 'head_signature_invalid' });
      }
      if (head.seq !== this.lastSeq || head.hash !== this.lastHash) {
        this.errors.push({ seq: head.seq, reason: 'head_mismatch', detail: `signed head is seq ${head.seq}, log ends at seq ${this.lastSeq}` });
      }
    }
    return this.errors;
  }
}
