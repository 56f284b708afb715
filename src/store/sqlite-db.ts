/**
 * The embedded store: one better-sqlite3 connection in WAL mode. better-sqlite3 is
 * synchronous, so a transaction spanning `await`s would interleave with other callers on
 * the same connection; an async mutex therefore serializes transactions (and plain calls
 * wait for the running transaction), which matches SQLite's single-writer model anyway.
 *
 * Group commit: with `synchronous` FULL (the default) a commit would fsync the WAL, 0.2–1 ms
 * on these disks, blocking the event loop. Instead each transaction commits with NORMAL (its
 * WAL frames written, not synced) and its caller then waits for a sync barrier: an fdatasync
 * of the WAL file, which covers every frame written before it, as FULL's own fsync at COMMIT
 * does. When the barrier covers several commits it runs on libuv's thread pool, so the event
 * loop goes on serving requests (and committing the next batch) while the disk works; a
 * barrier for a lone commit with no other transaction open runs inline, where the hand-off
 * would only add latency. Either way N concurrent transactions cost one fsync, and nothing is
 * acknowledged before it is as durable as FULL would have made it.
 */
import { accessSync, closeSync, constants, fchmodSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';
import { ensureDir } from '../util/ensure-dir.js';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import Database from 'better-sqlite3';
import { AsyncMutex } from './async-mutex.js';
import { isDiskFaultCode, storeFault } from './store-fault.js';
import type { Migration, RunResult, SqlDb, SqlValue, TxOptions } from './sql-db.js';
import { postgresDdl } from './pg-dialect.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, SQLITE_AUTOCHECKPOINT_PAGES, WalCheckpointer, type CheckpointResult } from './wal-checkpointer.js';

export type SqliteSynchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

export interface SqliteDbOptions {
  /** File path, or ":memory:". */
  path: string;
  /** PRAGMA synchronous. (Default: FULL, so a committed step survives power loss.) */
  synchronous?: SqliteSynchronous;
  /** Milliseconds to wait on a lock held by another process. (Default: 5000) */
  busyTimeoutMs?: number;
  /** Observes group commit (metrics): how long each durable commit waited, and each fsync. */
  observer?: GroupCommitObserver;
  /**
   * PRAGMA page_size (bytes, a power of two from 512 to 65536) for a store this call creates.
   * A store that exists keeps the page size it was created with: in WAL mode SQLite changes
   * it only by rebuilding the file (VACUUM with the WAL off). (Default: SQLite's, 4096)
   */
  pageSize?: number;
}

export interface GroupCommitObserver {
  /** A durable transaction's wait from its COMMIT to the end of the fsync that covered it. */
  durableWait(seconds: number): void;
  /** A barrier's fdatasync of the WAL, with the transactions it covered. */
  fsync(transactions: number): void;
}

type Db = Database.Database;

/** How long a write fault is reported without a write to renew or clear it (writeFault). */
const WRITE_FAULT_MEMORY_MS = 60_000;

/** What SQLite truncates the WAL to when it rewinds it (it otherwise keeps its largest size). */
const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

/** Prepared statements a store keeps (SqliteHandle.stmt). */
export const STATEMENT_CACHE_LIMIT = 1000;

class SqliteHandle implements SqlDb {
  readonly dialect = 'sqlite' as const;

  constructor(
    protected readonly db: Db,
    private readonly cache: Map<string, Database.Statement>,
  ) {}

  protected stmt(sql: string): Database.Statement {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      // A bound on what a prepared statement costs (about 10 KB each): the oldest goes first,
      // on a miss only, so a hit costs one lookup. svc's own texts are a few hundred; SQL
      // built from a request (a limit spelled into the text) once grew this without end.
      if (this.cache.size >= STATEMENT_CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(sql, s);
    }
    return s;
  }

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return this.stmt(sql).get(...params) as T | undefined;
  }
  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return this.stmt(sql).all(...params) as T[];
  }
  async run(sql: string, params: readonly SqlValue[] = []): Promise<RunResult> {
    const s = this.stmt(sql);
    if (s.reader) {
      s.all(...params); // e.g. INSERT … RETURNING used only for its effect
      return { changes: this.db.prepare('SELECT changes() AS c').pluck().get() as number };
    }
    return { changes: s.run(...params).changes };
  }
  async exec(sql: string): Promise<void> {
    this.db.exec(sql);
  }
  async tx<T>(fn: (db: SqlDb) => Promise<T>, _opts?: TxOptions): Promise<T> {
    return fn(this); // already inside the transaction
  }
  async close(): Promise<void> {
    /* the owner closes */
  }
}

/**
 * Opens the store and turns WAL on, the first write. SQLite's own messages ("unable to open
 * database file", "attempt to write a readonly database") name neither the file nor the
 * likely cause, and are what an operator starting svcd as the wrong user sees first.
 */
function openStore(path: string, pageSize: number | undefined): Database.Database {
  let raw: Database.Database | null = null;
  try {
    raw = new Database(path);
    // Takes effect only while the file is still empty: the WAL switch below is its first write.
    if (pageSize !== undefined) raw.pragma(`page_size = ${pageSize}`);
    raw.pragma('journal_mode = WAL');
    raw.pragma('busy_timeout = 5000'); // the probe waits out another writer as a write would
    if (path !== ':memory:') probeWrite(raw);
    return raw;
  } catch (err) {
    raw?.close();
    throw openError('the store', path, err);
  }
}

/**
 * Creates a new store file empty and 0600 (whatever the umask) before SQLite opens it: SQLite
 * would make it 0644 less the umask, readable by every local user in a directory they can
 * enter, and its -wal and -shm take the main file's mode. The stores hold run inputs, tool
 * results and approvals. Best effort: a file that exists stays as it is (svcd narrows it at
 * start, private-files.ts), and one that cannot be made is openStore's to explain.
 */
function createPrivately(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch {
    return;
  }
  try {
    fchmodSync(fd, 0o600); // a umask such as 0277 would leave it 0400, which SQLite cannot write
  } finally {
    closeSync(fd);
  }
}

function validPageSize(n: number): boolean {
  return Number.isInteger(n) && n >= 512 && n <= 65536 && (n & (n - 1)) === 0;
}

/**
 * Writes a page and rolls it back. A file this user may read but not write (a data directory
 * copied from another user) opens read-only without a word, WAL and all, and every write
 * would then fail in service; found here, svcd refuses to start and says why.
 */
function probeWrite(raw: Database.Database): void {
  const version = raw.pragma('user_version', { simple: true }) as number;
  raw.exec('BEGIN IMMEDIATE');
  try {
    raw.pragma(`user_version = ${version}`);
  } finally {
    raw.exec('ROLLBACK');
  }
}

/** An error opening a SQLite file, naming the file and, for a permission problem, the likely cause. */
export function openError(what: string, path: string, err: unknown): Error {
  const code = (err as { code?: string }).code ?? '';
  const message = String((err as Error)?.message ?? err);
  if (NATIVE_MODULE_PROBLEM.test(message)) {
    // Not the file's fault: better-sqlite3's compiled part is missing (its install script did not
    // run: --ignore-scripts, or npm's allowScripts) or was built for another Node (an upgrade).
    // Its own message is a dozen lines of paths it tried; the first says which case.
    return new Error(
      `cannot open ${what} ${path}: better-sqlite3's native module is missing or built for another Node.js than ${process.version} ` +
        `(${message.split('\n')[0]!.trim()}); run "npm rebuild better-sqlite3" in ${installRoot()}, with install scripts allowed`,
      { cause: err },
    );
  }
  const hint = /^SQLITE_(CANTOPEN|READONLY|PERM|AUTH)/.test(code) ? ` (${onReadOnlyDisk(path) ? 'the file system it is on is mounted read-only' : 'can this user read and write the file and the directory it is in?'})` : '';
  return new Error(`cannot open ${what} ${path}: ${message}${hint}`, { cause: err });
}

/** SQLite says "readonly database" for a read-only mount too, where no chmod or chown helps. */
function onReadOnlyDisk(path: string): boolean {
  try {
    accessSync(dirname(path), constants.W_OK);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EROFS';
  }
}

/** What the bindings loader and Node's dlopen say when the compiled module is absent or for another ABI. */
const NATIVE_MODULE_PROBLEM = /Could not locate the bindings file|NODE_MODULE_VERSION|compiled against a different Node\.js version|invalid ELF header|wrong ELF class|not a valid Win32 application/;

/** The directory whose node_modules holds better-sqlite3 (where `npm rebuild` finds it). */
function installRoot(): string {
  try {
    return resolve(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')), '..', '..');
  } catch {
    return 'the directory svc is installed in';
  }
}

/** SQLite implementation of SqlDb. */
export class SqliteDb implements SqlDb {
  readonly dialect = 'sqlite' as const;
  readonly raw: Db;
  /** The durability asked for (PRAGMA synchronous), which group commit provides. */
  readonly synchronous: SqliteSynchronous;
  private readonly mutex = new AsyncMutex();
  private readonly handle: SqliteHandle;
  private readonly syncLevel: 'FULL' | 'EXTRA' | null;
  private closed = false;
  /** Set by close(): transactions not yet begun are refused (StoreClosedError). */
  private closing: Promise<void> | null = null;
  /** `at`: wall clock, for the health answer; `mono`: performance.now(), for how long it is remembered. */
  private writeFaultValue: { code: string; message: string; at: number; mono: number } | null = null;
  /**
   * A barrier's fdatasync failed: its commits are visible but maybe not on disk, and later
   * frames would follow them in the WAL, so a power loss could drop commits acknowledged after
   * it (Linux reports a failed writeback once, then calls the pages clean). As PostgreSQL
   * does, the store takes no write after that until the process restarts and recovery makes
   * the disk authoritative.
   */
  private syncFailure: { code: string; message: string; at: number } | null = null;
  private totalChangesStmt: Database.Statement | null = null;
  /** A read transaction that plain reads share until the turn ends (beginSharedRead). */
  private sharedRead = false;
  /** Commits since the last barrier started: the ones it has yet to cover. */
  private unsynced = 0;
  /** Transactions begun and not yet acknowledged or failed (queued, running or syncing). */
  private openTransactions = 0;
  /** The next barrier, while it has not started: later committers join it. */
  private nextBarrier: Promise<void> | null = null;
  /** The barrier's fdatasync while it runs (one at a time: the next one waits for it). */
  private inflight: Promise<void> | null = null;
  private fsyncs = 0;
  /** The WAL file, opened at the first barrier (SQLite creates it when it opens the database). */
  private walFd: number | null = null;
  private lazyTimer: NodeJS.Timeout | null = null;
  private readonly observer: GroupCommitObserver | undefined;
  /** Runs WAL checkpoints on a worker thread (file-backed stores only). */
  readonly checkpointer: WalCheckpointer | null = null;

  constructor(opts: SqliteDbOptions) {
    if (opts.path !== ':memory:') {
      ensureDir(dirname(opts.path));
      createPrivately(opts.path);
    }
    if (opts.pageSize !== undefined && !validPageSize(opts.pageSize)) throw new Error(`page size ${opts.pageSize} is not a power of two from 512 to 65536`);
    this.raw = openStore(opts.path, opts.pageSize);
    const level = opts.synchronous ?? 'FULL';
    this.synchronous = level;
    // Group commit applies when every commit must reach the disk (FULL, EXTRA) on a file.
    this.syncLevel = (level === 'FULL' || level === 'EXTRA') && opts.path !== ':memory:' ? level : null;
    this.raw.pragma(`synchronous = ${this.syncLevel ? 'NORMAL' : level}`);
    this.raw.pragma('foreign_keys = ON');
    this.observer = opts.observer;
    this.raw.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    if (opts.path !== ':memory:') {
      this.raw.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
      this.raw.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`); // a burst's WAL shrinks back once rewound
      this.checkpointer = new WalCheckpointer(
        this.raw.name,
        level,
        (restart) => this.mutex.run(() => this.rewindWal(restart)),
        () => {
          if (!this.closed) this.raw.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
        },
      );
    }
    // Earlier versions made the barrier a FULL commit of this one-row table; nothing uses it now.
    this.raw.exec('DROP TABLE IF EXISTS svc_sync_barrier');
    this.handle = new SqliteHandle(this.raw, new Map());
  }

  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.mutex.run(() => {
      if (!this.raw.open) throw new StoreClosedError(); // a request the drain cut off: 503, not a TypeError's 500
      this.beginSharedRead();
      return this.handle.get<T>(sql, params);
    });
  }
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.mutex.run(() => {
      if (!this.raw.open) throw new StoreClosedError();
      this.beginSharedRead();
      return this.handle.all<T>(sql, params);
    });
  }

  /**
   * Plain reads share one read transaction until the event loop's turn ends. Each read
   * transaction of its own costs SQLite two lock calls on the WAL index (`fcntl`; with the
   * read-mark update after a write, four): 6.3 µs a point read here against 1.5 µs inside a
   * transaction, and a kernel cycle made nine such reads (bench/README.md). Reads between two
   * writes see every commit before them as before: a transaction ends the shared read first,
   * and svcd's connection is the only writer of its store (the CLI goes through HTTP). Were
   * another process to write the file, its commit would be seen once the shared read ends,
   * at most one turn of the event loop later, as if the read had come a moment earlier.
   */
  private beginSharedRead(): void {
    if (this.sharedRead || this.raw.inTransaction) return; // (the latter: a caller of `raw`'s own)
    this.raw.exec('BEGIN');
    this.sharedRead = true;
    setImmediate(() => this.endSharedRead());
  }

  /** Safe without the mutex: a transaction ends the shared read before it begins its own. */
  private endSharedRead(): void {
    if (!this.sharedRead) return;
    this.sharedRead = false;
    if (!this.raw.open || !this.raw.inTransaction) return;
    try {
      this.raw.exec('COMMIT');
    } catch {
      // A read-only COMMIT does not fail in practice; if one did, the connection must still
      // never be left inside a transaction nobody owns (every later BEGIN would fail).
      try {
        this.raw.exec('ROLLBACK');
      } catch {
        /* nothing left to undo */
      }
    }
  }
  /** A single statement in its own durable transaction. */
  run(sql: string, params?: readonly SqlValue[]): Promise<RunResult> {
    return this.tx((h) => h.run(sql, params));
  }
  exec(sql: string): Promise<void> {
    return this.tx((h) => h.exec(sql));
  }

  async tx<T>(fn: (db: SqlDb) => Promise<T>, opts: TxOptions = {}): Promise<T> {
    if (this.closing) throw new StoreClosedError();
    if (this.syncFailure) throw syncFailedError(this.syncFailure);
    this.openTransactions++;
    try {
      return await this.commitAndSync(fn, opts);
    } catch (err) {
      const fault = storeFault(err);
      if (fault && !fault.transient) this.writeFaultValue = { code: fault.code, message: fault.message, at: Date.now(), mono: performance.now() };
      throw err;
    } finally {
      this.openTransactions--;
    }
  }

  /** Rows this connection has changed since it opened (SQLite's total_changes()). */
  private totalChanges(): number {
    this.totalChangesStmt ??= this.raw.prepare('SELECT total_changes()').pluck();
    return this.totalChangesStmt.get() as number;
  }

  /**
   * The store fault a write failed with (a full disk, a read-only or damaged file, a failed
   * fsync) in the last minute, until a transaction that changed something commits; null while
   * writes work. Reads may still work meanwhile, so /v1/health asks this rather than trusting
   * its own read. A commit that changed nothing (a lease scan that found its row stale) proves
   * nothing about the disk; a kernel nobody writes to forgets the fault after the minute.
   */
  writeFault(): { code: string; message: string; at: string } | null {
    if (this.syncFailure) return { code: this.syncFailure.code, message: syncFailedError(this.syncFailure).message, at: new Date(this.syncFailure.at).toISOString() };
    const f = this.writeFaultValue;
    // Monotonic: a wall clock stepped back an hour kept /v1/health at ok: false for the hour.
    if (f === null || performance.now() - f.mono > WRITE_FAULT_MEMORY_MS) return null;
    return { code: f.code, message: f.message, at: new Date(f.at).toISOString() };
  }

  private async commitAndSync<T>(fn: (db: SqlDb) => Promise<T>, opts: TxOptions): Promise<T> {
    const result = await this.mutex.run(async () => {
      // Checked again here: a barrier may have failed while this one waited for the mutex.
      if (this.syncFailure) throw syncFailedError(this.syncFailure);
      if (!this.raw.open) throw new StoreClosedError();
      this.endSharedRead();
      this.raw.exec('BEGIN IMMEDIATE');
      // While a write fault is remembered: did this transaction change anything (writeFault)?
      const changesBefore = this.writeFaultValue ? this.totalChanges() : null;
      try {
        const r = await fn(this.handle);
        const changed = changesBefore !== null && this.totalChanges() > changesBefore;
        this.raw.exec('COMMIT');
        if (changed) this.writeFaultValue = null;
        if (this.syncLevel) this.unsynced++;
        this.checkpointer?.afterCommit();
        try {
          opts.onCommitted?.();
        } catch {
          /* committed is committed: a failing hook must not report the transaction as failed */
        }
        return r;
      } catch (err) {
        if (this.raw.inTransaction) this.raw.exec('ROLLBACK');
        throw err;
      }
    });
    if (this.syncLevel) {
      if (opts.durable === false) this.syncSoon();
      else {
        const committedAt = performance.now();
        await this.sync();
        this.observe(() => this.observer?.durableWait((performance.now() - committedAt) / 1000));
      }
    }
    return result;
  }

  /**
   * After a background checkpoint, between two transactions: the worker copies the frames
   * written meanwhile and rewinds the WAL while this connection holds the mutex, so none of its
   * transactions is open. The event loop is free meanwhile; the store's callers wait.
   */
  private async rewindWal(restart: () => Promise<CheckpointResult>): Promise<void> {
    if (this.closed) return;
    this.endSharedRead(); // a reader would keep the WAL from being rewound
    const r = await restart();
    if (!r.ok) throw new Error(`WAL rewind failed: ${r.error}`);
  }

  /** Metrics must never turn a durable commit into a reported failure. */
  private observe(fn: () => void): void {
    try {
      fn();
    } catch {
      /* a broken observer loses a sample, nothing else */
    }
  }

  /** Barrier fsyncs so far (tests and metrics). */
  barriers(): number {
    return this.fsyncs;
  }

  /** Resolves once every commit made before the call is on disk. */
  sync(): Promise<void> {
    if (!this.syncLevel) return Promise.resolve();
    this.nextBarrier ??= (async () => {
      await this.inflight?.catch(() => undefined); // its failure is its own waiters'
      // setImmediate: let transactions already queued commit first and share this fsync.
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.nextBarrier = null; // committers from here on need the next barrier
      if (this.unsynced === 0 || this.closed) return;
      // A commit that got in before an earlier barrier failed follows its frames: no later
      // fsync can make it durable (syncFailure), so it fails as that barrier's did.
      if (this.syncFailure) throw syncFailedError(this.syncFailure);
      const covered = this.unsynced;
      this.unsynced = 0;
      const fd = this.openWal();
      try {
        if (covered === 1 && this.openTransactions <= 1) {
          // A lone commit and no other transaction open (plain reads are not counted): most
          // likely nothing for the event loop to get on with, and the hand-off to the pool and
          // back costs 50–100 µs here. With another transaction open (a second client, even at
          // one worker and one producer) the loop is better off serving it while the disk
          // works: +12 % cycles/s at c=1 and c=8.
          fdatasyncSync(fd);
        } else {
          this.inflight = new Promise<void>((resolve, reject) => fdatasync(fd, (err) => (err ? reject(err) : resolve())));
          try {
            await this.inflight;
          } finally {
            this.inflight = null;
          }
        }
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        // Told as a disk fault (store-fault.ts: a 503) whatever the call said.
        this.syncFailure ??= { code: isDiskFaultCode(code) ? code : 'EIO', message: (err as Error).message, at: Date.now() };
        throw err;
      }
      this.fsyncs++;
      this.observe(() => this.observer?.fsync(covered));
    })();
    return this.nextBarrier;
  }

  /**
   * The WAL's descriptor, opened once: SQLite removes or replaces the WAL file only when the
   * last connection to the database closes, and ours stays open until `close`.
   */
  private openWal(): number {
    this.walFd ??= openSync(`${this.raw.name}-wal`, 'r');
    return this.walFd;
  }

  /** A non-durable commit reaches the disk within 100 ms even if nothing else commits. */
  private syncSoon(): void {
    if (this.lazyTimer) return;
    this.lazyTimer = setTimeout(() => {
      this.lazyTimer = null;
      void this.sync().catch(() => undefined);
    }, 100);
    this.lazyTimer.unref();
  }

  /**
   * Refuses transactions not yet begun, lets those already queued finish, makes every commit
   * durable, then closes. (It once marked itself closed before the queue had drained, and a
   * commit in that window was acknowledged with no fsync.)
   */
  close(): Promise<void> {
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    if (this.lazyTimer) clearTimeout(this.lazyTimer);
    this.lazyTimer = null;
    await this.mutex.run(async () => undefined); // the transactions queued before it
    await this.sync().catch(() => undefined); // a failed sync failed its own committers already
    this.closed = true;
    if (this.walFd !== null) closeSync(this.walFd);
    this.walFd = null;
    await this.checkpointer?.close(); // its connection first: the last one to close removes the WAL
    await this.mutex.run(() => {
      this.endSharedRead();
      this.raw.close();
    });
  }
}

/**
 * The store records migrations this build does not know: a newer svcd migrated it, and an
 * older one would read and write it by rules that no longer hold (a downgrade).
 */
export class SchemaTooNewError extends Error {
  readonly code = 'SVC_SCHEMA_TOO_NEW';
  constructor(
    readonly unknownMigrations: string[],
    path?: string,
  ) {
    super(
      `cannot open the store${path ? ` ${path}` : ''}: a newer svcd migrated it (migration${unknownMigrations.length === 1 ? '' : 's'} ` +
        `${unknownMigrations.join(', ')} unknown to this build); run that svcd, or restore a backup taken before the upgrade`,
    );
    this.name = 'SchemaTooNewError';
  }
}

/** The domain a migration id names: `runs` of `runs-005-approval-indexes`. */
function migrationDomain(id: string): string {
  return id.split('-', 1)[0]!;
}

/**
 * Applies every migration not yet recorded, each in its own transaction, in list order. A
 * store that records a migration not in `migrations` is refused (SchemaTooNewError) before
 * anything is written.
 */
export async function migrate(db: SqlDb, migrations: readonly Migration[]): Promise<string[]> {
  // Several svcd on one PostgreSQL database: one migrates at a time, the others then find its work.
  return db.migrationLock ? db.migrationLock(() => migrateNow(db, migrations)) : migrateNow(db, migrations);
}

async function migrateNow(db: SqlDb, migrations: readonly Migration[]): Promise<string[]> {
  // The shipped SQLite text is what SQLite runs; PostgreSQL gets its translation (pg-dialect.ts).
  const ddl = db.dialect === 'postgres' ? postgresDdl : (sql: string) => sql;
  await db.exec(ddl('CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL)'));
  const applied = new Set((await db.all<{ id: string }>('SELECT id FROM schema_migrations')).map((r) => r.id));
  // Only a domain of this set counts (`runs-…`, `gateway-…`): one store may hold several sets
  // (a kernel and a gateway sharing one database), each of which knows only its own.
  const known = new Set(migrations.map((m) => m.id));
  const domains = new Set(migrations.map((m) => migrationDomain(m.id)));
  const unknown = [...applied].filter((id) => !known.has(id) && domains.has(migrationDomain(id))).sort();
  if (unknown.length > 0) throw new SchemaTooNewError(unknown, db instanceof SqliteDb ? db.raw.name : (db as { location?: string }).location);
  const ran: string[] = [];
  for (const m of migrations) {
    if (applied.has(m.id)) continue;
    await db.tx(async (t) => {
      await t.exec(ddl(m.sql));
      await t.run('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)', [m.id, new Date().toISOString()]);
    });
    ran.push(m.id);
  }
  return ran;
}

/**
 * What `/v1/health` (the kernel's and the gateway's) says of a store while it refuses writes:
 * `{error, message, since}`, or null while writes work (or for a store that keeps no such record).
 */
export function storeHealthFault(db: SqlDb): { error: string; message: string; since: string } | null {
  const fault = db instanceof SqliteDb || isPgStoreLike(db) ? db.writeFault() : null;
  return fault && { error: fault.code, message: fault.message, since: fault.at };
}

/** The PostgreSQL store (pg-db.ts) keeps a write-fault record too; not imported here, to keep pg out of the SQLite path. */
function isPgStoreLike(db: SqlDb): db is SqlDb & { writeFault(): { code: string; message: string; at: string } | null } {
  return db.dialect === 'postgres' && typeof (db as { writeFault?: unknown }).writeFault === 'function';
}

/** A transaction asked of a store that is closing (a request svcd's drain cut off): 503. */
export class StoreClosedError extends Error {
  readonly code = 'SVC_STORE_CLOSED';
  constructor() {
    super('the store is closing (svcd is stopping); try again once it is back');
    this.name = 'StoreClosedError';
  }
}

function syncFailedError(f: { code: string; message: string }): Error {
  return Object.assign(new Error(`the store takes no writes since a sync of its write-ahead log to disk failed (${f.message}); restart svcd, whose recovery makes the disk authoritative`), { code: f.code });
}
