/**
 * src/store/backup.ts against a store another connection writes to all the time, as svcd's
 * kernel does under load, and a restore interrupted half-way.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { backupStore, refuseInterruptedRestore, RESTORE_MARKER } from '../../src/store/backup.js';
import { tempDir } from '../helpers/daemon.js';

describe('backupStore', () => {
  it('ends while another connection commits every millisecond (a stepped backup restarts at each commit)', { timeout: 30_000 }, async () => {
    const dir = tempDir('svc-backup-unit-');
    const writer = new Database(join(dir, 'kernel.db'));
    writer.pragma('journal_mode = WAL');
    writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');
    const insert = writer.prepare('INSERT INTO t (v) VALUES (?)');
    writer.transaction(() => {
      for (let i = 0; i < 400; i++) insert.run(Buffer.alloc(64 * 1024, i));
    })(); // 25 MB: some 6,400 pages, 64 steps of 100
    mkdirSync(join(dir, 'keys'));
    writeFileSync(join(dir, 'keys/control-plane.json'), '{}');
    const busy = setInterval(() => insert.run(Buffer.alloc(16, 1)), 1);
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the backup did not end in 15 s')), 15_000));
    try {
      const copied = await Promise.race([backupStore(dir, join(dir, 'out'), { store: 'kernel.db', plain: ['keys/control-plane.json'] }), timeout]);
      expect(copied[0]!.to).toBe(join(dir, 'out/kernel.db'));
    } finally {
      clearInterval(busy);
      writer.close();
    }
    const copy = new Database(join(dir, 'out/kernel.db'), { readonly: true });
    expect((copy.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBeGreaterThanOrEqual(400);
    copy.close();
  });
});

describe('refuseInterruptedRestore', () => {
  it('names a restore that stopped between moving the store aside and putting the copy in', () => {
    const dir = tempDir('svc-backup-unit-');
    expect(() => refuseInterruptedRestore(dir, 'kernel data directory')).not.toThrow();
    writeFileSync(join(dir, RESTORE_MARKER), JSON.stringify({ from: '/b/kernel', replaced: join(dir, 'replaced-x') }));
    expect(() => refuseInterruptedRestore(dir, 'kernel data directory')).toThrow(`kernel data directory ${dir}: a restore from /b/kernel stopped before it finished (${join(dir, RESTORE_MARKER)}); run svcd restore again (the files it replaced are in ${join(dir, 'replaced-x')})`);
    expect(existsSync(join(dir, 'kernel.db'))).toBe(false);
  });
});
