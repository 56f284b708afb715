/**
 * Writes that survive a power cut: the data is fsynced before the rename makes it visible,
 * and the directory after it, so the name points at the new contents once this returns.
 * Without both, a crash soon after can leave an empty or missing file behind a database that
 * already relies on it (the control-plane key signs every stored run head).
 */
import { closeSync, constants, copyFileSync, fchmodSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export function writeFileDurably(path: string, data: string, mode: number): void {
  const tmp = freshTemp(`${path}.tmp`);
  const fd = openSync(tmp, 'wx', mode);
  try {
    fchmodSync(fd, mode); // exactly `mode`: open's is narrowed by the umask (0277 would make it 0400)
    writeFileSync(fd, data); // loops until all of it is written
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameDurably(tmp, path);
}

/** Copies `from` to `to` (with its mode) as writeFileDurably writes: synced, then renamed in. */
export function copyFileDurably(from: string, to: string, tmp = `${to}.tmp`): void {
  copyFileSync(from, freshTemp(tmp), constants.COPYFILE_EXCL);
  fsync(tmp, 'r+');
  renameDurably(tmp, to);
}

/**
 * Removes whatever a crashed write left at `tmp`, so the temp file is created anew (O_EXCL): a
 * leftover keeps its old mode through open(…, 'w'), and a symbolic link planted there (a key
 * written into a shared directory, `svc keys gen -o /tmp/k.json`) would take the private key to
 * the file it points at. Another process racing to put one back makes the create fail, not leak.
 */
function freshTemp(tmp: string): string {
  rmSync(tmp, { force: true });
  return tmp;
}

/** Renames and syncs the directory, so the new name survives a power cut. */
export function renameDurably(from: string, to: string): void {
  renameSync(from, to);
  fsync(dirname(to), 'r');
}

/** fsync of a file (opened to write) or a directory (opened to read, which is all Linux allows). */
export function fsync(path: string, flags: 'r' | 'r+'): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
