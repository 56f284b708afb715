/**
 * Opaque list cursors (decisions §6: `after`/`next` are opaque). A cursor is base64url of a
 * small JSON object naming the last id of the page; lists are ordered by id, and ids sort by
 * creation (decisions §1), so "newest first" is "id descending".
 */
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { SvcError } from '../errors.js';

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
