/**
 * The kernel's composition root: the store, the keys, the clock, metrics and the domain
 * services, built once per svcd process (or per test). HTTP lives in daemon/; this file
 * imports nothing of fastify.
 */
import { join } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { KeyRing } from '../keys/keyring.js';
import { createLogger, type Logger } from '../log/logger.js';
import { KernelMetrics } from '../metrics/kernel-metrics.js';
import { KERNEL_MIGRATIONS } from '../store/migrations.js';
import type { SqlDb } from '../store/sql-db.js';
import type { ToolCatalog } from '../types.js';
import { migrate, SqliteDb, type SqliteSynchronous } from '../store/sqlite-db.js';

export interface KernelOptions {
  /** Directory for the SQLite store and the control-plane key. (Default: ./svc-data) */
  dataDir: string;
  /** A store to use instead of `<dataDir>/kernel.db` (PostgreSQL, or a test's own). */
  db?: SqlDb;
  /** SQLite PRAGMA synchronous. (Default: FULL) */
  synchronous?: SqliteSynchronous;
  clock?: Clock;
  logger?: Logger;
  /** Base64url seed of the control-plane key. (Default: SVC_SIGNING_KEY, else the key file) */
  signingKey?: string;
  /** Publisher keys trusted for bundles, as `KEY_ID:PUBLIC_KEY`. */
  publishers?: string[];
  /** Allowed clock skew for remit nbf/exp, seconds. (Default: SVC_CLOCK_SKEW_SECONDS or 0) */
  clockSkewSeconds?: number;
}

export interface KernelDeps {
  db: SqlDb;
  keys: KeyRing;
  clock: Clock;
  logger: Logger;
  metrics: KernelMetrics;
  options: KernelOptions;
}

export class Kernel implements KernelDeps {
  readonly startedAt: number;
  /**
   * Tool descriptors from the gateway (in-process when svcd runs both, HTTP otherwise).
   * Null until a gateway is attached: then every tool is treated as a write to a system of
   * record (decisions 5.2).
   */
  toolCatalog: ToolCatalog | null = null;

  private constructor(
    readonly db: SqlDb,
    readonly keys: KeyRing,
    readonly clock: Clock,
    readonly logger: Logger,
    readonly metrics: KernelMetrics,
    readonly options: KernelOptions,
  ) {
    this.startedAt = clock.now();
  }

  static async open(options: KernelOptions): Promise<Kernel> {
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? createLogger();
    const db = options.db ?? new SqliteDb({ path: join(options.dataDir, 'kernel.db'), synchronous: options.synchronous });
    await migrate(db, KERNEL_MIGRATIONS);
    const keys = KeyRing.load(options.dataDir, options.signingKey ?? process.env.SVC_SIGNING_KEY);
    return new Kernel(db, keys, clock, logger, new KernelMetrics(), options);
  }

  /** Counts for GET /v1/health. */
  async runCounts(): Promise<{ running: number; parked: number }> {
    return { running: 0, parked: 0 }; // replaced by the run engine (issue 4)
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
