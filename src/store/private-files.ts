/**
 * What svcd keeps at rest is its user's alone (docs/design.md, "Files at rest"): the stores
 * hold run inputs, tool results and approvals, `keys/` the control-plane signing key, and
 * `repairs/` what a probe saw. svcd creates them private (files 0600, directories 0700) whatever
 * the umask; this narrows, at start, what an older build, a restore from a tar, a `cp` or a
 * directory made beforehand by hand left wider, and says so.
 *
 * The data directory itself keeps its read bits (the operator's choice; a listing shows names
 * only) but loses group and other write: whoever may write it may swap `keys/` for a key of
 * their own, and svcd would sign remits and run heads with a key they know.
 */
import { chmodSync, lstatSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log/logger.js';
import { LEGACY_LOCK_FILE, LOCK_FILE, PID_FILE } from './dir-lock.js';

/** Files any local user may read: a pid and a lock, nothing of a run. */
const PUBLIC_FILES = new Set([LOCK_FILE, PID_FILE, LEGACY_LOCK_FILE]);

/**
 * What svcd itself keeps directly in a data directory (a directory named here, all it holds).
 * Nothing else is touched: a data directory may be shared (`data_dir: .` beside the sqlite
 * connector's database, which other programs read).
 */
const OWN_ENTRY = /^(?:(?:kernel|gateway)\.db(?:-wal|-shm|-journal)?|mcp-groups\.json(?:\.tmp)?|restore-incomplete|keys|repairs|replaced-.+)$/;

/** How deep below the data directory svcd's own files go (`replaced-…/keys/control-plane.json`). */
const MAX_DEPTH = 3;

const GROUP_OTHER = 0o077;
const GROUP_OTHER_WRITE = 0o022;

/** Narrows `dir` and what svcd keeps in it (see the module comment); each change is logged once. */
export function keepDataDirPrivate(dir: string, what: string, logger: Pick<Logger, 'warn'>): void {
  const dirMode = sharedDir(dir) ? 'not ours' : clearModeBits(dir, GROUP_OTHER_WRITE);
  if (dirMode === 'not ours') {
    logger.warn(`${what} is writable by other users, and svcd leaves it so (another user owns it, or its sticky bit makes it a shared directory such as /tmp): they could replace its key and its stores; give svcd a directory only its user can write`, { dir });
  } else if (dirMode !== null) {
    logger.warn(`${what} was writable by other users; svcd removed their write permission (they could have replaced its key)`, { dir, mode: octal(dirMode), now: octal(dirMode & ~GROUP_OTHER_WRITE) });
  }
  const narrowed: string[] = [];
  const notOurs: string[] = [];
  narrowTree(dir, MAX_DEPTH, narrowed, notOurs, (name) => OWN_ENTRY.test(name));
  if (narrowed.length > 0) logger.warn(`files in the ${what} were readable by other users; narrowed to the owner (files 0600, directories 0700)`, { dir, files: narrowed });
  if (notOurs.length > 0) logger.warn(`files in the ${what} are readable by other users, and svcd does not own them to narrow them; chmod them to 0600 (directories 0700)`, { dir, files: notOurs });
}

/**
 * A directory others may write that is not svcd's to close: another user's (even for a root
 * svcd), or one with the sticky bit (`--data-dir /tmp` must not take /tmp from everyone).
 */
function sharedDir(dir: string): boolean {
  try {
    const st = statSync(dir);
    if ((st.mode & GROUP_OTHER_WRITE) === 0) return false;
    return (st.mode & 0o1000) !== 0 || st.uid !== process.geteuid?.();
  } catch {
    return false;
  }
}

/** Every file (but the public ones) and directory below `dir` that `own` names, `depth` levels down; symbolic links are left alone. */
function narrowTree(dir: string, depth: number, narrowed: string[], notOurs: string[], own: (name: string) => boolean = () => true): void {
  if (depth === 0) return;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return; // unreadable: opening the store says so
  }
  for (const name of names.filter(own)) {
    const path = join(dir, name);
    let isDir: boolean;
    try {
      const st = lstatSync(path); // chmod follows links: only what is really here is changed
      if (st.isSymbolicLink() || !(st.isFile() || st.isDirectory())) continue;
      isDir = st.isDirectory();
    } catch {
      continue; // gone meanwhile
    }
    if (!isDir && PUBLIC_FILES.has(name)) continue;
    const before = clearModeBits(path, GROUP_OTHER);
    if (before === 'not ours') notOurs.push(path);
    else if (before !== null) narrowed.push(path);
    if (isDir) narrowTree(path, depth - 1, narrowed, notOurs);
  }
}

/**
 * Clears `bits` from `path`'s permissions: the mode it had when it changed it, null when none of
 * `bits` was set, 'not ours' when chmod was refused (another user's file, a read-only disk).
 */
export function clearModeBits(path: string, bits: number): number | null | 'not ours' {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o7777; // a data directory given as a link: its target's
  } catch {
    return null;
  }
  if ((mode & bits) === 0) return null;
  try {
    chmodSync(path, mode & ~bits);
  } catch {
    return 'not ours';
  }
  return mode;
}

function octal(mode: number): string {
  return mode.toString(8).padStart(4, '0');
}
