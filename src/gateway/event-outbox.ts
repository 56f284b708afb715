/**
 * How the gateway's events (`tool.called`, `tool.refused`) reach a run: at once when the
 * kernel takes them, else through an outbox table in gateway.db that is delivered once the
 * kernel answers again. Apart from the kernel (`svcd --no-kernel`) a kernel restart or a
 * network fault would otherwise lose the audit record of calls that did run.
 *
 * - A failure the kernel may get over (no answer, a timeout, a 5xx or 429, a refused gateway
 *   bearer) queues the event; a refused credential tries the next one; any other refusal (the
 *   run is unknown, say) is final and only logged, as before.
 * - A run's events keep their order: while a run has queued events, its new ones queue behind
 *   them. A pass stops at the first failure that may pass, so no later event overtakes it.
 * - What is queued is what would have been posted (payload already redacted) plus the
 *   credentials to post it with: the run's remit token, the call's lease, or the bearer for a
 *   refusal. A row is deleted once delivered or finally refused; a credential that expired
 *   meanwhile refuses it, so a long outage can still lose events, with a warning each.
 * - A delivered row carries `payload.queued_at`, when the gateway first tried to post it (the
 *   event's own `at` is when the kernel appended it).
 * - At least once: an append that timed out may have been appended all the same, and is then
 *   posted again from the outbox.
 * - Bounded: at most `maxRows` rows and `maxAgeMs` per row; beyond either an event is dropped
 *   with an error in the log and `svc_gateway_events_dropped_total`.
 */
import type { Clock } from '../clock.js';
import { SvcError } from '../errors.js';
import type { Logger, Redactor } from '../log/logger.js';
import type { SqlDb } from '../store/sql-db.js';
import { isCredentialRefusal, type EventCredential, type GatewayEvent, type KernelLink } from './kernel-link.js';
import type { GatewayMetrics } from './metrics.js';

export const OUTBOX_MIGRATION = {
  id: 'gateway-002-event-outbox',
  sql: `
    CREATE TABLE gateway_event_outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      run_id TEXT NOT NULL,
      event TEXT NOT NULL,
      creds TEXT NOT NULL,
      queued_at TEXT NOT NULL,
      queued_ms INTEGER NOT NULL
    );
  `,
};

/** Why an event did not reach its run (the `reason` label of svc_gateway_events_dropped_total). */
export type DropReason = 'refused' | 'expired' | 'full' | 'store';

export interface EventOutboxOptions {
  db: SqlDb;
  link: () => KernelLink;
  clock: Clock;
  logger: Logger;
  redactor: Redactor;
  metrics: GatewayMetrics;
  /** How long a call waits for its event to be appended before it answers anyway, ms. */
  timeoutMs: number;
  /** First wait before asking again after a failed delivery, ms; doubles up to `maxRetryMs`. (Default: 1000) */
  retryMs?: number;
  /** (Default: 60000) */
  maxRetryMs?: number;
  /** (Default: 100000) */
  maxRows?: number;
  /** (Default: 7 days) */
  maxAgeMs?: number;
}

type Attempt = 'delivered' | 'refused' | 'retry';

interface OutboxRow {
  id: number;
  run_id: string;
  event: string;
  creds: string;
  queued_at: string;
  queued_ms: number;
}

const BATCH = 100;
/** How long `close` waits for appends already sent. */
const CLOSE_WAIT_MS = 3000;

function parseRow(row: OutboxRow): { ev: GatewayEvent; creds: EventCredential[] } | null {
  try {
    const ev = JSON.parse(row.event) as GatewayEvent;
    const creds = JSON.parse(row.creds) as EventCredential[];
    if (typeof ev?.kind !== 'string' || typeof ev.payload !== 'object' || ev.payload === null || !Array.isArray(creds)) return null;
    return { ev, creds };
  } catch {
    return null;
  }
}

export class EventOutbox {
  /** Queued rows per run, so a run with a backlog queues behind it without a query. */
  private readonly backlog = new Map<string, number>();
  private rows = 0;
  private timer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;
  private queuedMeanwhile = false;
  private failures = 0;
  /** No more passes (close began). */
  private stopping = false;
  /** The store may be closed: nothing is written any more. */
  private closed = false;
  /** Appends still running after their call answered; `close` lets them settle. */
  private readonly inFlight = new Set<Promise<unknown>>();

  private constructor(private readonly o: EventOutboxOptions) {}

  /** Opens the outbox on the gateway's store and delivers what a previous process left. */
  static async open(o: EventOutboxOptions): Promise<EventOutbox> {
    const box = new EventOutbox(o);
    for (const r of await o.db.all<{ run_id: string; n: number }>('SELECT run_id, COUNT(*) AS n FROM gateway_event_outbox GROUP BY run_id')) {
      box.backlog.set(r.run_id, Number(r.n));
      box.rows += Number(r.n);
    }
    box.gauge();
    if (box.rows > 0) {
      o.logger.info('delivering gateway events queued before the restart', { events: box.rows });
      box.schedule(0);
    }
    return box;
  }

  /** Events waiting for the kernel. */
  get depth(): number {
    return this.rows;
  }

  /**
   * Appends `ev` to `runId` with the first of `creds` the kernel accepts, waiting at most
   * `timeoutMs`; never throws. An append still running then goes on, and is queued if it
   * fails in a way that may pass.
   */
  async deliver(runId: string, ev: GatewayEvent, creds: EventCredential[]): Promise<void> {
    const safe: GatewayEvent = { ...ev, payload: this.o.redactor.redactValue(ev.payload) };
    const queuedMs = this.o.clock.now();
    if (this.backlog.has(runId)) return this.enqueue(runId, safe, creds, queuedMs);
    const settled = this.attempt(runId, safe, creds, this.failures > 0).then(async (result) => {
      if (result === 'delivered' && this.failures > 0 && this.rows > 0) this.askNow(); // the kernel is back
      if (result !== 'retry') return;
      // The kernel just failed: the outbox waits a while before asking, and says nothing more
      // until it answers.
      this.failures ||= 1;
      await this.enqueue(runId, safe, creds, queuedMs);
    });
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.o.timeoutMs);
    });
    try {
      await Promise.race([settled, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Stops delivering; queued rows stay for the next start. Appends already sent get up to
   * `CLOSE_WAIT_MS` to settle, and one that fails meanwhile is still queued; the store closes
   * after this.
   */
  async close(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    let timer: NodeJS.Timeout | undefined;
    const wait = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, CLOSE_WAIT_MS);
    });
    await Promise.race([Promise.allSettled([...this.inFlight, this.draining]), wait]);
    clearTimeout(timer);
    this.closed = true;
  }

  /** Delivers queued events now (tests; the timer does it otherwise). */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.draining ??= this.pass().then(
      (stalled) => this.passEnded(stalled),
      (err: unknown) => {
        this.o.logger.error('cannot read the gateway event outbox; asking again', { err: this.message(err) });
        this.failures += 1;
        this.passEnded(true);
      },
    );
    await this.draining;
  }

  /** After a pass: wait before asking a kernel that failed, or go again for rows queued meanwhile. */
  private passEnded(stalled: boolean): void {
    this.draining = null;
    const again = this.queuedMeanwhile;
    this.queuedMeanwhile = false;
    if (stalled) this.schedule(this.retryDelay());
    else if (again && this.rows > 0) this.schedule(0);
  }

  /** One try with each credential in turn: a refused one passes the event to the next. */
  private async attempt(runId: string, ev: GatewayEvent, creds: EventCredential[], quiet = false): Promise<Attempt> {
    let last: unknown = null;
    for (const cred of creds) {
      try {
        await this.o.link().appendEvent(runId, ev, cred);
        return 'delivered';
      } catch (err) {
        last = err;
        if (isCredentialRefusal(err)) continue;
        if (mayPass(err)) {
          if (!quiet) this.o.logger.warn('cannot reach the kernel with a gateway event; it is queued and sent when the kernel answers', { kind: ev.kind, run_id: runId, err: this.message(err) });
          return 'retry';
        }
        break;
      }
    }
    this.drop('refused', runId, ev.kind, last);
    return 'refused';
  }

  private async enqueue(runId: string, ev: GatewayEvent, creds: EventCredential[], queuedMs: number): Promise<void> {
    if (this.closed) return this.drop('store', runId, ev.kind, new Error('the gateway is shutting down'));
    if (this.rows >= (this.o.maxRows ?? 100_000)) return this.drop('full', runId, ev.kind, new Error(`the outbox holds ${this.rows} events already`));
    try {
      await this.o.db.run('INSERT INTO gateway_event_outbox (run_id, event, creds, queued_at, queued_ms) VALUES (?, ?, ?, ?, ?)', [
        runId,
        JSON.stringify(ev),
        JSON.stringify(creds),
        new Date(queuedMs).toISOString(),
        queuedMs,
      ]);
    } catch (err) {
      return this.drop('store', runId, ev.kind, err);
    }
    this.backlog.set(runId, (this.backlog.get(runId) ?? 0) + 1);
    this.rows += 1;
    this.gauge();
    this.schedule(this.failures === 0 ? 0 : this.retryDelay());
  }

  /** Sends queued rows oldest first; stops at the first failure that may pass (true: stalled). */
  private async pass(): Promise<boolean> {
    for (;;) {
      if (this.stopping) return false;
      const rows = await this.o.db.all<OutboxRow>('SELECT id, run_id, event, creds, queued_at, queued_ms FROM gateway_event_outbox ORDER BY id LIMIT ?', [BATCH]);
      if (rows.length === 0) return false;
      for (const row of rows) {
        if (this.stopping) return false;
        const parsed = parseRow(row);
        if (!parsed) {
          // Written by this module, so only a damaged file gets here; it must not block the rest.
          this.drop('store', row.run_id, 'unknown', new Error(`outbox row ${row.id} cannot be read`));
        } else if (this.o.clock.now() - row.queued_ms > (this.o.maxAgeMs ?? 7 * 24 * 3600 * 1000)) {
          this.drop('expired', row.run_id, parsed.ev.kind, new Error(`queued since ${row.queued_at}`));
        } else {
          const { ev, creds } = parsed;
          // Said once per outage, not at every retry.
          const quiet = this.failures > 0;
          const result = await this.attempt(row.run_id, { ...ev, payload: { ...ev.payload, queued_at: row.queued_at } }, creds, quiet);
          if (result === 'retry') {
            this.failures += 1;
            return true;
          }
        }
        await this.o.db.run('DELETE FROM gateway_event_outbox WHERE id = ?', [row.id]);
        this.forget(row.run_id);
        if (this.failures > 0) this.o.logger.info('the kernel takes gateway events again', { queued: this.rows });
        this.failures = 0;
      }
    }
  }

  private forget(runId: string): void {
    const n = (this.backlog.get(runId) ?? 1) - 1;
    if (n > 0) this.backlog.set(runId, n);
    else this.backlog.delete(runId);
    this.rows = Math.max(0, this.rows - 1);
    this.gauge();
  }

  private askNow(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopping || this.timer) return;
    // A pass that already read an empty table would miss this row: it looks again when it ends.
    if (this.draining) {
      this.queuedMeanwhile = true;
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.drain();
    }, ms);
    this.timer.unref();
  }

  private retryDelay(): number {
    const first = this.o.retryMs ?? 1000;
    return Math.min(this.o.maxRetryMs ?? 60_000, first * 2 ** Math.min(this.failures - 1, 16));
  }

  private drop(reason: DropReason, runId: string, kind: string, err: unknown): void {
    this.o.metrics.eventsDropped.inc({ reason });
    const log = reason === 'refused' ? this.o.logger.warn : this.o.logger.error;
    log.call(this.o.logger, 'a gateway event was not recorded on its run', { kind, run_id: runId, reason, err: this.message(err) });
  }

  private message(err: unknown): string {
    return this.o.redactor.redact(err instanceof Error ? err.message : String(err));
  }

  private gauge(): void {
    this.o.metrics.outboxDepth.set(this.rows);
  }
}

/**
 * Whether a failed append may succeed later unchanged: the kernel did not answer, answered
 * 5xx or 429 (`KernelUnreachable`), refused the gateway's own bearer (a configuration an
 * operator fixes), or failed inside this process (the in-process kernel's store, say).
 * An SvcError with another code (unknown run, bad request) is the kernel's last word.
 */
export function mayPass(err: unknown): boolean {
  if (!(err instanceof SvcError)) return true;
  return err.code === 'unavailable' || err.code === 'unauthorized' || err.code === 'internal';
}
