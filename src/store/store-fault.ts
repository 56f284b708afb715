/**
 * A store's own failure told apart from a bug: SQLite's disk, permission, corruption and lock
 * codes, what a failed fsync or write of the WAL reports, and PostgreSQL's `PG_` faults. Used for the 503 such a failure
 * answers (daemon/http/common.ts) and for /v1/health while writes fail (SqliteDb.writeFault).
 */
import { shortened } from '../encoding/cut-text.js';

/** SQLite result codes of a store that is failing (disk, permissions, a damaged file), not of a bug. */
const STORE_FAULT = /^SQLITE_(FULL|IOERR|READONLY|CORRUPT|NOTADB|CANTOPEN|PERM|NOMEM|PROTOCOL|BUSY|LOCKED)/;
/**
 * What the PostgreSQL store (pg-db.ts) makes of a server that is failing or out of reach: its
 * SQLSTATE or the socket's code behind `PG_` (it gives other errors, bugs, as they came).
 */
const PG_FAULT = /^PG_/;
/** Of those, the ones a moment's wait may cure (pg-db.ts isTransientPgFault). */
const PG_TRANSIENT = /^PG_(40001|40P01|53300|57P03|08|E|CONNECTION)/;
/** What a failed fsync or write of the WAL reports (the store's group commit). */
const DISK_FAULT: ReadonlySet<string> = new Set(['EIO', 'ENOSPC', 'EDQUOT', 'EROFS']);

/** True for a code a failed fsync or WAL write reports (EIO, ENOSPC, EDQUOT, EROFS). */
export function isDiskFaultCode(code: unknown): code is string {
  return typeof code === 'string' && DISK_FAULT.has(code);
}

/**
 * A store's own failure (the disk full, the file read-only or damaged, an fsync that failed),
 * with SQLite's words (the store is svc's own: no secret in them), or null for anything else.
 * `transient`: a lock another connection held for a moment (BUSY, LOCKED), worth a 503 but no
 * sign the store itself is failing.
 */
export function storeFault(err: unknown): { code: string; message: string; transient: boolean } | null {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string') return null;
  // A store closing under a request svcd's drain cut off: no sign the store is failing.
  if (code === 'SVC_STORE_CLOSED') return { code, message: (err as Error).message, transient: true };
  if (!STORE_FAULT.test(code) && !isDiskFaultCode(code) && !PG_FAULT.test(code)) return null;
  const raw = (err as Error).message ?? code;
  return { code, message: shortened(raw, 200), transient: /^SQLITE_(BUSY|LOCKED)/.test(code) || PG_TRANSIENT.test(code) };
}
