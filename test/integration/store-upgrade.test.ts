/**
 * A store a newer svcd migrated is refused at start (docs/design.md "Store": upgrades and
 * downgrades): an older build would read and write it by rules that no longer hold. Both of
 * svcd's stores, the kernel's kernel.db (decisions §11) and the gateway's gateway.db.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { GATEWAY_MIGRATIONS } from '../../src/gateway/idempotency.js';
import { KERNEL_MIGRATIONS } from '../../src/store/migrations.js';
import type { Migration } from '../../src/store/sql-db.js';
import { migrate, SqliteDb } from '../../src/store/sqlite-db.js';
import { ROOT, tempDir } from '../helpers/daemon.js';

const SVCD = join(ROOT, 'dist/daemon/main.js');

/** A store as svcd makes it, recording one migration more than this build knows. */
async function storeFromTheFuture(file: string, migrations: Migration[], id: string): Promise<number> {
  mkdirSync(dirname(file), { recursive: true });
  const db = new SqliteDb({ path: file });
  await migrate(db, migrations);
  await db.run('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)', [id, '2027-01-01T00:00:00.000Z']);
  await db.close();
  return migrations.length + 1;
}

describe('a store migrated by a newer svcd (downgrade)', () => {
  it.each([
    ['kernel', 'kernel.db', 'runs-999-from-the-future'],
    ['gateway', 'gateway.db', 'gateway-999-from-the-future'],
  ])('the %s refuses it: exit 1, the file and the unknown migration named, nothing written', async (which, name, id) => {
    const dir = tempDir('svc-upgrade-');
    const env = { ...process.env, SVC_GATEWAY_DATA: join(dir, 'gateway') };
    const args = which === 'kernel' ? ['--data-dir', join(dir, 'kernel'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'] : ['--no-kernel', '--gateway-listen', '127.0.0.1:0'];
    const file = join(dir, which, name);
    const migrations = await storeFromTheFuture(file, which === 'kernel' ? KERNEL_MIGRATIONS : GATEWAY_MIGRATIONS, id);
    const r = spawnSync(process.execPath, [SVCD, ...args], { encoding: 'utf8', timeout: 15_000, env });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`svcd: cannot open the store ${file}: a newer svcd migrated it (migration ${id} unknown to this build); run that svcd, or restore a backup taken before the upgrade\n`);
    const db = new Database(file, { readonly: true });
    expect((db.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number }).n).toBe(migrations);
    db.close();
  });
});
