/**
 * The PostgreSQL store (decisions §11: "a PostgreSQL store can serve several svcd instances"):
 * the SqlDb seam on a node-postgres pool. Each transaction runs SERIALIZABLE on one pooled
 * client, and is run again from the start, a bounded number of times, when PostgreSQL
 * refuses it for a serialization failure or a deadlock (40001, 40P01): SQLite's single writer
 * never sees those, so callers written for it retry nothing themselves. That makes every `fn`
 * handed to `tx` run possibly more than once: the kernel's (run-engine.ts mutate/create,
 * remit-service derive/bind, bundle and policy posts, adoptLegacyBindings) keep their
 * in-memory effects (metrics, wake-ups, caches, log lines) until after the commit, or build
 * them afresh per attempt (RunWriter copies the caller's model before it folds an event in),
 * so a second attempt starts from nothing the first one left behind (design.md "PostgreSQL store").
 *
 * Plain `get`/`all` run on any pooled client in autocommit (each statement its own snapshot:
 * it never sees another transaction's uncommitted writes); `run` and `exec` run in a
 * transaction of their own, as SqliteDb's do.
 */
import { userInfo } from 'node:os';
import pg from 'pg';
import { AsyncMutex } from './async-mutex.js';
import { numberedPlaceholders, redactedLocation } from './pg-dialect.js';
import { StoreClosedError } from './sqlite-db.js';
import { storeFault } from './store-fault.js';
import type { RunResult, SqlDb, SqlValue, TxOptions } from './sql-db.js';

/** Attempts of one transaction before a serialization failure or deadlock is the caller's. */
export const PG_TX_ATTEMPTS = 8;

/**
 * SQLSTATEs after which the whole transaction may simply run again: serialization failure,
 * deadlock, and a unique violation, which PostgreSQL reports for two SERIALIZABLE
 * transactions inserting the same key where a serialization failure is meant (its manual,
 * "Serializable Isolation Level"); svc's own inserts of keys that may exist say ON CONFLICT,
 * so a real duplicate (a bug) still fails, after the retries.
 */
const RETRYABLE = new Set(['40001', '40P01', '23505']);

/** How long a fault is reported by writeFault without a commit to clear it (as SqliteDb's). */
const WRITE_FAULT_MEMORY_MS = 60_000;

/** The translated text of each statement (svc's statements are a few hundred texts). */
const TRANSLATION_LIMIT = 1000;
const translations = new Map<string, string>();
function translated(sql: string): string {
  let t = translations.get(sql);
  if (t === undefined) {
    t = numberedPlaceholders(sql);
    if (translations.size >= TRANSLATION_LIMIT) translations.delete(translations.keys().next().value!);
    translations.set(sql, t);
  }
  return t;
}

/**
 * BIGINT (int8) and NUMERIC (what SUM of a BIGINT gives) as JS numbers, as better-sqlite3
 * returns INTEGER: the seam's callers add and compare them. Exact to 2^53, as SQLite's are
 * through better-sqlite3. Set on this pool's clients only, never on pg's global `types`.
 */
const NUMBER_TYPES = new Set([20, 1700]);
const POOL_TYPES = {
  getTypeParser(oid: number, format?: string) {
    if (NUMBER_TYPES.has(oid) && (format ?? 'text') === 'text') return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export interface PgDbOptions {
  /** postgres://… (or a libpq keyword string); the password, if any, stays in it. */
  connectionString: string;
  /** Schema to put first on the search path (a test's own, or one database for several svc). */
  schema?: string;
  /** Pool size. (Default: 10) */
  max?: number;
}

/** SQLSTATE classes and client codes of a PostgreSQL that is failing or out of reach, not of a bug. */
function pgFaultCode(err: unknown): string | null {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string') return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(String((err as Error)?.message)) ? 'PG_CONNECTION' : null;
  // 08 connection, 53 resources (disk full, out of memory, too many connections), 57P0x
  // shutdown, 58 system I/O, XX001/XX002 corruption, 25006 a read-only standby.
  if (/^(08|53|58)/.test(code) || /^57P0[1-4]$/.test(code) || code === 'XX001' || code === 'XX002' || code === '25006' || RETRYABLE.has(code)) return `PG_${code}`;
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|ENOENT)$/.test(code)) return `PG_${code}`;
  return null;
}

/**
 * A store fault told in the terms store-fault.ts knows (`PG_…`: a 503, as SQLite's disk and
 * lock codes are); anything else (a constraint, a syntax error: a bug) is thrown as it came.
 */
function mapped(err: unknown): unknown {
  const code = pgFaultCode(err);
  if (code === null) return err;
  const message = `PostgreSQL: ${(err as Error)?.message ?? String(err)}`;
  return Object.assign(new Error(message, { cause: err }), { code });
}

class PgHandle implements SqlDb {
  readonly dialect = 'postgres' as const;
  constructor(private readonly client: pg.PoolClient) {}

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return (await this.client.query(translated(sql), params as unknown[])).rows[0] as T | undefined;
  }
  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return (await this.client.query(translated(sql), params as unknown[])).rows as T[];
  }
  async run(sql: string, params: readonly SqlValue[] = []): Promise<RunResult> {
    return { changes: (await this.client.query(translated(sql), params as unknown[])).rowCount ?? 0 };
  }
  async exec(sql: string): Promise<void> {
    await this.client.query(sql); // the simple protocol: several statements, no parameters
  }
  async tx<T>(fn: (db: SqlDb) => Promise<T>, _opts?: TxOptions): Promise<T> {
    return fn(this); // already inside the transaction
  }
  async close(): Promise<void> {
    /* the owner closes */
  }
}

/** PostgreSQL implementation of SqlDb. */
export class PgDb implements SqlDb {
  readonly dialect = 'postgres' as const;
  readonly pool: pg.Pool;
  /** Where the store is, without a password (for messages). */
  readonly location: string;
  private closing: Promise<void> | null = null;
  private readonly mutex = new AsyncMutex();
  private writeFaultValue: { code: string; message: string; at: number; mono: number } | null = null;
  /** Transactions run again after a serialization failure or deadlock (tests, metrics). */
  retries = 0;

  constructor(opts: PgDbOptions) {
    this.location = redactedLocation(opts.connectionString);
    this.pool = new pg.Pool({
      ...pgConnection(opts.connectionString),
      max: opts.max ?? 10,
      types: POOL_TYPES,
      ...(opts.schema ? { options: `-c search_path=${quoteIdent(opts.schema)}` } : {}),
    });
    // An idle client whose server went away: the next checkout makes a new one. Without a
    // listener node-postgres would throw it at the process.
    this.pool.on('error', () => undefined);
  }

  get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return this.plain(async (c) => (await c.query(translated(sql), params as unknown[])).rows[0] as T | undefined);
  }
  all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return this.plain(async (c) => (await c.query(translated(sql), params as unknown[])).rows as T[]);
  }
  run(sql: string, params?: readonly SqlValue[]): Promise<RunResult> {
    return this.tx((h) => h.run(sql, params));
  }
  exec(sql: string): Promise<void> {
    return this.tx((h) => h.exec(sql));
  }

  private async plain<T>(fn: (c: pg.Pool) => Promise<T>): Promise<T> {
    if (this.closing) throw new StoreClosedError();
    try {
      return await fn(this.pool);
    } catch (err) {
      throw mapped(err);
    }
  }

  /**
   * One process's transactions run one at a time, as SqliteDb's do: under SERIALIZABLE, the
   * kernel's short transactions on small tables (a page, or a whole relation read by a
   * sequential scan, is what PostgreSQL's predicate locks then cover) failed each other by the
   * dozen with four workers on one svcd, some past every retry. Transactions of other svcd
   * instances on the same database are what SERIALIZABLE and the retries are for.
   */
  tx<T>(fn: (db: SqlDb) => Promise<T>, opts: TxOptions = {}): Promise<T> {
    if (this.closing) return Promise.reject(new StoreClosedError());
    return this.mutex.run(() => this.attempts(fn, opts));
  }

  private async attempts<T>(fn: (db: SqlDb) => Promise<T>, opts: TxOptions): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.closing) throw new StoreClosedError();
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw this.noteFault(mapped(err));
      }
      let broken: Error | undefined;
      try {
        await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
        if (opts.durable === false) await client.query('SET LOCAL synchronous_commit = off');
        const result = await fn(new PgHandle(client));
        // A transaction a failed statement aborted (an error `fn` caught and went on from)
        // "commits" as a ROLLBACK without an error: nothing was written, so it must fail.
        const end = await client.query('COMMIT');
        if (end.command !== 'COMMIT') throw Object.assign(new Error('the transaction was aborted by an earlier failed statement and rolled back'), { code: '25P02' });
        this.writeFaultValue = null;
        try {
          opts.onCommitted?.();
        } catch {
          /* committed is committed: a failing hook must not report the transaction as failed */
        }
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackErr) {
          broken = rollbackErr as Error; // the connection is gone: the pool must not hand it out again
        }
        const code = (err as { code?: unknown })?.code;
        if (typeof code === 'string' && RETRYABLE.has(code) && attempt < PG_TX_ATTEMPTS) {
          this.retries++;
          // A little jitter so two retrying transactions do not collide again in step.
          await new Promise((r) => setTimeout(r, Math.random() * 2 ** attempt));
          continue;
        }
        throw this.noteFault(mapped(err));
      } finally {
        client.release(broken);
      }
    }
  }

  /** Remembers a non-transient fault for writeFault; returns the error. */
  private noteFault(err: unknown): unknown {
    const code = (err as { code?: unknown })?.code;
    if (typeof code === 'string' && code.startsWith('PG_') && !isTransientPgFault(code)) {
      this.writeFaultValue = { code, message: (err as Error).message, at: Date.now(), mono: performance.now() };
    }
    return err;
  }

  /** As SqliteDb.writeFault: the fault a write failed with in the last minute, until a commit. */
  writeFault(): { code: string; message: string; at: string } | null {
    const f = this.writeFaultValue;
    if (f === null || performance.now() - f.mono > WRITE_FAULT_MEMORY_MS) return null;
    return { code: f.code, message: f.message, at: new Date(f.at).toISOString() };
  }

  /**
   * Runs `fn` while holding a session advisory lock that every svcd on this database takes
   * for the same purpose: migrations, which two instances starting at once would otherwise
   * both try (CREATE TABLE is not idempotent, and a SERIALIZABLE snapshot taken before the
   * wait would not see the other's work).
   */
  async migrationLock<T>(fn: () => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch((err: unknown) => {
      throw mapped(err);
    });
    try {
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        return await fn();
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
      }
    } finally {
      client.release();
    }
  }

  /** Refuses transactions not yet begun, lets those queued finish, then ends the pool. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.mutex.run(async () => undefined);
      await this.pool.end();
    })();
    return this.closing;
  }
}

/** The advisory lock key of svc's migrations (any fixed 64-bit number; "svc" in ASCII). */
const MIGRATION_LOCK_KEY = 0x737663;

/** Serialization failures, deadlocks, too many connections, a server starting or stopping: worth a retry later. */
export function isTransientPgFault(code: string): boolean {
  return storeFault({ code })?.transient === true;
}

/**
 * A connection string as node-postgres takes it, with libpq's default user where it names
 * none: the user running svcd. node-postgres reads only $USER for it, which a service
 * manager or a container may leave unset ("no PostgreSQL user name specified").
 */
export function pgConnection(connectionString: string): { connectionString: string } {
  if (process.env.PGUSER || process.env.USER) return { connectionString };
  // Into the string itself: node-postgres lets what it parses from the string override `user`.
  try {
    const u = new URL(connectionString);
    if (u.username === '') u.username = encodeURIComponent(userInfo().username);
    return { connectionString: u.toString() };
  } catch {
    return { connectionString: /\buser\s*=/.test(connectionString) ? connectionString : `${connectionString} user=${userInfo().username}` };
  }
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
