/**
 * mkdir -p without Node's endless loop. `mkdirSync(dir, {recursive: true})` spins forever at
 * full CPU when the kernel answers ENOENT for a directory whose parent exists (`/proc/nope`:
 * procfs and sysfs refuse new entries that way), so `svcd --data-dir /proc/x` never exited.
 * This walks up only while a parent is missing, and fails with the error mkdir gave.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export function ensureDir(dir: string, mode = 0o777): void {
  const path = resolve(dir);
  try {
    mkdirSync(path, { mode });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isDirectory(path)) return;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path) throw err;
    // The parent there now (made meanwhile by another process): one more try, and mkdir's
    // answer stands (ENOENT again under /proc).
    if (isDirectory(parent)) return mkdirOnce(path, mode);
  }
  ensureDir(dirname(path), mode);
  mkdirOnce(path, mode);
}

/** One mkdir; a directory made meanwhile by another process is success. */
function mkdirOnce(path: string, mode: number): void {
  try {
    mkdirSync(path, { mode });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && isDirectory(path)) return; // made meanwhile
    throw err;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
