/**
 * Backups of svcd's stores (`svcd backup`, `svcd restore`; svcd(8) COMMANDS).
 *
 * A backup is taken while svcd runs, through SQLite's online backup API: a consistent copy
 * of the store as of one commit, never a file copy of a database whose write-ahead log holds
 * the latest commits. Each copy is turned into a self-contained file (rollback journal, no
 * -wal beside it), checked (`PRAGMA quick_check`) and synced before it is reported. A
 * restore needs svcd stopped (it holds the directory's lock meanwhile), checks the backup
 * first, and moves the files it replaces aside instead of deleting them: a store with its
 * -wal and -shm goes together, so a restore never pairs a backup with a stale log.
 */
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { lockDataDir } from './dir-lock.js';
import { keepDataDirPrivate } from './private-files.js';
import type { Logger } from '../log/logger.js';
import { copyFileDurably, fsync, renameDurably, writeFileDurably } from '../util/durable-file.js';

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
    // All pages in one step, so under one read transaction: stepped (100 pages, then back to the
    // event loop), a backup restarts from the first page whenever svcd commits in between, and
    // never ends while svcd is busy. In WAL mode the one read holds no writer up.
    await db.backup(partial, { progress: () => 0x7fffffff });
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
  chmodSync(partial, 0o600); // readable by its owner alone, even out of its 0700 directory (a tar of it)
  syncFile(partial);
  renameSync(partial, target);
  const copied: CopiedStore[] = [{ from: source, to: target, bytes: statSync(target).size }];
  for (const rel of files.plain) copied.push(copyDurably(join(dataDir, rel), join(toDir, rel)));
  syncDir(toDir);
  return copied;
}

/** A restore checked and holding its data directory, ready to be applied (openRestore). */
export interface PendingRestore {
  /** Copies the backup's files in under names svcd does not read; nothing svcd reads changes. */
  stage(): void;
  /** Removes what stage() copied (a restore stopped before swap()). */
  discard(): void;
  /** Puts the staged files in place; returns what was copied and where the replaced files went. */
  swap(now: Date): { copied: CopiedStore[]; replaced: string | null };
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
  const wanted = [files.store, ...files.plain].map((rel) => {
    const to = join(dataDir, rel);
    return { rel, to, tmp: join(dirname(to), `.${basename(to)}.restore`) };
  });
  let staged: Array<{ rel: string; to: string; tmp: string; copied: CopiedStore }> = [];
  return {
    release,
    stage() {
      staged = wanted.map((w) => ({ ...w, copied: copyDurably(join(fromDir, w.rel), w.tmp) }));
    },
    discard() {
      for (const w of wanted) rmSync(w.tmp, { force: true });
    },
    swap(now) {
      const replacedDir = join(dataDir, `replaced-${now.toISOString().replace(/[:.]/g, '-')}`);
      // Current files aside, then the copies in: renames only, but for those renames the
      // directory holds no store, and svcd would start on it as a new one (a fresh store, a
      // fresh key). The marker, written first and removed last, makes svcd refuse instead.
      const marker = join(dataDir, RESTORE_MARKER);
      writeFileDurably(marker, JSON.stringify({ from: fromDir, replaced: replacedDir }) + '\n', 0o600);
      // A store goes with its log: a backup next to a stale -wal would be read through it.
      const current = [files.store, `${files.store}-wal`, `${files.store}-shm`, `${files.store}-journal`, ...files.plain].filter((rel) => existsSync(join(dataDir, rel)));
      for (const rel of current) {
        mkdirSync(dirname(join(replacedDir, rel)), { recursive: true, mode: PRIVATE_DIR });
        renameDurably(join(dataDir, rel), join(replacedDir, rel));
      }
      for (const s of staged) renameDurably(s.tmp, s.to);
      unlinkSync(marker);
      syncDir(dataDir);
      return { copied: staged.map((s) => ({ from: join(fromDir, s.rel), to: s.to, bytes: s.copied.bytes })), replaced: current.length > 0 ? replacedDir : null };
    },
  };
}

/** In a data directory while a restore swaps its files; svcd refuses to start on it meanwhile. */
export const RESTORE_MARKER = 'restore-incomplete';

/**
 * Takes `dir`'s lock for a kernel or a gateway about to serve from it, and refuses it (letting
 * the lock go) when a restore into it stopped half-way (refuseInterruptedRestore). What other
 * users could read or write in it is narrowed first, with a warning (keepDataDirPrivate).
 */
export function lockServingDir(dir: string, what: string, logger: Pick<Logger, 'warn'>): () => void {
  const unlock = lockDataDir(dir, what);
  try {
    refuseInterruptedRestore(dir, what);
    keepDataDirPrivate(dir, what, logger);
  } catch (err) {
    unlock();
    throw err;
  }
  return unlock;
}

/** Throws when a restore into `dir` stopped half-way: its store may be missing, and svcd would start a new one. */
export function refuseInterruptedRestore(dir: string, what: string): void {
  const marker = join(dir, RESTORE_MARKER);
  if (!existsSync(marker)) return;
  let info: { from?: string; replaced?: string } = {};
  try {
    info = JSON.parse(readFileSync(marker, 'utf8')) as typeof info;
  } catch {
    /* named below all the same */
  }
  throw new Error(`${what} ${dir}: a restore${info.from ? ` from ${info.from}` : ''} stopped before it finished (${marker}); run svcd restore again${info.replaced ? ` (the files it replaced are in ${info.replaced})` : ''}`);
}

/** The file a backup writes last: every file's size and SHA-256. A backup without it is not whole. */
export const MANIFEST = 'manifest.json';

interface Manifest {
  files: Array<{ path: string; bytes: number; sha256: string }>;
}

function sha256Of(path: string): string {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  const fd = openSync(path, 'r');
  try {
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0; ) hash.update(buf.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/** Writes `<backupDir>/manifest.json` for the files copied, synced: the backup is whole from here on. */
export function writeManifest(backupDir: string, copied: CopiedStore[]): void {
  const body: Manifest = { files: copied.map((c) => ({ path: relative(backupDir, c.to), bytes: c.bytes, sha256: sha256Of(c.to) })) };
  writeFileDurably(join(backupDir, MANIFEST), JSON.stringify(body, null, 2) + '\n', 0o600);
}

/**
 * Checks every file of `backupDir` a restore would copy against its manifest: quick_check finds
 * a broken b-tree, not a changed byte in a run's input or an event.
 */
export function checkManifest(backupDir: string, parts: Array<{ part: string; files: StoreFiles }>): void {
  const file = join(backupDir, MANIFEST);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
    if (!Array.isArray(manifest.files)) throw new Error('no files list');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'is missing: the backup did not finish, or svcd backup did not make it' : `cannot be read (${(err as Error).message})`;
    throw new Error(`${file} ${why}; nothing was restored`);
  }
  for (const { part, files } of parts) {
    for (const rel of [files.store, ...files.plain]) {
      const path = join(part, rel);
      const entry = manifest.files.find((f) => f.path === path);
      if (!entry) throw new Error(`${file} does not list ${path}; nothing was restored`);
      const full = join(backupDir, path);
      if (!existsSync(full)) throw new Error(`${full} is missing: not a whole backup; nothing was restored`);
      if (statSync(full).size !== entry.bytes || sha256Of(full) !== entry.sha256) throw new Error(`${full} is not the file the backup wrote (its size or SHA-256 differs from ${MANIFEST}); nothing was restored`);
    }
  }
}

/** Copies with the source's mode, synced, through a temporary name; then syncs the directory. */
function copyDurably(from: string, to: string): CopiedStore {
  if (!existsSync(from)) throw new Error(`${from} is missing`);
  mkdirSync(dirname(to), { recursive: true, mode: PRIVATE_DIR });
  copyFileDurably(from, to, join(dirname(to), `.${basename(to)}.partial`));
  return { from, to, bytes: statSync(to).size };
}

const syncFile = (path: string) => fsync(path, 'r+');
const syncDir = (dir: string) => fsync(dir, 'r');

/** True when `dir` does not exist or is an empty directory: a backup never writes over another. */
export function isFreshTarget(dir: string): boolean {
  if (!existsSync(dir)) return true;
  return statSync(dir).isDirectory() && readdirSync(dir).length === 0;
}
