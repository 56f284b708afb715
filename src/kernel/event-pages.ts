/**
 * Reads of a run's log bounded in bytes as well as in events. An event's payload can be a
 * MiB (a proposal's arguments, a posted note), so a page of 1,000 of them could be a GiB held
 * in the heap and written to one socket; pages stop at `EVENT_PAGE_BYTES` of stored event
 * text instead (always holding one event, however large), and say where the next starts.
 */
import type { SqlDb } from '../store/sql-db.js';
import { rowsWithin } from './cursor.js';
import type { EventRow } from './run-store.js';

/** Stored payload and actor text one read of the log returns at most, past its first event. */
export const EVENT_PAGE_BYTES = 8 * 1024 * 1024;

/**
 * Events with `from <= seq < to`, `limit` at most: the first ones (`oldest`) or the last ones
 * (`newest`), in seq order either way, cut where their text passes `maxBytes`.
 */
export async function eventRows(
  db: SqlDb,
  runId: string,
  // The newest of an open range would read rows appended between the two reads, unbounded.
  q: { from: number; limit: number; maxBytes?: number } & ({ keep: 'oldest'; to?: number } | { keep: 'newest'; to: number }),
): Promise<EventRow[]> {
  const to = q.to ?? Number.MAX_SAFE_INTEGER;
  const order = q.keep === 'oldest' ? 'ASC' : 'DESC';
  // octet_length takes a value's size from its record header, without reading the value.
  const sizes = await db.all<{ seq: number; n: number }>(
    `SELECT seq, octet_length(payload) + octet_length(actor) AS n FROM run_events WHERE run_id = ? AND seq >= ? AND seq < ? ORDER BY seq ${order} LIMIT ?`,
    [runId, q.from, to, q.limit],
  );
  const fit = rowsWithin(sizes.map(({ n }) => Number(n)), q.maxBytes ?? EVENT_PAGE_BYTES);
  if (fit === 0) return [];
  const last = Number(sizes[fit - 1]!.seq);
  // The log only grows at its end, past `to` or past the last seq sized: the same rows.
  const [low, high] = q.keep === 'oldest' ? [q.from, last + 1] : [last, to];
  return db.all<EventRow>('SELECT * FROM run_events WHERE run_id = ? AND seq >= ? AND seq < ? ORDER BY seq', [runId, low, high]);
}
