/**
 * Writes that survive a power cut: the data is fsynced before the rename makes it visible,
 * and the directory after it, so the name points at the new contents once this returns.
 * Without both, a crash soon after can leave an empty or missing file behind a database that
 * already relies on it (the control-plane key signs every stored run head).
 */
import { closeSync, fchmodSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export function writeFileDurably(path: string, data: string, mode: number): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w', mode);
  try {
    fchmodSync(fd, mode); // a leftover temp file keeps its old mode through open(…, 'w')
    writeFileSync(fd, data); // loops until all of it is written
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
