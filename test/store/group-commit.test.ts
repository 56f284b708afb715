/**
 * Group commit's sync barrier (decisions §11: the embedded SQLite store in WAL; docs/design.md
 * "Store": synchronous FULL by default, through group commit): every durable commit is
 * acknowledged only after an fdatasync of the WAL that started after it; a barrier covering
 * several commits, or one while other transactions are in flight, runs on the thread pool so
 * the event loop keeps serving meanwhile; a lone commit's barrier with nothing else in flight
 * runs inline. node:fs is wrapped (not replaced) to count and, where a
 * test needs it, hold back the real fdatasync calls.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { SqliteDb, StoreClosedError } from '../../src/store/sqlite-db.js';
import { storeFault } from '../../src/store/store-fault.js';
import { tempDir } from '../helpers/daemon.js';

const fsCalls = vi.hoisted(() => ({
  async: 0,
  inline: 0,
  /** Set by a test: runs before the real fdatasync's callback (a slow disk, or an error). */
  hold: null as null | ((done: (err: NodeJS.ErrnoException | null) => void, err: NodeJS.ErrnoException | null) => void),
}));

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  return {
    ...fs,
    fdatasync(fd: number, cb: (err: NodeJS.ErrnoException | null) => void) {
      fsCalls.async++;
      fs.fdatasync(fd, (err) => (fsCalls.hold ? fsCalls.hold(cb, err) : cb(err)));
    },
    fdatasyncSync(fd: number) {
      fsCalls.inline++;
      fs.fdatasyncSync(fd);
    },
  };
});

const dir = tempDir('svc-group-commit-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
async function store(): Promise<SqliteDb> {
  const db = new SqliteDb({ path: join(dir, `db-${n++}.sqlite`) });
  await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
  return db;
}
const insert = (db: SqliteDb, id: number, onCommitted?: () => void) => db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (?)', [id])), { onCommitted });

/**
 * The next barrier's fdatasync fails with EIO when the returned function is called; later ones
 * succeed (Linux reports a failed writeback once, then calls the pages clean).
 */
function failFirstBarrierOnCue(): () => void {
  let fail!: () => void;
  const failed = new Promise<void>((r) => (fail = r));
  let first = true;
  fsCalls.hold = (done) => {
    if (!first) return done(null);
    first = false;
    void failed.then(() => done(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })));
  };
  return fail;
}

beforeEach(() => {
  fsCalls.async = 0;
  fsCalls.inline = 0;
  fsCalls.hold = null;
});

describe('group commit barrier (D §11 SQLite store; docs/design.md "Store")', () => {
  it('syncs a lone commit inline, with one fdatasync of the WAL', async () => {
    const db = await store();
    fsCalls.inline = 0;
    await insert(db, 1);
    expect(fsCalls).toMatchObject({ inline: 1, async: 0 });
    expect(db.barriers()).toBeGreaterThanOrEqual(1);
    await db.close();
  });

  it('syncs a lone commit on the pool when another transaction is in flight, so the loop can serve it meanwhile', async () => {
    const db = await store();
    fsCalls.inline = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = insert(db, 1);
    const second = db.tx(async (tx) => {
      await gate; // still running when the first commit's barrier starts
      await tx.run('INSERT INTO t (id) VALUES (2)');
    });
    await first;
    expect(fsCalls).toMatchObject({ async: 1, inline: 0 });
    release();
    await second; // now alone: inline
    expect(fsCalls).toMatchObject({ async: 1, inline: 1 });
    await db.close();
  });

  it('covers concurrent commits with one fdatasync on the thread pool', async () => {
    const db = await store();
    fsCalls.inline = 0;
    const before = db.barriers();
    await Promise.all(Array.from({ length: 20 }, (_, i) => insert(db, i)));
    expect(fsCalls.async).toBe(1);
    expect(fsCalls.inline).toBe(0);
    expect(db.barriers()).toBe(before + 1);
    await db.close();
  });

  it('keeps committing while a barrier waits for the disk, and acknowledges later commits only after the next barrier', async () => {
    const db = await store();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding = true;
    fsCalls.hold = (done, err) => {
      if (!holding) return done(err);
      holding = false;
      void held.then(() => done(err)); // the first barrier's disk is slow
    };
    const acked: string[] = [];
    const first = Promise.all([insert(db, 1), insert(db, 2)]).then(() => acked.push('first'));
    await vi.waitFor(() => expect(fsCalls.async).toBe(1)); // the first barrier is on the disk
    let committed = false;
    const second = Promise.all([insert(db, 3, () => (committed = true)), insert(db, 4)]).then(() => acked.push('second'));
    await vi.waitFor(() => expect(committed).toBe(true)); // the event loop was free to commit
    expect(acked).toEqual([]); // nothing acknowledged while its fsync is outstanding
    expect(fsCalls.async).toBe(1); // the second batch waits for a barrier that starts after it
    release();
    await Promise.all([first, second]);
    expect(acked).toEqual(['first', 'second']);
    expect(fsCalls.async).toBe(2);
    expect((await db.all('SELECT id FROM t ORDER BY id')).length).toBe(4);
    await db.close();
  });

  it('reports a failed fsync to every transaction it covered, then takes no write until restarted (as PostgreSQL)', async () => {
    const db = await store();
    fsCalls.hold = (done) => {
      fsCalls.hold = null;
      done(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    };
    const results = await Promise.allSettled([insert(db, 1), insert(db, 2)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason.message).toMatch(/EIO/);
    // Its commits are visible but maybe not on disk, and a later commit's frames would follow
    // them: a power loss could drop what a later barrier acknowledged. No later write is taken.
    const later = insert(db, 3);
    await expect(later).rejects.toMatchObject({ code: 'EIO', message: expect.stringMatching(/takes no writes since a sync .* failed .*restart svcd/) });
    expect(storeFault(await later.catch((e: unknown) => e))).toMatchObject({ code: 'EIO', transient: false });
    expect(db.writeFault()).toMatchObject({ code: 'EIO', message: expect.stringMatching(/restart svcd/) });
    expect((await db.all('SELECT id FROM t WHERE id = 3')).length).toBe(0);
    await db.close();
    // Reopened, recovery reads the WAL as the disk has it, and writes are taken again.
    const again = new SqliteDb({ path: db.raw.name });
    await expect(insert(again, 4)).resolves.toBeUndefined();
    await again.close();
  });

  it('a commit made while the failing barrier was on the disk is never acknowledged: its frames follow the failed ones', async () => {
    const db = await store();
    const fail = failFirstBarrierOnCue();
    const batch1 = Promise.allSettled([insert(db, 1), insert(db, 2)]);
    await vi.waitFor(() => expect(fsCalls.async).toBe(1)); // barrier 1 is on the disk
    let committed = false;
    // Began before the failure (so tx()'s check let it in), commits while barrier 1 is out.
    const later = insert(db, 3, () => (committed = true));
    await vi.waitFor(() => expect(committed).toBe(true));
    fail();
    expect((await batch1).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    // Its frames follow the failed ones in the WAL: a power loss could drop it, so it must not
    // be acknowledged by a later barrier (the commit message's own hazard).
    const r = await Promise.allSettled([later]);
    expect(r[0]!.status).toBe('rejected');
    await db.close();
  });

  it('a transaction queued behind the mutex when the fsync fails does not write at all', async () => {
    const db = await store();
    const fail = failFirstBarrierOnCue();
    const batch1 = Promise.allSettled([insert(db, 1), insert(db, 2)]);
    await vi.waitFor(() => expect(fsCalls.async).toBe(1));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Holds the mutex across the failure, then another transaction queued behind it runs.
    const holder = db.tx(async () => {
      await gate;
    });
    const queued = insert(db, 4);
    fail();
    await batch1;
    release();
    await Promise.allSettled([holder, queued]);
    await expect(queued).rejects.toMatchObject({ code: 'EIO' });
    expect((await db.all('SELECT id FROM t WHERE id = 4')).length).toBe(0);
    await db.close();
  });

  it('a plain read asked after close is told as the store closing (503), not a bare TypeError (500 internal)', async () => {
    const db = await store();
    await db.close();
    const err = await db.all('SELECT id FROM t').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(storeFault(err)).toMatchObject({ code: 'SVC_STORE_CLOSED', transient: true });
  });

  it('close lets the transactions already queued finish and covers them with a barrier; a later one is a 503 store fault', async () => {
    const db = await store();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const queued = db.tx(async (t) => {
      await gate; // still running when close starts (a request a cut-off drain left)
      await t.run('INSERT INTO t (id) VALUES (1)');
    });
    const closing = db.close();
    await expect(insert(db, 2)).rejects.toMatchObject({ code: 'SVC_STORE_CLOSED' });
    expect(storeFault(new StoreClosedError())).toMatchObject({ code: 'SVC_STORE_CLOSED', transient: true });
    const before = fsCalls.async + fsCalls.inline;
    release();
    await queued;
    expect(db.raw.open).toBe(true); // acknowledged before the connection closed …
    expect(fsCalls.async + fsCalls.inline).toBeGreaterThan(before); // … after an fsync that covered it
    await closing;
    const reopened = new SqliteDb({ path: db.raw.name });
    expect(await reopened.all('SELECT id FROM t')).toEqual([{ id: 1 }]);
    await reopened.close();
  });

  it('tells its observer (kernel metrics) each durable commit\'s wait and each fsync with the transactions it covered', async () => {
    const waits: number[] = [];
    const fsyncs: number[] = [];
    const db = new SqliteDb({ path: join(dir, `db-${n++}.sqlite`), observer: { durableWait: (s) => waits.push(s), fsync: (t) => fsyncs.push(t) } });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    waits.length = 0;
    fsyncs.length = 0;
    await Promise.all([insert(db, 1), insert(db, 2), insert(db, 3)]);
    expect(fsyncs).toEqual([3]);
    expect(waits).toHaveLength(3);
    for (const s of waits) expect(s).toBeGreaterThan(0);
    await db.tx(async (tx) => void (await tx.run('INSERT INTO t (id) VALUES (4)')), { durable: false });
    expect(waits).toHaveLength(3); // a non-durable commit does not wait
    await db.close(); // its barrier covers the non-durable commit
    expect(fsyncs).toEqual([3, 1]);
  });

  it('a throwing observer costs a sample, never a durable commit', async () => {
    const db = new SqliteDb({
      path: join(dir, `db-${n++}.sqlite`),
      observer: {
        durableWait: () => {
          throw new Error('metrics broke');
        },
        fsync: () => {
          throw new Error('metrics broke');
        },
      },
    });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await expect(Promise.all([insert(db, 1), insert(db, 2)])).resolves.toHaveLength(2);
    await expect(insert(db, 3)).resolves.toBeUndefined();
    expect((await db.all('SELECT id FROM t')).length).toBe(3);
    await db.close();
  });

  it('does not fsync for a non-FULL store', async () => {
    const db = new SqliteDb({ path: join(dir, `db-${n++}.sqlite`), synchronous: 'NORMAL' });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    await Promise.all([insert(db, 1), insert(db, 2)]);
    expect(fsCalls).toMatchObject({ inline: 0, async: 0 });
    await db.close();
  });
});
