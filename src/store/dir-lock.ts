/**
 * One process owns a data directory (docs/design.md): its SQLite files, the group commit's
 * fsync barrier and the startup recovery (pending gateway claims become `unknown`) all assume
 * no other live writer. A lock file holding the owner's pid makes a second svcd on the same
 * directory stop at startup, saying which process holds it, instead of sharing it silently.
 *
 * A lock whose pid is no longer alive (a crash, a SIGKILL) is stale and taken over. The
 * same process may open a directory again (tests reopen a store in-process).
 */
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'svcd.lock';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

/** Takes `<dir>/svcd.lock` for this process; returns its release. Throws when another live process holds it. */
export function lockDataDir(dir: string, what: string): () => void {
  // A directory svcd creates is its owner's alone: the stores hold run inputs and results.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
      return () => release(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
    if (holder === process.pid) return () => {};
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
      throw new Error(`${what} ${dir} is in use by another svcd (pid ${holder}); one process owns a data directory`);
    }
    try {
      unlinkSync(path); // stale: its process is gone
    } catch {
      /* another starter removed it first; the next attempt decides */
    }
  }
  throw new Error(`${what} ${dir}: cannot take ${path}`);
}

function release(path: string): void {
  try {
    if (Number.parseInt(readFileSync(path, 'utf8'), 10) === process.pid) unlinkSync(path);
  } catch {
    /* already gone */
  }
}
