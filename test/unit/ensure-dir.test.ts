/** ensureDir: mkdir -p that fails where Node's recursive mkdir spins forever (svcd(8) --data-dir). */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureDir } from '../../src/util/ensure-dir.js';

describe('ensureDir', () => {
  it('makes every missing level with the mode given, and takes a directory that exists', () => {
    const base = mkdtempSync(join(tmpdir(), 'svc-ensure-'));
    try {
      const deep = join(base, 'a', 'b', 'c');
      ensureDir(deep, 0o700);
      expect(statSync(deep).isDirectory()).toBe(true);
      expect(statSync(join(base, 'a')).mode & 0o777).toBe(0o700);
      ensureDir(deep);
      writeFileSync(join(base, 'file'), 'x');
      expect(() => ensureDir(join(base, 'file'))).toThrow(/EEXIST/);
      expect(() => ensureDir(join(base, 'file', 'below'))).toThrow(/ENOTDIR/);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it.runIf(existsSync('/proc/self'))('fails at once under /proc, where mkdir says ENOENT though the parent exists', () => {
    expect(() => ensureDir('/proc/svc-nope/data')).toThrow(/ENOENT/);
  });
});
