/**
 * One process owns a data directory (docs/design.md): its SQLite files, the group commit's
 * fsync barrier and the startup recovery (pending gateway claims become `unknown`) all assume
 * no other live writer. A second svcd on the same directory stops at startup, naming the
 * process that holds it, instead of sharing it silently.
 *
 * The lock is an operating-system file lock, not a pid in a file: `<dir>/owner.lock` is a small
 * SQLite database its owner holds in EXCLUSIVE locking mode for as long as it runs. Taking it
 * is atomic (two starters cannot both win), it does not depend on pids (two containers may
 * both run as pid 1), and the kernel drops it when the owner dies however it dies, so there is
 * no stale lock to take over. The file itself is never removed: a starter that opened it just
 * before an unlink would lock a file nobody else sees. `<dir>/svcd.pid` names the holder for
 * the error message only.
 *
 * The same process may open a directory again (tests reopen a store in-process): the lock
 * is counted, and released when the last user releases it.
 *
 * POSIX file locks belong to the process and drop when it closes ANY descriptor of the file:
 * nothing in svcd may open `owner.lock` itself (not even to read it) while it holds the lock.
 */
import { readdirSync, readFileSync, readlinkSync, realpathSync, unlinkSync } from 'node:fs';
import { writeFileDurably } from '../util/durable-file.js';
import { ensureDir } from '../util/ensure-dir.js';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openError } from './sqlite-db.js';
import { fsReason } from '../util/fs-reason.js';

export const LOCK_FILE = 'owner.lock';
export const PID_FILE = 'svcd.pid';
/** The pid file builds before 2026-11-25 locked with; still honoured while its process lives. */
export const LEGACY_LOCK_FILE = 'svcd.lock';

/** Another live process owns the directory; `pid` from its pid file when it has one. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number | null,
    what: string,
    why = '; one process owns a data directory',
  ) {
    super(`${what} ${dir} is in use by another svcd${pid === null ? '' : ` (pid ${pid})`}${why}`);
  }
}

/** Why a directory cannot be made, in words (an operator reads this, not errno). */
const DIR_WORDS: Readonly<Record<string, string>> = {
  EEXIST: 'a file of that name is in the way',
  ENOTDIR: 'a part of the path is a file, not a directory',
  EPERM: 'not permitted',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  ENOENT: 'the file system there takes no new directories',
};

const held = new Map<string, { db: Database.Database; dir: string; refs: number }>();

/** Takes `<dir>/owner.lock` for this process; returns its release. Throws when another process holds it. */
export function lockDataDir(dir: string, what: string): () => void {
  // A directory svcd creates is its owner's alone: the stores hold run inputs and results.
  try {
    ensureDir(dir, 0o700);
  } catch (err) {
    throw new Error(`${what} ${dir} cannot be made: ${fsReason(err, DIR_WORDS)}`);
  }
  const key = realpathSync(dir);
  const mine = held.get(key);
  if (mine) mine.refs++;
  else {
    const db = takeLock(dir, what);
    const orphanedHolder = holderOfDeletedLock(dir, key);
    if (orphanedHolder !== null) {
      db.close();
      throw new DataDirInUseError(dir, orphanedHolder, what, `; its ${LOCK_FILE} was deleted while it ran, so the lock could not say so: stop pid ${orphanedHolder} first, and never delete ${LOCK_FILE}`);
    }
    held.set(key, { db, dir, refs: 1 });
    try {
      // Replaced, not written into: svcd.pid made a link to another file (in a directory others
      // could write) would have a root svcd overwrite that file with its pid.
      writeFileDurably(join(dir, PID_FILE), `${process.pid}\n`, 0o644);
    } catch {
      /* informational only */
    }
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    unref(key);
  };
}

function takeLock(dir: string, what: string): Database.Database {
  refuseLegacyHolder(dir, what);
  let db: Database.Database;
  try {
    db = new Database(join(dir, LOCK_FILE), { timeout: 0 }); // busy at once: never wait for another owner
  } catch (err) {
    throw openError('the lock', join(dir, LOCK_FILE), err);
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = MEMORY'); // no journal file beside it
    // The first write takes the exclusive file lock; EXCLUSIVE mode keeps it until close.
    db.exec('BEGIN EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS owner (pid INTEGER NOT NULL, started_at TEXT NOT NULL)');
    db.exec('DELETE FROM owner');
    db.prepare('INSERT INTO owner (pid, started_at) VALUES (?, ?)').run(process.pid, new Date().toISOString());
    db.exec('COMMIT');
    return db;
  } catch (err) {
    db.close();
    const code = (err as { code?: string }).code;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
      throw new DataDirInUseError(dir, holderOf(dir), what);
    }
    throw openError('the lock', join(dir, LOCK_FILE), err);
  }
}

/**
 * An older svcd still running on the directory holds only `svcd.lock` with its pid: refused.
 * A dead one's file is removed (nobody locks it, so removing it races with no one).
 */
function refuseLegacyHolder(dir: string, what: string): void {
  const path = join(dir, LEGACY_LOCK_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return;
  }
  const pid = /^\d+\n?$/.test(text) ? Number.parseInt(text, 10) : null;
  if (pid !== null && pid !== process.pid && alive(pid)) {
    // A pid in a file is all the old lock has, and a pid can be reused after a crash.
    throw new DataDirInUseError(dir, pid, what, `, per its ${LEGACY_LOCK_FILE} (the lock of builds before 2026-11-25); if pid ${pid} is not an svcd, delete ${join(dir, LEGACY_LOCK_FILE)}`);
  }
  try {
    unlinkSync(path);
  } catch {
    /* another starter removed it first */
  }
}

function unref(key: string): void {
  const h = held.get(key);
  if (!h || --h.refs > 0) return;
  held.delete(key);
  try {
    const pidFile = join(h.dir, PID_FILE);
    if (Number.parseInt(readFileSync(pidFile, 'utf8'), 10) === process.pid) unlinkSync(pidFile);
  } catch {
    /* already gone */
  }
  h.db.close(); // drops the file lock
}

/**
 * The lock is a lock on a file: an operator who deletes `owner.lock` (it stays after a stop
 * and looks stale) lets the next starter lock a new file while the owner still runs. So a
 * starter that got the lock also asks whether the process its pid file names still holds the
 * directory's `owner.lock` open (Linux `/proc/<pid>/fd`; the deleted file shows as
 * `… (deleted)`). Only that proof refuses: a reused pid, or no `/proc`, lets the start go on.
 */
function holderOfDeletedLock(dir: string, realDir: string): number | null {
  const pid = holderOf(dir);
  if (pid === null || pid === process.pid) return null;
  const lockPath = join(realDir, LOCK_FILE);
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return null;
  }
  for (const fd of fds) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (target === lockPath || target === `${lockPath} (deleted)`) return pid;
  }
  return null;
}

/** The holder's pid from its pid file, when it has one. */
function holderOf(dir: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(join(dir, PID_FILE), 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}
