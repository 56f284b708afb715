/**
 * The embedded store: one better-sqlite3 connection in WAL mode. better-sqlite3 is
 * synchronous, so a transaction spanning `await`s would interleave with other callers on
 * the same connection; an async mutex therefore serializes transactions (and plain calls
 * wait for the running transaction), which matches SQLite's single-writer model anyway.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { AsyncMutex } from './async-mutex.js';
import type { Migration, RunResult, SqlDb, SqlValue } from './sql-db.js';

export type SqliteSynchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

export interface SqliteDbOptions {
  /** File path, or ":memory:". */
  path: string;
  /** PRAGMA synchronous. (Default: FULL, so a committed step survives power loss.) */
  synchronous?: SqliteSynchronous;
  /** Milliseconds to wait on a lock held by another process. (Default: 5000) */
  busyTimeoutMs?: number;
}

type Db = Database.Database;

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
  async tx<T>(fn: (db: SqlDb) => Promise<T>): Promise<T> {
    return fn(this); // already inside the transaction
  }
  async close(): Promise<void> {
    /* the owner closes */
  }
}

/** SQLite implementation of SqlDb. */
export class SqliteDb implements SqlDb {
  readonly dialect = 'sqlite' as const;
  readonly raw: Db;
  private readonly mutex = new AsyncMutex();
  private readonly handle: SqliteHandle;
  private closed = false;

  constructor(opts: SqliteDbOptions) {
    if (opts.path !== ':memory:') mkdirSync(dirname(opts.path), { recursive: true });
    this.raw = new Database(opts.path);
    this.raw.pragma('journal_mode = WAL');
    this.raw.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
    this.raw.pragma('foreign_keys = ON');
    this.raw.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    this.handle = new SqliteHandle(this.raw, new Map());
  }

  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.mutex.run(() => this.handle.get<T>(sql, params));
  }
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.mutex.run(() => this.handle.all<T>(sql, params));
  }
  run(sql: string, params?: readonly SqlValue[]): Promise<RunResult> {
    return this.mutex.run(() => this.handle.run(sql, params));
  }
  exec(sql: string): Promise<void> {
    return this.mutex.run(() => this.handle.exec(sql));
  }

  tx<T>(fn: (db: SqlDb) => Promise<T>): Promise<T> {
    return this.mutex.run(async () => {
      this.raw.exec('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.handle);
        this.raw.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.raw.inTransaction) this.raw.exec('ROLLBACK');
        throw err;
      }
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.mutex.run(() => this.raw.close());
  }
}

/** Applies every migration not yet recorded, each in its own transaction, in list order. */
export async function migrate(db: SqlDb, migrations: readonly Migration[]): Promise<string[]> {
  await db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL)');
  const applied = new Set((await db.all<{ id: string }>('SELECT id FROM schema_migrations')).map((r) => r.id));
  const ran: string[] = [];
  for (const m of migrations) {
    if (applied.has(m.id)) continue;
    await db.tx(async (t) => {
      await t.exec(m.sql);
      await t.run('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)', [m.id, new Date().toISOString()]);
    });
    ran.push(m.id);
  }
  return ran;
}
