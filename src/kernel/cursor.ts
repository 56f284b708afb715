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
 */
export async function pageNewestFirst<Row extends object>(
  db: SqlDb,
  q: { table: string; idColumn: string; filters: Record<string, string | undefined>; after?: string; limit: number },
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
  // The limit is bound, not spelled into the text: the store keeps one prepared statement per
  // distinct SQL text for its lifetime, so a limit in the text made every page size a client
  // asked for (1 to 500, times each filter combination) another statement held for good.
  params.push(q.limit + 1);
  const rows = await db.all<Row>(`SELECT * FROM ${q.table} ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY ${q.idColumn} DESC LIMIT ?`, params);
  const page = rows.slice(0, q.limit);
  return { page, next: rows.length > q.limit ? encodeCursor(String((page[page.length - 1] as Record<string, unknown>)[q.idColumn])) : null };
}
