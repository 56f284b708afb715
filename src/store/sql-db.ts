/**
 * The store seam. Domain modules (remits, bundles, policies, runs) speak portable SQL through
 * this async interface: `?` placeholders, TEXT for JSON and ISO times, INTEGER/REAL numbers,
 * `INSERT … ON CONFLICT` and `RETURNING` (both SQLite ≥ 3.35 and PostgreSQL have them).
 * The embedded implementation is SQLite (sqlite-db.ts); PostgreSQL (pg-db.ts) lets several
 * svcd instances share one database (decisions §11). test/store/sql-db.contract.ts is the
 * suite every implementation must pass.
 */
export type SqlValue = string | number | bigint | null | Buffer;

export interface RunResult {
  /** Rows changed by an INSERT/UPDATE/DELETE. */
  changes: number;
}

/** How a transaction's commit is made durable. */
export interface TxOptions {
  /**
   * False: the commit survives a crash of the process at once, and a power loss once the
   * next durable commit or the periodic sync (within 100 ms) has run — PostgreSQL's
   * `synchronous_commit = off`. For writes whose loss on power failure is harmless (audit
   * notes, idempotency entries of read-only tools). (Default: true)
   */
  durable?: boolean;
  /**
   * Called once the transaction has committed, before its commit is on disk. For wake-ups
   * whose effect cannot be acknowledged before a later durable commit covers this one (a
   * woken long-poll must itself commit a lease first). Never for acknowledgements.
   */
  onCommitted?: () => void;
}

export interface SqlDb {
  readonly dialect: 'sqlite' | 'postgres';
  /** First row, or undefined. */
  get<T = Record<string, unknown>>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  all<T = Record<string, unknown>>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  run(sql: string, params?: readonly SqlValue[]): Promise<RunResult>;
  /** Several statements, no parameters (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * Runs `fn` in one serializable transaction: everything it writes commits together or not
   * at all. Calls on the handle passed to `fn` are inside the transaction; a nested `tx` on
   * that handle joins it.
   */
  tx<T>(fn: (db: SqlDb) => Promise<T>, opts?: TxOptions): Promise<T>;
  close(): Promise<void>;
  /**
   * Runs `fn` (the migrations) while no other process sharing this store migrates it: a store
   * several svcd share has one (PostgreSQL's advisory lock); SQLite's single svcd needs none.
   */
  migrationLock?<T>(fn: () => Promise<T>): Promise<T>;
}

/** A schema step. `id` is unique across the whole store and never edited once shipped. */
export interface Migration {
  id: string;
  sql: string;
}
