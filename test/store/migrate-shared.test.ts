/**
 * migrate's refusal of a newer svcd's store (docs/design.md "Upgrades and downgrades") counts
 * only the domains of the set it is given: one database may hold the kernel's and the
 * gateway's migrations (Kernel.open {db}, IdempotencyStore.open(dir, clock, db)).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GATEWAY_MIGRATIONS } from '../../src/gateway/idempotency.js';
import { KERNEL_MIGRATIONS } from '../../src/store/migrations.js';
import { migrate, SchemaTooNewError, SqliteDb } from '../../src/store/sqlite-db.js';
import { tempDir } from '../helpers/daemon.js';

describe('migrate on a store the kernel and the gateway share (Kernel.open {db}, IdempotencyStore.open(dir, clock, db))', () => {
  it('each opens it, again and again: the other set is not "a newer svcd"', async () => {
    const db = new SqliteDb({ path: join(tempDir('svc-shared-'), 'one.db') });
    try {
      expect(await migrate(db, KERNEL_MIGRATIONS)).toHaveLength(KERNEL_MIGRATIONS.length);
      expect(await migrate(db, GATEWAY_MIGRATIONS)).toHaveLength(GATEWAY_MIGRATIONS.length);
      expect(await migrate(db, KERNEL_MIGRATIONS)).toEqual([]); // the next start
    } finally {
      await db.close();
    }
  });

  it('still refuses an unknown migration of a domain the set owns', async () => {
    const db = new SqliteDb({ path: join(tempDir('svc-shared-'), 'one.db') });
    try {
      await migrate(db, [...KERNEL_MIGRATIONS, { id: 'runs-999-future', sql: 'SELECT 1' }]);
      await migrate(db, GATEWAY_MIGRATIONS);
      await expect(migrate(db, KERNEL_MIGRATIONS)).rejects.toMatchObject({ unknownMigrations: ['runs-999-future'] });
      await expect(migrate(db, KERNEL_MIGRATIONS)).rejects.toBeInstanceOf(SchemaTooNewError);
    } finally {
      await db.close();
    }
  });
});
