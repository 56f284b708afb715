/**
 * Opaque list cursors (decisions §6: `after`/`next` are opaque). A cursor is base64url of a
 * small JSON object naming the last id of the page; lists are ordered by id, and ids sort by
 * creation (decisions §1), so "newest first" is "id descending".
 */
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { SvcError } from '../errors.js';
import type { SqlDb } from '../store/sql-db.js';

export function encodeCursor(lastId: string): string {
  return encodeBase64url(JSON.stringify({ v: 1, id: lastId }));
}

/** The id a cursor points after; 400 request_invalid for anything that is not one of ours. */
export function decodeCursor(cursor: string, param = 'after'): string {
  const bytes = decodeBase64url(cursor);
  let parsed: unknown = null;
  if (bytes) {
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch {
      parsed = null;
    }
  }
  const id = (parsed as { v?: unknown; id?: unknown } | null)?.id;
  if ((parsed as { v?: unknown } | null)?.v !== 1 || typeof id !== 'string' || id.length === 0 || id.length > 64) {
    throw new SvcError('request_invalid', `${param} is not a cursor this service issued`, { path: `/querystring/${param}` });
  }
  return id;
}

/**
 * One page of `table`, newest first by `idColumn`, with equality filters (undefined ones are
 * left out) and the opaque cursor. Table and column names come from code, never from input.
 *
 * With `bytes`, the page also stops before the rows' `bytes.column` values together pass
 * `bytes.max` (it always holds one row), and `next` then points after its last row: 500 runs
 * whose states each carried a 900 KB input made one 270 MB answer, held the event loop for 20
 * seconds and the heap for gigabytes. The sizes are read first, without the values.
 */
export async function pageNewestFirst<Row extends object>(
  db: SqlDb,
  q: { table: string; idColumn: string; filters: Record<string, string | undefined>; after?: string; limit: number; bytes?: { column: string; max: number } },
): Promise<{ page: Row[]; next: string | null }> {
  const where: string[] = [];
  const params: Array<string | number> = [];
  for (const [column, value] of Object.entries(q.filters)) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (q.after) {
    where.push(`${q.idColumn} < ?`);
    params.push(decodeCursor(q.after));
  }
  const whereText = where.length ? 'WHERE ' + where.join(' AND ') : '';
  const select = (limit: number) =>
    // The limit is bound, not spelled into the text: the store keeps one prepared statement per
    // distinct SQL text for its lifetime, so a limit in the text made every page size a client
    // asked for (1 to 500, times each filter combination) another statement held for good.
    db.all<Row>(`SELECT * FROM ${q.table} ${whereText} ORDER BY ${q.idColumn} DESC LIMIT ?`, [...params, limit]);
  const nextAfter = (page: Row[]) => encodeCursor(String((page[page.length - 1] as Record<string, unknown>)[q.idColumn]));
  if (!q.bytes) {
    const rows = await select(q.limit + 1);
    const page = rows.slice(0, q.limit);
    return { page, next: rows.length > q.limit ? nextAfter(page) : null };
  }
  // octet_length takes a value's size from its record header, without reading the value.
  const sizes = await db.all<{ id: unknown; n: number }>(
    `SELECT ${q.idColumn} AS id, octet_length(${q.bytes.column}) AS n FROM ${q.table} ${whereText} ORDER BY ${q.idColumn} DESC LIMIT ?`,
    [...params, q.limit + 1],
  );
  const fit = rowsWithin(sizes.slice(0, q.limit).map(({ n }) => Number(n)), q.bytes.max);
  if (fit === 0) return { page: [], next: null };
  const page = await select(fit);
  // A row written between the two reads (newest first: a run created meanwhile) moves the page:
  // its last row is then not the one sized, and `next` is given so the row pushed out of it is
  // on the next page rather than lost from the listing.
  const last = page.length > 0 ? (page[page.length - 1] as Record<string, unknown>)[q.idColumn] : undefined;
  const moved = page.length !== fit || last !== sizes[fit - 1]!.id;
  return { page, next: page.length > 0 && (sizes.length > fit || moved) ? nextAfter(page) : null };
}

/**
 * How many of the leading rows, of these sizes, a page holds before their sizes together pass
 * `max`: at least one when there is any, however large (a page always moves a reader on).
 */
export function rowsWithin(sizes: readonly number[], max: number): number {
  let total = 0;
  let fit = 0;
  for (const n of sizes) {
    total += n;
    if (fit > 0 && total > max) break;
    fit++;
  }
  return fit;
}
