/**
 * The SqlDb contract (src/store/sql-db.ts, decisions §11): every store implementation runs this
 * suite. `makeDb` returns a fresh, open store; tables get unique names so implementations
 * that share one database (PostgreSQL) can run it too.
 *
 *   describeSqlDbContract('SqliteDb', async () => new SqliteDb({ path }))
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { SqlDb } from '../../src/store/sql-db.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function describeSqlDbContract(name: string, makeDb: () => Promise<SqlDb>): void {
  describe(`SqlDb contract: ${name}`, () => {
    const open: SqlDb[] = [];
    afterEach(async () => {
      for (const db of open.splice(0)) await db.close();
    });

    async function fresh(): Promise<{ db: SqlDb; t: string }> {
      const db = await makeDb();
      open.push(db);
      const t = `contract_${randomBytes(4).toString('hex')}`;
      await db.exec(`CREATE TABLE ${t} (id TEXT PRIMARY KEY, name TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0, x REAL, note TEXT)`);
      return { db, t };
    }

    it('run inserts, get returns the first row or undefined, all returns every row', async () => {
      const { db, t } = await fresh();
      expect(await db.run(`INSERT INTO ${t} (id, name, n, x, note) VALUES (?, ?, ?, ?, ?)`, ['a', 'Ünïcødé ✓', 3, 1.5, null])).toEqual({ changes: 1 });
      await db.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['b', 'bee']);
      expect(await db.get(`SELECT id, name, n, x, note FROM ${t} WHERE id = ?`, ['a'])).toEqual({ id: 'a', name: 'Ünïcødé ✓', n: 3, x: 1.5, note: null });
      expect(await db.get(`SELECT id FROM ${t} WHERE id = ?`, ['zzz'])).toBeUndefined();
      expect(await db.all(`SELECT id, n FROM ${t} ORDER BY id`)).toEqual([
        { id: 'a', n: 3 },
        { id: 'b', n: 0 },
      ]);
      expect(await db.all(`SELECT id FROM ${t} WHERE n > ?`, [100])).toEqual([]);
    });

    it('run reports the rows an UPDATE or DELETE changed', async () => {
      const { db, t } = await fresh();
      for (const id of ['a', 'b', 'c']) await db.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, [id, id]);
      expect(await db.run(`UPDATE ${t} SET n = n + 1 WHERE id <> ?`, ['a'])).toEqual({ changes: 2 });
      expect(await db.run(`UPDATE ${t} SET n = 1 WHERE id = ?`, ['none'])).toEqual({ changes: 0 });
      expect(await db.run(`DELETE FROM ${t} WHERE n = ?`, [1])).toEqual({ changes: 2 });
    });

    it('exec runs several statements', async () => {
      const { db, t } = await fresh();
      await db.exec(`INSERT INTO ${t} (id, name) VALUES ('x', 'one'); INSERT INTO ${t} (id, name) VALUES ('y', 'two');`);
      expect((await db.all(`SELECT id FROM ${t} ORDER BY id`)).map((r) => r.id)).toEqual(['x', 'y']);
    });

    it('RETURNING gives back the written row (INSERT and UPDATE)', async () => {
      const { db, t } = await fresh();
      expect(await db.get(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?) RETURNING id, name, n`, ['r', 'ret', 7])).toEqual({ id: 'r', name: 'ret', n: 7 });
      expect(await db.all(`UPDATE ${t} SET n = n * 2 WHERE id = ? RETURNING n`, ['r'])).toEqual([{ n: 14 }]);
      expect(await db.run(`INSERT INTO ${t} (id, name) VALUES (?, ?) RETURNING id`, ['s', 'side effect'])).toEqual({ changes: 1 });
      expect(await db.get(`SELECT name FROM ${t} WHERE id = ?`, ['s'])).toEqual({ name: 'side effect' });
    });

    it('ON CONFLICT DO NOTHING and DO UPDATE with excluded', async () => {
      const { db, t } = await fresh();
      await db.run(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?)`, ['k', 'first', 1]);
      expect(await db.run(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`, ['k', 'second', 5])).toEqual({ changes: 0 });
      expect(await db.get(`SELECT name, n FROM ${t} WHERE id = ?`, ['k'])).toEqual({ name: 'first', n: 1 });
      const up = await db.get(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET n = ${t}.n + excluded.n, name = excluded.name RETURNING name, n`, ['k', 'third', 5]);
      expect(up).toEqual({ name: 'third', n: 6 });
    });

    it('tx commits everything the function wrote and returns its value', async () => {
      const { db, t } = await fresh();
      const result = await db.tx(async (tx) => {
        await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['a', 'in tx']);
        await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['b', 'in tx']);
        expect(await tx.get(`SELECT COUNT(*) AS c FROM ${t}`)).toEqual({ c: 2 });
        return 'done';
      });
      expect(result).toBe('done');
      expect((await db.all(`SELECT id FROM ${t} ORDER BY id`)).map((r) => r.id)).toEqual(['a', 'b']);
    });

    it('tx rolls everything back when the function throws, and rethrows the same error', async () => {
      const { db, t } = await fresh();
      await db.run(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?)`, ['keep', 'before', 1]);
      const boom = new Error('boom');
      await expect(
        db.tx(async (tx) => {
          await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['gone', 'x']);
          await tx.run(`UPDATE ${t} SET n = 99 WHERE id = ?`, ['keep']);
          await sleep(5);
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await db.all(`SELECT id, n FROM ${t}`)).toEqual([{ id: 'keep', n: 1 }]);
    });

    it('a failing statement inside a tx rolls back its earlier writes; the store stays usable', async () => {
      const { db, t } = await fresh();
      await db.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['dup', 'x']);
      await expect(
        db.tx(async (tx) => {
          await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['new', 'x']);
          await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['dup', 'again']); // primary key violation
        }),
      ).rejects.toThrow();
      expect(await db.get(`SELECT id FROM ${t} WHERE id = ?`, ['new'])).toBeUndefined();
      await expect(db.get('SELECT * FROM no_such_table_at_all')).rejects.toThrow();
      expect(await db.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['after', 'ok'])).toEqual({ changes: 1 });
    });

    it('a nested tx on the handle joins the outer transaction', async () => {
      const { db, t } = await fresh();
      await expect(
        db.tx(async (tx) => {
          await tx.tx(async (inner) => inner.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['inner', 'x']));
          throw new Error('outer fails');
        }),
      ).rejects.toThrow('outer fails');
      expect(await db.get(`SELECT id FROM ${t} WHERE id = ?`, ['inner'])).toBeUndefined();
    });

    it('concurrent transactions are serialized: read-modify-write loses no update', async () => {
      const { db, t } = await fresh();
      await db.run(`INSERT INTO ${t} (id, name, n) VALUES (?, ?, ?)`, ['counter', 'c', 0]);
      const N = 20;
      await Promise.all(
        Array.from({ length: N }, (_, i) =>
          db.tx(async (tx) => {
            const row = await tx.get<{ n: number }>(`SELECT n FROM ${t} WHERE id = ?`, ['counter']);
            await sleep(i % 3);
            await tx.run(`UPDATE ${t} SET n = ? WHERE id = ?`, [row!.n + 1, 'counter']);
          }),
        ),
      );
      expect(await db.get(`SELECT n FROM ${t} WHERE id = ?`, ['counter'])).toEqual({ n: N });
    });

    it('a plain read never sees another transaction’s uncommitted writes', async () => {
      const { db, t } = await fresh();
      let committed = false;
      const writer = db.tx(async (tx) => {
        await tx.run(`INSERT INTO ${t} (id, name) VALUES (?, ?)`, ['w', 'pending']);
        await sleep(30);
        committed = true;
      });
      await sleep(5);
      const seen = await db.get(`SELECT id FROM ${t} WHERE id = ?`, ['w']);
      if (seen !== undefined) expect(committed).toBe(true);
      await writer;
      expect(await db.get(`SELECT id FROM ${t} WHERE id = ?`, ['w'])).toEqual({ id: 'w' });
    });

    it('the handle inside a tx reports the same dialect', async () => {
      const { db } = await fresh();
      expect(['sqlite', 'postgres']).toContain(db.dialect);
      expect(await db.tx(async (tx) => tx.dialect)).toBe(db.dialect);
    });
  });
}
