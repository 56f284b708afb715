/**
 * SqliteDb (decisions §11: better-sqlite3, WAL, synchronous FULL by default, migrations) runs
 * the SqlDb contract against a real file in a temp dir, plus SQLite-specific checks.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { KERNEL_MIGRATIONS } from '../../src/store/migrations.js';
import { migrate, SchemaTooNewError, SqliteDb } from '../../src/store/sqlite-db.js';
import { COMMITS_PER_CHECKPOINT } from '../../src/store/wal-checkpointer.js';
import { tempDir } from '../helpers/daemon.js';
import { describeSqlDbContract } from './sql-db.contract.js';

const dir = tempDir('svc-store-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = () => join(dir, `db-${n++}.sqlite`);

describeSqlDbContract('SqliteDb (file-backed)', async () => new SqliteDb({ path: file() }));

describe('SqliteDb specifics (D §11)', () => {
  it('a store that cannot be opened is named with the likely cause, not only SQLite\'s words (svcd(8) EXIT STATUS)', () => {
    const path = join(dir, 'a-directory');
    mkdirSync(path);
    expect(() => new SqliteDb({ path })).toThrow(`cannot open the store ${path}: unable to open database file (can this user read and write the file and the directory it is in?)`);
  });

  it('uses WAL and synchronous FULL by default, through group commit; synchronous is configurable', async () => {
    const db = new SqliteDb({ path: file() });
    expect(db.raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.synchronous).toBe('FULL');
    // Commits run with NORMAL; FULL durability comes from the fsync'd barrier commit.
    expect(db.raw.pragma('synchronous', { simple: true })).toBe(1);
    await db.close();
    const normal = new SqliteDb({ path: file(), synchronous: 'NORMAL' });
    expect(normal.synchronous).toBe('NORMAL');
    expect(normal.raw.pragma('synchronous', { simple: true })).toBe(1);
    expect(normal.barriers()).toBe(0);
    await normal.close();
  });

  it('creates a store with the page size asked for; a store that exists keeps its own (design.md "Store")', async () => {
    const path = file();
    const small = new SqliteDb({ path, pageSize: 1024 });
    expect(small.raw.pragma('page_size', { simple: true })).toBe(1024);
    await small.exec('CREATE TABLE t (v TEXT)');
    // A row bigger than a page spills to overflow pages and reads back whole.
    const big = 'x'.repeat(10_000);
    await small.tx(async (tx) => void (await tx.run('INSERT INTO t (v) VALUES (?)', [big])));
    await small.close();

    const again = new SqliteDb({ path, pageSize: 4096 });
    expect(again.raw.pragma('page_size', { simple: true })).toBe(1024);
    expect((await again.get<{ v: string }>('SELECT v FROM t'))?.v).toBe(big);
    await again.close();

    // One created elsewhere with SQLite's default (an older svcd's) keeps 4 KiB under a smaller ask.
    const older = file();
    const raw = new Database(older);
    raw.pragma('journal_mode = WAL');
    raw.exec('CREATE TABLE t (v TEXT)');
    raw.close();
    const opened = new SqliteDb({ path: older, pageSize: 1024 });
    expect(opened.raw.pragma('page_size', { simple: true })).toBe(4096);
    await opened.tx(async (tx) => void (await tx.run('INSERT INTO t (v) VALUES (?)', ['still writable'])));
    expect((await opened.get<{ v: string }>('SELECT v FROM t'))?.v).toBe('still writable');
    await opened.close();
  });

  it('refuses a page size SQLite would ignore without a word', () => {
    for (const pageSize of [0, 256, 1000, 3072, 131072, 1.5]) {
      expect(() => new SqliteDb({ path: file(), pageSize })).toThrow(`page size ${pageSize} is not a power of two from 512 to 65536`);
    }
  });

  it('acknowledges a durable commit only after an fsync barrier that follows it (group commit)', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const before = db.barriers();
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')));
    expect(db.barriers()).toBe(before + 1);
    await db.close();
  });

  it('lets concurrent transactions share one fsync', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const before = db.barriers();
    await Promise.all(Array.from({ length: 20 }, (_, i) => db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (?)', [i])))));
    const used = db.barriers() - before;
    expect(used).toBeGreaterThanOrEqual(1);
    expect(used).toBeLessThan(5);
    expect((await db.all('SELECT id FROM t')).length).toBe(20);
    await db.close();
  });

  it('returns a non-durable commit at once and syncs it within 100 ms', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const before = db.barriers();
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')), { durable: false });
    expect(db.barriers()).toBe(before);
    await new Promise((r) => setTimeout(r, 250));
    expect(db.barriers()).toBe(before + 1);
    await db.close();
  });

  it('keeps committed data across a reopen', async () => {
    const path = file();
    const a = new SqliteDb({ path });
    await a.exec('CREATE TABLE t (id TEXT PRIMARY KEY)');
    await a.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (?)', ['kept'])));
    await a.close();
    const b = new SqliteDb({ path });
    expect(await b.all('SELECT id FROM t')).toEqual([{ id: 'kept' }]);
    await b.close();
  });

  it('close is idempotent', async () => {
    const db = new SqliteDb({ path: file() });
    await db.close();
    await expect(db.close()).resolves.toBeUndefined();
  });

  it('migrate applies each migration once, in order, and records it', async () => {
    const db = new SqliteDb({ path: file() });
    const steps = [
      { id: 'test-001', sql: 'CREATE TABLE m (id TEXT PRIMARY KEY)' },
      { id: 'test-002', sql: 'ALTER TABLE m ADD COLUMN v TEXT' },
    ];
    expect(await migrate(db, steps)).toEqual(['test-001', 'test-002']);
    expect(await migrate(db, steps)).toEqual([]);
    expect((await db.all<{ id: string }>('SELECT id FROM schema_migrations ORDER BY id')).map((r) => r.id)).toEqual(['test-001', 'test-002']);
    await db.close();
  });

  it('refuses a store a newer build migrated (a downgrade), writing nothing', async () => {
    const db = new SqliteDb({ path: file() });
    const steps = [{ id: 'test-001', sql: 'CREATE TABLE m (id TEXT PRIMARY KEY)' }];
    const newer = [...steps, { id: 'test-002', sql: 'ALTER TABLE m ADD COLUMN v TEXT' }, { id: 'test-003', sql: 'CREATE TABLE n (id TEXT)' }];
    await migrate(db, newer);
    const refused = migrate(db, [...steps, { id: 'test-004', sql: 'CREATE TABLE o (id TEXT)' }]);
    await expect(refused).rejects.toBeInstanceOf(SchemaTooNewError);
    await expect(refused).rejects.toMatchObject({
      code: 'SVC_SCHEMA_TOO_NEW',
      unknownMigrations: ['test-002', 'test-003'],
      message: `cannot open the store ${db.raw.name}: a newer svcd migrated it (migrations test-002, test-003 unknown to this build); run that svcd, or restore a backup taken before the upgrade`,
    });
    expect(await db.get("SELECT name FROM sqlite_schema WHERE name = 'o'")).toBeUndefined();
    expect(await migrate(db, newer)).toEqual([]); // the newer build still opens it
    await db.close();
  });

  it('a failing migration leaves nothing half-applied', async () => {
    const db = new SqliteDb({ path: file() });
    await expect(migrate(db, [{ id: 'bad-001', sql: 'CREATE TABLE ok_part (id TEXT); CREATE TABLE broken (' }])).rejects.toThrow();
    expect(await db.get("SELECT name FROM sqlite_schema WHERE name = 'ok_part'")).toBeUndefined();
    expect(await db.all('SELECT id FROM schema_migrations')).toEqual([]);
    await db.close();
  });

  it('every kernel migration applies to a fresh store, with unique ids', async () => {
    const db = new SqliteDb({ path: file() });
    const ids = KERNEL_MIGRATIONS.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(await migrate(db, KERNEL_MIGRATIONS)).toEqual(ids);
    expect(await db.get("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'remits'")).toEqual({ name: 'remits' });
    await db.close();
  });
});

describe('onCommitted (decisions §6 long-poll wake-ups)', () => {
  it('runs after COMMIT and before the fsync barrier, never on rollback, and cannot fail the commit', async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const db = new SqliteDb({ path: join(mkdtempSync(join(tmpdir(), 'svc-oncommit-')), 'db.sqlite') });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const before = db.barriers();
    let seen: number | null = null;
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')), { onCommitted: () => (seen = db.barriers()) });
    expect(seen).toBe(before); // called before this commit's barrier
    expect(db.barriers()).toBe(before + 1);
    let called = false;
    await expect(db.tx(async () => { throw new Error('boom'); }, { onCommitted: () => (called = true) })).rejects.toThrow('boom');
    expect(called).toBe(false);
    await expect(db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (2)')), { onCommitted: () => { throw new Error('hook'); } })).resolves.toBeUndefined();
    expect((await db.all('SELECT id FROM t ORDER BY id')).length).toBe(2);
    await db.close();
  });
});

describe('plain reads share one read transaction per turn (bench/README.md item 18)', () => {
  const turn = () => new Promise((r) => setImmediate(r));
  const begins = (db: SqliteDb) => {
    const exec = vi.spyOn(db.raw, 'exec');
    return () => exec.mock.calls.filter(([sql]) => /^BEGIN/.test(sql)).length;
  };

  it('reads in one turn take one read transaction, which ends with the turn', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await turn();
    const count = begins(db);
    await db.get('SELECT COUNT(*) AS n FROM t');
    await db.all('SELECT id FROM t');
    await db.get('SELECT COUNT(*) AS n FROM t');
    expect(count()).toBe(1);
    expect(db.raw.inTransaction).toBe(true);
    await turn();
    expect(db.raw.inTransaction).toBe(false);
    await db.get('SELECT COUNT(*) AS n FROM t');
    expect(count()).toBe(2);
    await db.close();
  });

  it('a transaction in the same turn ends the shared read; reads after it see its commit', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 0 });
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')), { durable: false });
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 1 });
    await db.run('INSERT INTO t (id) VALUES (2)');
    expect(await db.all('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
    await db.close();
  });

  it("sees another process's commit from the next turn on, and never blocks it", async () => {
    const path = file();
    const db = new SqliteDb({ path });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const other = new Database(path);
    other.pragma('busy_timeout = 0'); // a read that blocked the writer would fail here at once
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 0 });
    other.prepare('INSERT INTO t (id) VALUES (1)').run();
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 0 }); // the turn's snapshot
    await turn();
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 1 });
    other.close();
    await db.close();
  });

  it('a shared read whose COMMIT fails is rolled back, never left open', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await db.get('SELECT COUNT(*) AS n FROM t');
    const exec = db.raw.exec.bind(db.raw);
    let failed = 0;
    vi.spyOn(db.raw, 'exec').mockImplementation((sql: string) => {
      if (sql === 'COMMIT' && failed++ === 0) throw new Error('disk I/O error');
      return exec(sql);
    });
    await turn(); // the turn ends the shared read: its COMMIT throws, in a setImmediate
    expect(failed).toBe(1);
    expect(db.raw.inTransaction).toBe(false);
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')));
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 1 });
    await db.close();
  });

  it('a failing read leaves the store usable, and close ends a shared read', async () => {
    const path = file();
    const db = new SqliteDb({ path });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await expect(db.get('SELECT nope FROM t')).rejects.toThrow(/no such column/);
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')));
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 1 });
    await db.close(); // with the shared read still open
    const again = new SqliteDb({ path });
    expect(await again.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 1 });
    await again.close();
  });
});

describe('WAL checkpoints off the event loop (bench/README.md, docs/design.md "Store")', () => {
  it('checkpoints on a worker thread every COMMITS_PER_CHECKPOINT commits and rewinds the WAL', async () => {
    const path = file();
    const db = new SqliteDb({ path });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    // SQLite's own automatic checkpoint is only the fallback, far above the worker's interval.
    expect(db.raw.pragma('wal_autocheckpoint', { simple: true })).toBeGreaterThan(COMMITS_PER_CHECKPOINT * 10);
    const body = 'x'.repeat(3000); // about one WAL frame per row
    const commits = COMMITS_PER_CHECKPOINT * 3;
    for (let i = 0; i < commits; i++) {
      await db.tx(async (tx) => void (await tx.run('INSERT INTO t (body) VALUES (?)', [body])), { durable: false });
      if (i % 16 === 0) {
        await db.get('SELECT COUNT(*) AS n FROM t'); // a shared read open when the worker's answer comes
        await new Promise((r) => setImmediate(r)); // let the worker's answers in, as requests do
      }
    }
    await db.checkpointer!.checkpoint(); // waits for one in flight, or runs one more
    expect(db.checkpointer!.completed).toBeGreaterThanOrEqual(1);
    // Rewound: the next writer starts the WAL over, so it holds only that commit's frames.
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (body) VALUES (?)', [body])), { durable: false });
    const [state] = db.raw.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    expect(state!.log).toBeLessThan(10);
    await db.close();
    expect(existsSync(`${path}-wal`)).toBe(false); // both connections closed: SQLite removed the WAL
    const again = new SqliteDb({ path });
    expect(await again.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: commits + 1 });
    await again.close();
  });

  it('rewinds on the worker, not the event loop: the owner never runs a checkpoint itself', async () => {
    const path = file();
    const db = new SqliteDb({ path });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    const pragma = vi.spyOn(db.raw, 'pragma');
    const body = 'x'.repeat(3000);
    for (let i = 0; i < COMMITS_PER_CHECKPOINT * 2; i++) {
      await db.tx(async (tx) => void (await tx.run('INSERT INTO t (body) VALUES (?)', [body])), { durable: false });
    }
    await db.checkpointer!.checkpoint();
    expect(db.checkpointer!.completed).toBeGreaterThanOrEqual(1);
    expect(pragma.mock.calls.filter(([sql]) => /checkpoint/i.test(String(sql)))).toEqual([]);
    pragma.mockRestore();
    // Rewound all the same: the next commit starts the WAL over.
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (body) VALUES (?)', [body])), { durable: false });
    const [state] = db.raw.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    expect(state!.log).toBeLessThan(10);
    await db.close();
  });

  it("another process's reader only postpones the rewind: nothing waits for it, the next round catches up", async () => {
    const path = file();
    const db = new SqliteDb({ path });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    const body = 'x'.repeat(3000);
    const commit = () => db.tx(async (tx) => void (await tx.run('INSERT INTO t (body) VALUES (?)', [body])), { durable: false });
    for (let i = 0; i < 20; i++) await commit();
    const reader = new Database(path);
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) AS n FROM t').get(); // holds its snapshot, and so the WAL
    for (let i = 0; i < 20; i++) await commit();
    const t0 = performance.now();
    const r = await db.checkpointer!.checkpoint();
    expect(performance.now() - t0).toBeLessThan(2000); // not the 5 s busy timeout
    expect(r.ok).toBe(true); // the PASSIVE part copied what it could
    await commit();
    const held = db.raw.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    expect(held[0]!.log).toBeGreaterThan(40); // not rewound while the reader holds it
    reader.exec('COMMIT');
    reader.close();
    await db.checkpointer!.checkpoint();
    await commit();
    const [state] = db.raw.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    expect(state!.log).toBeLessThan(10);
    expect(await db.get('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 42 });
    await db.close();
  });

  it('a store that never reaches the interval never starts a worker', async () => {
    const db = new SqliteDb({ path: file() });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (1)')));
    expect(db.checkpointer!.completed).toBe(0);
    expect((db.checkpointer as unknown as { worker: unknown }).worker).toBeNull();
    await db.close();
  });

  it('in-memory stores have no checkpointer', async () => {
    const db = new SqliteDb({ path: ':memory:' });
    expect(db.checkpointer).toBeNull();
    await db.close();
  });
});
