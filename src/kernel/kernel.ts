/**
 * The kernel's composition root: the store, the keys, the clock, metrics and the domain
 * services, built once per svcd process (or per test). HTTP lives in daemon/; this file
 * imports nothing of fastify.
 */
import { join } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { KeyRing } from '../keys/keyring.js';
import { loadPublishers, type PublisherKeys } from '../keys/publishers.js';
import { RemitService } from '../remit/remit-service.js';
import { BundleService } from '../bundle/bundle-service.js';
import { PolicyService } from '../policy/policy-service.js';
import { RunEngine } from './run-engine.js';
import { createLogger, type Logger } from '../log/logger.js';
import { adoptLegacyBindings, legacyBindingConflicts } from '../remit/schema.js';
import { KernelMetrics } from '../metrics/kernel-metrics.js';
import { lockServingDir } from '../store/backup.js';
import { KERNEL_MIGRATIONS } from '../store/migrations.js';
import type { SqlDb } from '../store/sql-db.js';
import type { Spend, ToolCatalog } from '../types.js';
import { migrate, SqliteDb, type SqliteSynchronous } from '../store/sqlite-db.js';

/**
 * The page size a new kernel store is created with: SQLite's own 4 KiB, pinned. Smaller pages
 * flush fewer bytes per commit, which paid at one worker in an hour of slow fsyncs (+35 % with
 * 1 KiB, the fourteenth session) but cost CPU (more WAL frames, deeper trees) whenever the disk was
 * quick: 1 KiB 6–16 % and 2 KiB up to 8 % slower that afternoon, bigger runs the most
 * (bench/README.md, `npm run bench -- pages`). A store keeps the page size it was created with.
 */
export const KERNEL_PAGE_SIZE = 4096;

export interface KernelOptions {
  /** Directory for the SQLite store and the control-plane key. (Default: ./svc-data) */
  dataDir: string;
  /** A store to use instead of `<dataDir>/kernel.db` (a test's own); the caller closes it. */
  db?: SqlDb;
  /**
   * A PostgreSQL connection string (postgres://…) for the store instead of `<dataDir>/kernel.db`
   * (decisions §11; design.md "PostgreSQL store"). The data directory still holds the key and
   * the lock. (Default: SQLite in the data directory)
   */
  store?: string;
  /** With `store`: the schema to use (a test's own). (Default: the connection's search_path) */
  storeSchema?: string;
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
  /**
   * Real milliseconds between the background sweeps for expired leases; 0 turns the timer off,
   * leaving expiry to lease requests and to access (tests replaying a seed use it). (Default: 500)
   */
  sweepIntervalMs?: number;
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
  /** performance.now() at start: uptime is a duration, on the monotonic clock. */
  private readonly startedMono = performance.now();
  /**
   * Whole seconds since the kernel started (GET /v1/health `uptime_s`). Monotonic: from the
   * wall clock, a clock stepped back an hour read -3537.
   */
  uptimeSeconds(): number {
    return Math.floor((performance.now() - this.startedMono) / 1000);
  }

  /** Releases the data directory's lock (set by `open`). */
  private unlock: () => void = () => {};
  /** Publisher keys trusted for bundle signatures (decisions §2). */
  readonly publishers: PublisherKeys;
  /** Remits: mint, derive, get, bind to a run (interface 4.1, 5.4). */
  readonly remits: RemitService;
  /** Signed bundles: post, list, get (interface 4.1 rule 1, decisions 4). */
  readonly bundles: BundleService;
  /** Policies: versions, pinning and the decision engine (decisions 5). */
  readonly policies: PolicyService;
  /** Runs, leases, events, actions, approvals, replay (interface 2.4–2.8; decisions 6–8). */
  readonly runs: RunEngine;
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
    this.publishers = loadPublishers(options.publishers ?? []);
    this.remits = new RemitService(this);
    this.bundles = new BundleService({ db, clock, publishers: () => this.publishers });
    this.policies = new PolicyService({ db, clock });
    this.runs = new RunEngine(this, { sweepIntervalMs: options.sweepIntervalMs });
  }

  static async open(options: KernelOptions): Promise<Kernel> {
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? createLogger();
    loadPublishers(options.publishers ?? []); // a bad publisher key refuses before the store opens
    const unlock = lockServingDir(options.dataDir, 'kernel data directory', logger);
    const metrics = new KernelMetrics();
    let kernel: Kernel;
    try {
      kernel = await Kernel.openLocked(options, clock, logger, metrics);
    } catch (err) {
      unlock();
      throw err;
    }
    kernel.unlock = unlock;
    return kernel;
  }

  private static async openLocked(options: KernelOptions, clock: Clock, logger: Logger, metrics: KernelMetrics): Promise<Kernel> {
    // The key first: a key file svcd cannot use refuses the start before the store is made.
    const keys = KeyRing.load(options.dataDir, options.signingKey ?? process.env.SVC_SIGNING_KEY);
    const db =
      options.db ??
      (options.store !== undefined
        ? new (await import('../store/pg-db.js')).PgDb({ connectionString: options.store, schema: options.storeSchema })
        : new SqliteDb({ path: join(options.dataDir, 'kernel.db'), synchronous: options.synchronous, observer: metrics.groupCommit, pageSize: KERNEL_PAGE_SIZE }));
    try {
      await migrate(db, KERNEL_MIGRATIONS);
      const adopted = await adoptLegacyBindings(db);
      if (adopted > 0) logger.warn('remit bindings adopted from an older svcd', { remits: adopted });
      for (const c of await legacyBindingConflicts(db)) logger.warn('an older svcd bound a remit already bound to another run; check that run by hand', c);
      const kernel = new Kernel(db, keys, clock, logger, metrics, options);
      await kernel.runs.start();
      return kernel;
    } catch (err) {
      // A store this opened is closed again (its WAL checkpointed, its files let go); one the
      // caller handed in stays the caller's.
      if (!options.db) await db.close().catch(() => {});
      throw err;
    }
  }

  /** Usage of a run so far, in the caller's transaction (RemitServiceDeps.spentByRun). */
  async spentByRun(db: SqlDb, runId: string): Promise<Spend> {
    const row = await db.get<{ model: string }>('SELECT model FROM runs WHERE run_id = ?', [runId]);
    if (!row) return { tokens: 0, usd: 0 };
    const usage = (JSON.parse(row.model) as { usage?: Spend }).usage;
    return { tokens: Number(usage?.tokens ?? 0), usd: Number(usage?.usd ?? 0) };
  }

  /** Counts for GET /v1/health. */
  async runCounts(): Promise<{ running: number; parked: number }> {
    return this.runs.counts();
  }

  async close(): Promise<void> {
    await this.runs.stop();
    await this.db.close();
    this.unlock();
  }
}
