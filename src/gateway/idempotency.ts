/**
 * The idempotency store (interface 2.10 and 4.2 call rules, decisions §9), a SQLite file in
 * the gateway's data dir. An entry is keyed by (tool, idempotency_key) and holds the hash of
 * the arguments. The key is claimed (`pending`) before the upstream call; successes and
 * deterministic failures are stored (`done`); upstream errors delete the claim so a retry can
 * run. A read's claim is held in memory, not in the file (a read that runs twice changes
 * nothing, so its claim never needed the disk, and one process owns the store): a read costs
 * one transaction, storing its result, instead of two. A write still `pending` when the
 * gateway stopped is marked `unknown` at the next start: its outcome cannot be known, so a
 * repeat is refused rather than executed twice. Entries
 * expire 30 days after they were stored: a claim treats an expired entry as absent at once,
 * and the rows are deleted at start and every hour after (`PURGE_EVERY_MS`), `PURGE_BATCH` rows
 * per statement: better-sqlite3 runs on the event loop, and one DELETE of every expired row
 * (100,000 of them after a busy day a month ago) held it, and the store, for over half a second.
 *
 * The same file keeps the canaries' quarantine records, so a quarantine survives a restart,
 * and the events waiting for the kernel (event-outbox.ts).
 * One gateway process owns a data dir: startup recovery assumes no other live claimant.
 */
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Migration, SqlDb } from '../store/sql-db.js';
import { migrate, SqliteDb } from '../store/sqlite-db.js';
import { OUTBOX_MIGRATION } from './event-outbox.js';

/** Interface 8: idempotency entry lifetime. */
export const IDEMPOTENCY_TTL_MS = 30 * 24 * 3600 * 1000;

/** How often a running gateway deletes expired entries. */
export const PURGE_EVERY_MS = 3600 * 1000;

/** Expired entries one purge statement deletes at most (a few ms); calls run between batches. */
export const PURGE_BATCH = 250;

/** The purge's statement: one batch of expired rows, found through the expiry index. */
export const PURGE_SQL = 'DELETE FROM gateway_idempotency WHERE (tool, idem_key) IN (SELECT tool, idem_key FROM gateway_idempotency WHERE expires_at <= ? LIMIT ?)';

export const GATEWAY_MIGRATIONS: Migration[] = [
  {
    id: 'gateway-001-idempotency',
    sql: `
      CREATE TABLE gateway_idempotency (
        tool TEXT NOT NULL,
        idem_key TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        state TEXT NOT NULL,
        writes INTEGER NOT NULL,
        status INTEGER,
        body TEXT,
        claimed_at TEXT NOT NULL,
        stored_at TEXT,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (tool, idem_key)
      );
      CREATE INDEX gateway_idempotency_expiry ON gateway_idempotency (expires_at);
      CREATE TABLE gateway_quarantine (
        connector TEXT PRIMARY KEY,
        quarantined_at TEXT NOT NULL,
        repair_file TEXT
      );
    `,
  },
  OUTBOX_MIGRATION,
  {
    // Startup recovery looks for pending claims only; without this it scanned every entry
    // (a million: ~65 ms per statement, two of them, before the gateway listens). Pending rows are few, so
    // the partial index is small, and only a write's claim and its end touch it.
    id: 'gateway-003-idempotency-pending',
    sql: `CREATE INDEX gateway_idempotency_pending ON gateway_idempotency (writes) WHERE state = 'pending';`,
  },
];

export type ClaimResult =
  | { kind: 'claimed' }
  | { kind: 'replay'; status: number; body: unknown }
  | { kind: 'conflict' }
  | { kind: 'in_flight' }
  | { kind: 'unknown' };

interface Row {
  args_hash: string;
  state: 'pending' | 'done' | 'unknown';
  status: number | null;
  body: string | null;
  expires_at: number;
}

/**
 * A read's claim, keyed by `readKey(tool, key)`: first while it looks for a stored entry
 * (`lookup`), then, finding none, while its call runs (`claimed`).
 */
interface ReadClaim {
  argsHash: string;
  claimedAt: string;
  lookup: Promise<Row | undefined>;
  claimed: boolean;
}

const readKey = (tool: string, key: string): string => `${tool}\u0000${key}`;

export class IdempotencyStore {
  private purgeTimer: NodeJS.Timeout | null = null;
  /** Reads in flight (see the module comment): a claim and its release cost no transaction. */
  private readonly readClaims = new Map<string, ReadClaim>();
  /**
   * Writes this process claimed whose call has not ended (`readKey` ids). A `pending` row not
   * among them is a claim whose call ended without the store taking its end (the disk full when
   * its result was to be stored): nothing runs under it any more, so a repeat is answered
   * `unknown` at once — before, it was `in_flight` with a Retry-After until a restart.
   */
  private readonly liveWrites = new Set<string>();

  private constructor(
    readonly db: SqlDb,
    private readonly clock: Clock,
  ) {}

  /**
   * Opens `<dataDir>/gateway.db`, recovers claims left pending by the previous process and
   * deletes expired entries now and every `purgeEveryMs` (0: only now).
   */
  static async open(dataDir: string, clock: Clock, db?: SqlDb, purgeEveryMs = PURGE_EVERY_MS): Promise<IdempotencyStore> {
    const store = new IdempotencyStore(db ?? new SqliteDb({ path: join(dataDir, 'gateway.db'), synchronous: 'FULL' }), clock);
    await migrate(store.db, GATEWAY_MIGRATIONS);
    await store.recover();
    if (purgeEveryMs > 0) {
      // A purge that fails is tried again at the next tick; claims already ignore expired rows.
      store.purgeTimer = setInterval(() => void store.purgeExpired().catch(() => {}), purgeEveryMs);
      store.purgeTimer.unref();
    }
    return store;
  }

  /**
   * Pending writes become `unknown` (kept 30 days from now, like a stored result); pending
   * reads are dropped (a repeat may safely run).
   */
  private async recover(): Promise<void> {
    const now = this.clock.now();
    await this.db.tx(async (t) => {
      await t.run("UPDATE gateway_idempotency SET state = 'unknown', stored_at = ?, expires_at = ? WHERE state = 'pending' AND writes = 1", [
        new Date(now).toISOString(),
        now + IDEMPOTENCY_TTL_MS,
      ]);
      await t.run("DELETE FROM gateway_idempotency WHERE state = 'pending'");
    });
    // Nothing is served yet (svcd opens both halves before either listens): one statement,
    // the quickest way through a month of expired entries after a long stop.
    await this.purgeExpired(Infinity);
  }

  /**
   * Claims (tool, key) for a call with `argsHash`, or says why it cannot run. A write's claim
   * is on disk before the upstream call (group commit): after a power loss it is found
   * pending and becomes `unknown`, never a second execution. A read's claim is held in
   * memory: a read that runs twice changes nothing.
   */
  async claim(tool: string, key: string, argsHash: string, writes: boolean): Promise<ClaimResult> {
    if (!writes) return this.claimRead(tool, key, argsHash);
    const now = this.clock.now();
    let added = false;
    return this.db.tx(async (t) => {
      const row = await entryOf(t, tool, key);
      if (row && row.expires_at > now) return answerFor(row, argsHash, this.liveWrites.has(readKey(tool, key)));
      if (row) await t.run('DELETE FROM gateway_idempotency WHERE tool = ? AND idem_key = ?', [tool, key]);
      await t.run(
        "INSERT INTO gateway_idempotency (tool, idem_key, args_hash, state, writes, claimed_at, expires_at) VALUES (?, ?, ?, 'pending', 1, ?, ?)",
        [tool, key, argsHash, new Date(now).toISOString(), now + IDEMPOTENCY_TTL_MS],
      );
      // Live before the commit: a duplicate's claim may read the row while this one's fsync runs.
      this.liveWrites.add(readKey(tool, key));
      added = true;
      return { kind: 'claimed' } as const;
    }, { durable: true }).catch((err: unknown) => {
      if (added) this.liveWrites.delete(readKey(tool, key)); // nothing runs under a claim that failed
      throw err;
    });
  }

  private async claimRead(tool: string, key: string, argsHash: string): Promise<ClaimResult> {
    const id = readKey(tool, key);
    // A duplicate that comes while another claim of the key is still looking waits for that
    // lookup: a stored result replays to both; only a claim that found none makes it in flight.
    for (let held = this.readClaims.get(id); held; held = this.readClaims.get(id)) {
      if (held.claimed) return held.argsHash === argsHash ? { kind: 'in_flight' } : { kind: 'conflict' };
      await held.lookup.catch(() => undefined);
    }
    const claim: ReadClaim = {
      argsHash,
      claimedAt: new Date(this.clock.now()).toISOString(),
      lookup: entryOf(this.db, tool, key),
      claimed: false,
    };
    this.readClaims.set(id, claim); // before the lookup yields
    let row: Row | undefined;
    try {
      row = await claim.lookup;
    } catch (err) {
      this.readClaims.delete(id);
      throw err;
    }
    if (row && row.expires_at > this.clock.now()) {
      this.readClaims.delete(id);
      return answerFor(row, argsHash, this.liveWrites.has(id));
    }
    claim.claimed = true;
    return { kind: 'claimed' };
  }

  /**
   * Stores the outcome of a claimed call; it replays for 30 days from now. Not waited on for
   * the disk: if a power loss takes it, the durable claim of a write is still pending and
   * becomes `unknown` (409, never a second execution), and a read simply runs again.
   */
  async complete(tool: string, key: string, status: number, body: unknown): Promise<void> {
    const now = this.clock.now();
    const id = readKey(tool, key);
    const read = this.readClaims.get(id);
    if (read?.claimed) {
      // Replaces an expired entry of the same key. The claim is dropped only once the row is
      // there, so a duplicate meanwhile is in flight rather than a second run. If the row
      // cannot be written the claim stays; the caller releases it (a read may run again).
      await this.db.tx(
        (t) =>
          t.run(
            `INSERT INTO gateway_idempotency (tool, idem_key, args_hash, state, writes, status, body, claimed_at, stored_at, expires_at)
             VALUES (?, ?, ?, 'done', 0, ?, ?, ?, ?, ?)
             ON CONFLICT (tool, idem_key) DO UPDATE SET args_hash = excluded.args_hash, state = 'done', writes = 0, status = excluded.status,
               body = excluded.body, claimed_at = excluded.claimed_at, stored_at = excluded.stored_at, expires_at = excluded.expires_at`,
            [tool, key, read.argsHash, status, JSON.stringify(body), read.claimedAt, new Date(now).toISOString(), now + IDEMPOTENCY_TTL_MS],
          ),
        { durable: false },
      );
      this.readClaims.delete(id);
      return;
    }
    try {
      await this.db.tx(
        (t) =>
          t.run(
            "UPDATE gateway_idempotency SET state = 'done', status = ?, body = ?, stored_at = ?, expires_at = ? WHERE tool = ? AND idem_key = ? AND state = 'pending'",
            [status, JSON.stringify(body), new Date(now).toISOString(), now + IDEMPOTENCY_TTL_MS, tool, key],
          ),
        { durable: false },
      );
    } finally {
      this.liveWrites.delete(id); // the call has ended, stored or not
    }
  }

  /**
   * A write's claim whose call was given up after the upstream may have acted (a statement
   * killed mid-run): `unknown` now, as it would be after a restart — a repeat is 409, never
   * a second execution. Kept 30 days from now.
   */
  async markUnknown(tool: string, key: string): Promise<void> {
    const now = this.clock.now();
    // Unknown from now on whether or not the row says so: the call has ended.
    this.liveWrites.delete(readKey(tool, key));
    await this.db.tx(
      (t) =>
        t.run("UPDATE gateway_idempotency SET state = 'unknown', stored_at = ?, expires_at = ? WHERE tool = ? AND idem_key = ? AND state = 'pending' AND writes = 1", [
          new Date(now).toISOString(),
          now + IDEMPOTENCY_TTL_MS,
          tool,
          key,
        ]),
      { durable: false },
    );
  }

  /** Drops a claim whose call did not happen or failed upstream, so a retry can run. */
  async release(tool: string, key: string): Promise<void> {
    const id = readKey(tool, key);
    if (this.readClaims.get(id)?.claimed) {
      this.readClaims.delete(id);
      return;
    }
    // Lost on a power failure, a write's claim stays and turns `unknown`: the safe side. A
    // release the store refuses leaves it pending and no longer live: `unknown` too. Live until
    // the row is gone: a duplicate queued behind the DELETE must not read a pending row nobody
    // runs under as unknown (nothing ran) and then see the key run after all.
    try {
      await this.db.tx((t) => t.run("DELETE FROM gateway_idempotency WHERE tool = ? AND idem_key = ? AND state = 'pending'", [tool, key]), { durable: false });
    } finally {
      this.liveWrites.delete(id);
    }
  }

  /**
   * Deletes expired entries, `batch` per statement, yielding between statements so calls and
   * other transactions go on meanwhile (Infinity: one statement); returns how many.
   */
  async purgeExpired(batch = PURGE_BATCH): Promise<number> {
    const now = this.clock.now();
    if (batch === Infinity) return (await this.db.run('DELETE FROM gateway_idempotency WHERE expires_at <= ?', [now])).changes;
    let total = 0;
    for (;;) {
      // Not waited on for the disk: a purge a power loss takes is simply done again.
      const r = await this.db.tx((t) => t.run(PURGE_SQL, [now, batch]), { durable: false });
      total += r.changes;
      if (r.changes < batch) return total;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Quarantines that survive a restart (a repair is still due). */
  async quarantined(): Promise<Array<{ connector: string; quarantined_at: string; repair_file: string | null }>> {
    return this.db.all('SELECT connector, quarantined_at, repair_file FROM gateway_quarantine');
  }

  async setQuarantined(connector: string, at: string, repairFile: string | null): Promise<void> {
    await this.db.run(
      'INSERT INTO gateway_quarantine (connector, quarantined_at, repair_file) VALUES (?, ?, ?) ON CONFLICT (connector) DO UPDATE SET quarantined_at = excluded.quarantined_at, repair_file = excluded.repair_file',
      [connector, at, repairFile],
    );
  }

  async clearQuarantined(connector: string): Promise<void> {
    await this.db.run('DELETE FROM gateway_quarantine WHERE connector = ?', [connector]);
  }

  async close(): Promise<void> {
    if (this.purgeTimer) clearInterval(this.purgeTimer);
    await this.db.close();
  }
}

/** The stored entry of (tool, key), live or expired. */
function entryOf(db: SqlDb, tool: string, key: string): Promise<Row | undefined> {
  return db.get<Row>('SELECT args_hash, state, status, body, expires_at FROM gateway_idempotency WHERE tool = ? AND idem_key = ?', [tool, key]);
}

/**
 * What a live entry (not expired) means for a claim with `argsHash`; `running`: a call of
 * this process still holds the entry's claim.
 */
function answerFor(row: Row, argsHash: string, running: boolean): ClaimResult {
  if (row.args_hash !== argsHash) return { kind: 'conflict' };
  if (row.state === 'pending') return running ? { kind: 'in_flight' } : { kind: 'unknown' };
  if (row.state === 'unknown') return { kind: 'unknown' };
  return { kind: 'replay', status: row.status ?? 200, body: JSON.parse(row.body ?? 'null') as unknown };
}
