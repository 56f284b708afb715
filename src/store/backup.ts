/**
 * Backups of svcd's stores (`svcd backup`, `svcd restore`; svcd(8) BACKUP AND RESTORE).
 *
 * A backup is taken while svcd runs, through SQLite's online backup API: a consistent copy
 * of the store as of one commit, never a file copy of a database whose write-ahead log holds
 * the latest commits. Each copy is turned into a self-contained file (rollback journal, no
 * -wal beside it), checked (`PRAGMA quick_check`) and synced before it is reported. A
 * restore needs svcd stopped (it holds the directory's lock meanwhile), checks the backup
 * first, and moves the files it replaces aside instead of deleting them: a store with its
 * -wal and -shm goes together, so a restore never pairs a backup with a stale log.
 */
import { closeSync, copyFileSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { lockDataDir } from './dir-lock.js';

/** A store file of a data directory and, for the kernel, its key file. */
export interface StoreFiles {
  /** kernel.db or gateway.db */
  store: string;
  /** Files copied as they are (keys/control-plane.json), relative to the data directory. */
  plain: string[];
}

/** Directories a backup or restore makes: the stores hold run inputs and results, as svcd's data dir does. */
const PRIVATE_DIR = 0o700;

export const KERNEL_FILES: StoreFiles = { store: 'kernel.db', plain: ['keys/control-plane.json'] };
export const GATEWAY_FILES: StoreFiles = { store: 'gateway.db', plain: [] };

/** What a backup or restore did, for its one JSON line. */
export interface CopiedStore {
  from: string;
  to: string;
  bytes: number;
}

/** The first problem `PRAGMA quick_check` reports, or null for a sound file. */
export function storeProblem(file: string): string | null {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    return (err as Error).message;
  }
  try {
    const rows = db.pragma('quick_check') as Array<{ quick_check: string }>;
    const first = rows[0]?.quick_check ?? 'no answer';
    return first === 'ok' ? null : first;
  } catch (err) {
    return (err as Error).message;
  } finally {
    db.close();
  }
}

/**
 * Copies `dataDir`'s store and plain files into `toDir` (which must not hold them yet). The
 * store may be in use by a running svcd.
 */
export async function backupStore(dataDir: string, toDir: string, files: StoreFiles): Promise<CopiedStore[]> {
  const source = join(dataDir, files.store);
  if (!existsSync(source)) throw new Error(`${dataDir} holds no ${files.store} (is it the data directory svcd runs on?)`);
  mkdirSync(toDir, { recursive: true, mode: PRIVATE_DIR }); // the stores hold run inputs and results
  const target = join(toDir, files.store);
  const partial = `${target}.partial`;
  rmSync(partial, { force: true });
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    await db.backup(partial);
  } finally {
    db.close();
  }
  // One file, no log beside it: the copy carries the WAL flag of its source until told otherwise.
  const copy = new Database(partial);
  try {
    copy.pragma('journal_mode = DELETE');
  } finally {
    copy.close();
  }
  const problem = storeProblem(partial);
  if (problem !== null) throw new Error(`the copy of ${source} does not check out (${problem}); nothing was kept`);
  syncFile(partial);
  renameSync(partial, target);
  const copied: CopiedStore[] = [{ from: source, to: target, bytes: statSync(target).size }];
  for (const rel of files.plain) copied.push(copyDurably(join(dataDir, rel), join(toDir, rel)));
  syncDir(toDir);
  return copied;
}

/** A restore checked and holding its data directory, ready to be applied (openRestore). */
export interface PendingRestore {
  /** Puts the backup in place; returns what was copied and where the replaced files went. */
  apply(now: Date): { copied: CopiedStore[]; replaced: string | null };
  /** Lets the data directory go (svcd may start on it again). */
  release(): void;
}

/**
 * Checks the backup in `fromDir` (its files there, its store sound) and takes `dataDir`'s
 * lock, which refuses while svcd runs on it (DataDirInUseError). Applying moves the files it
 * replaces into `<dataDir>/replaced-<time>/` and copies the backup's in, each synced.
 */
export function openRestore(fromDir: string, dataDir: string, files: StoreFiles): PendingRestore {
  const backup = join(fromDir, files.store);
  if (!existsSync(backup)) throw new Error(`${fromDir} holds no ${files.store}: not a backup made by svcd backup`);
  for (const rel of files.plain) if (!existsSync(join(fromDir, rel))) throw new Error(`${fromDir} holds no ${rel}: not a whole backup`);
  const problem = storeProblem(backup);
  if (problem !== null) throw new Error(`${backup} does not check out (${problem}); nothing was restored`);
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR });
  const release = lockDataDir(dataDir, 'data directory');
  return {
    release,
    apply(now) {
      const replacedDir = join(dataDir, `replaced-${now.toISOString().replace(/[:.]/g, '-')}`);
      // The copies first, under names svcd does not read; then the current files aside and the
      // copies into place, renames only: the window in which the directory holds neither is
      // a few renames long, not a copy of the whole store.
      const wanted = [files.store, ...files.plain];
      const staged = wanted.map((rel) => {
        const to = join(dataDir, rel);
        const tmp = join(dirname(to), `.${basename(to)}.restore`);
        return { rel, to, tmp, copied: copyDurably(join(fromDir, rel), tmp) };
      });
      // A store goes with its log: a backup next to a stale -wal would be read through it.
      const current = [files.store, `${files.store}-wal`, `${files.store}-shm`, `${files.store}-journal`, ...files.plain].filter((rel) => existsSync(join(dataDir, rel)));
      for (const rel of current) {
        mkdirSync(dirname(join(replacedDir, rel)), { recursive: true, mode: PRIVATE_DIR });
        renameSync(join(dataDir, rel), join(replacedDir, rel));
        syncDir(dirname(join(replacedDir, rel)));
      }
      for (const s of staged) {
        renameSync(s.tmp, s.to);
        syncDir(dirname(s.to));
      }
      return { copied: staged.map((s) => ({ from: join(fromDir, s.rel), to: s.to, bytes: s.copied.bytes })), replaced: current.length > 0 ? replacedDir : null };
    },
  };
}

/** Copies with the source's mode, synced, through a temporary name; then syncs the directory. */
function copyDurably(from: string, to: string): CopiedStore {
  if (!existsSync(from)) throw new Error(`${from} is missing`);
  mkdirSync(dirname(to), { recursive: true, mode: PRIVATE_DIR });
  const tmp = join(dirname(to), `.${basename(to)}.partial`);
  copyFileSync(from, tmp);
  syncFile(tmp);
  renameSync(tmp, to);
  syncDir(dirname(to));
  return { from, to, bytes: statSync(to).size };
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** True when `dir` does not exist or is an empty directory: a backup never writes over another. */
export function isFreshTarget(dir: string): boolean {
  if (!existsSync(dir)) return true;
  return statSync(dir).isDirectory() && readdirSync(dir).length === 0;
}
