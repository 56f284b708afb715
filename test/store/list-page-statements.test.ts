/**
 * The list endpoints' pages (GET /v1/runs, GET /v1/approvals: `limit` 1 to 500) bind the limit:
 * the store keeps every distinct SQL text prepared for its lifetime, so a limit spelled into the
 * text made each page size a client asked for another statement held for good (a soak measured
 * ~10 KB of RSS per statement, 130 MB for the 12,000 texts the two endpoints could produce).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { pageNewestFirst } from '../../src/kernel/cursor.js';
import { SqliteDb, STATEMENT_CACHE_LIMIT } from '../../src/store/sqlite-db.js';
import type { SqlValue } from '../../src/store/sql-db.js';
import { tempDir } from '../helpers/daemon.js';

const dir = tempDir('svc-page-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('pageNewestFirst', () => {
  it('prepares one statement per filter combination, whatever the limit', async () => {
    const db = new SqliteDb({ path: join(dir, 'pages.sqlite') });
    await db.tx((t) => t.run('CREATE TABLE items (id TEXT PRIMARY KEY, state TEXT)'));
    await db.tx(async (t) => {
      for (let i = 0; i < 30; i++) await t.run('INSERT INTO items (id, state) VALUES (?, ?)', [`i${String(i).padStart(3, '0')}`, i % 2 ? 'a' : 'b']);
    });
    const prepare = vi.spyOn(db.raw, 'prepare');
    for (let limit = 1; limit <= 25; limit++) {
      const { page, next } = await pageNewestFirst<{ id: string }>(db, { table: 'items', idColumn: 'id', filters: { state: 'a' }, limit });
      expect(page.length).toBe(Math.min(limit, 15));
      expect(next === null).toBe(limit >= 15);
    }
    expect(prepare).toHaveBeenCalledTimes(1);
    await db.close();
  });
});

describe('pageNewestFirst with a byte bound (GET /v1/runs, svcd(8))', () => {
  it('a row written between its two reads pushes the oldest row to a next page, never out of the listing', async () => {
    const db = new SqliteDb({ path: join(dir, 'race.sqlite') });
    await db.tx((t) => t.run('CREATE TABLE items (id TEXT PRIMARY KEY, body TEXT)'));
    await db.tx(async (t) => {
      for (const id of ['a1', 'a2', 'a3']) await t.run('INSERT INTO items (id, body) VALUES (?, ?)', [id, 'x']);
    });
    // The sizes are read first; a newer row lands before the page itself is read.
    const all = db.all.bind(db);
    let inserted = false;
    vi.spyOn(db, 'all').mockImplementation(async (sql: string, params?: readonly SqlValue[]) => {
      const rows = await all(sql, params);
      if (!inserted && sql.includes('octet_length')) {
        inserted = true;
        await db.tx((t) => t.run('INSERT INTO items (id, body) VALUES (?, ?)', ['a4', 'x']));
      }
      return rows;
    }) as never;
    const q = { table: 'items', idColumn: 'id', filters: {}, limit: 10, bytes: { column: 'body', max: 1024 } };
    const first = await pageNewestFirst<{ id: string }>(db, q);
    expect(first.page.map((r) => r.id)).toEqual(['a4', 'a3', 'a2']);
    expect(first.next).toEqual(expect.any(String));
    const second = await pageNewestFirst<{ id: string }>(db, { ...q, after: first.next! });
    expect(second.page.map((r) => r.id)).toEqual(['a1']);
    expect(second.next).toBeNull();
    await db.close();
  });
});

describe('the store keeps a bounded number of prepared statements', () => {
  it('drops the oldest past STATEMENT_CACHE_LIMIT, and a dropped one is prepared again when asked', async () => {
    const db = new SqliteDb({ path: join(dir, 'cache.sqlite') });
    const prepare = vi.spyOn(db.raw, 'prepare');
    const texts = Array.from({ length: STATEMENT_CACHE_LIMIT + 10 }, (_, i) => `SELECT ${i} AS n`);
    for (const sql of texts) expect(await db.get(sql)).toEqual({ n: Number(sql.split(' ')[1]) });
    expect(prepare).toHaveBeenCalledTimes(texts.length);
    await db.get(texts[texts.length - 1]!); // kept
    expect(prepare).toHaveBeenCalledTimes(texts.length);
    expect(await db.get(texts[0]!)).toEqual({ n: 0 }); // dropped: prepared afresh
    expect(prepare).toHaveBeenCalledTimes(texts.length + 1);
    await db.close();
  });
});
