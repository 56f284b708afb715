/**
 * How the gateway's events (`tool.called`, `tool.refused`) reach a run: at once when the
 * kernel takes them, else through an outbox table in gateway.db that is delivered once the
 * kernel answers again. Apart from the kernel (`svcd --no-kernel`) a kernel restart or a
 * network fault would otherwise lose the audit record of calls that did run.
 *
 * - A call waits at most `timeoutMs` for its event. By then the event is either appended or
 *   in the outbox: an append still running at the deadline gets its row at once (held: not
 *   sent again while the append may still land, deleted if it does), so a crash after the
 *   call answered loses nothing.
 * - A failure the kernel may get over queues the event: no answer at all (the kernel is down:
 *   a pass stops there, and nothing is sent until it answers; after a timeout, calls queue
 *   without trying and one pass request waits long, since every request sent to a hung kernel
 *   may be taken when it wakes), or an answer that is not a
 *   verdict on the event (5xx, 429, a refused gateway bearer; that run's events wait, the
 *   others go on, and after `maxTries` such answers the event is dropped). A refused
 *   credential tries the next one; any other refusal (an unknown run, say) is final and only
 *   logged.
 * - A run's events keep their order: while a run has events queued or being sent, its new
 *   ones queue behind them, and a pass sends no event of a run whose earlier one waits or is
 *   still being sent by its call. (A call's own append that fails is queued behind the
 *   events of the run's concurrent calls that came meanwhile: calls that overlap have no
 *   order to keep; one made after another answered always comes after it.)
 * - What is queued is what would have been posted (payload already redacted) plus the
 *   credentials to post it with: the run's remit token, the call's lease, or the bearer for a
 *   refusal. A credential that expired meanwhile refuses the event, so a long outage can
 *   still lose events, with a warning each.
 * - An event sent from the outbox carries `payload.queued_at`, when the gateway first tried
 *   to post it (the event's own `at` is when the kernel appended it).
 * - At least once: an append that timed out may have landed all the same, and is then posted
 *   again from the outbox.
 * - Bounded: at most `maxRows` rows and `maxAgeMs` per row; beyond either an event is dropped
 *   with an error in the log and `svc_gateway_events_dropped_total`.
 */
import type { Clock } from '../clock.js';
import { SvcError } from '../errors.js';
import type { Logger, Redactor } from '../log/logger.js';
import { LogThrottle } from '../log/throttle.js';
import type { SqlDb } from '../store/sql-db.js';
import { isCredentialRefusal, KernelUnreachable, type AppendOptions, type EventCredential, type GatewayEvent, type KernelLink } from './kernel-link.js';
import type { DROP_REASONS, GatewayMetrics } from './metrics.js';
import { settledWithin } from '../util/settled-within.js';

export const OUTBOX_MIGRATION = {
  id: 'gateway-002-event-outbox',
  sql: `
    CREATE TABLE gateway_event_outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      run_id TEXT NOT NULL,
      event TEXT NOT NULL,
      creds TEXT NOT NULL,
      queued_at TEXT NOT NULL,
      queued_ms INTEGER NOT NULL,
      tries INTEGER NOT NULL DEFAULT 0
    );
  `,
};

/** Why an event did not reach its run (the `reason` label of svc_gateway_events_dropped_total). */
export type DropReason = (typeof DROP_REASONS)[number];

export interface EventOutboxOptions {
  db: SqlDb;
  link: () => KernelLink;
  clock: Clock;
  logger: Logger;
  redactor: Redactor;
  metrics: GatewayMetrics;
  /** How long a call waits for its event to be appended before it is queued instead, ms. */
  timeoutMs: number;
  /** First wait before asking again after a failed delivery, ms; doubles up to `maxRetryMs`. (Default: 1000) */
  retryMs?: number;
  /** (Default: 60000) */
  maxRetryMs?: number;
  /** Answers that are no verdict (5xx, 429, …) an event gets before it is dropped. (Default: 10) */
  maxTries?: number;
  /** How long a pass's request waits for the kernel, ms. (Default: 300000) */
  passTimeoutMs?: number;
  /** (Default: 100000) */
  maxRows?: number;
  /** (Default: 7 days) */
  maxAgeMs?: number;
}

/** One try with every credential: taken, refused for good, or to be asked again. */
type Attempt = { kind: 'delivered' } | { kind: 'refused' } | { kind: 'retry'; noAnswer: boolean };

interface OutboxRow {
  id: number;
  run_id: string;
  event: string;
  creds: string;
  queued_at: string;
  queued_ms: number;
  tries: number;
}

/** How a pass ended: the kernel did not answer, some runs got answers that were no verdict, or all was sent. */
type PassEnd = 'down' | 'answered' | 'done';

const BATCH = 100;

/**
 * Drops logged per reason in each window; the rest are counted (the metric has every one) and
 * their number is told by the next line logged. A caller can make every call's event be
 * refused (a made-up run id, a junk token) and a full outbox drops every call's: one line per
 * call was a log as fast as the callers could call.
 */
const DROP_LOG_LINES = 10;
const DROP_LOG_WINDOW_MS = 10_000;

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
  /** Rows queued per run, so a run with a backlog queues behind it without a query. */
  private readonly backlog = new Map<string, number>();
  /** Direct appends in flight per run: a run's next event queues behind them. */
  private readonly sending = new Map<string, number>();
  /** Rows written for appends still in flight at their call's deadline: a pass leaves them (and their run) alone. */
  private readonly held = new Set<number>();
  /** Rows delivered whose DELETE failed: never posted again, deleted at the next pass. */
  private readonly delivered = new Set<number>();
  /** Calls waiting for their event (close waits for them: each ends appended or queued). */
  private readonly answering = new Set<Promise<void>>();
  private rows = 0;
  private timer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;
  private queuedMeanwhile = false;
  /**
   * What the last attempt found: `refusing` (no connection: cheap to ask, so calls still try
   * at once), `hung` (a request got no answer in time: calls queue without asking, and a pass
   * keeps one request waiting for the kernel, so a kernel that wakes up does not find a pile
   * of copies of one event). Failures are not logged again until the kernel is `up`.
   */
  private kernel: 'up' | 'refusing' | 'hung' = 'up';
  /** Aborted by close: ends a pass's request still waiting. */
  private readonly closing = new AbortController();
  /** Consecutive passes that ended with something left to send: the backoff's exponent. */
  private retryStep = 0;
  /** No more passes (close began). */
  private stopping = false;
  /** The store may be closed: nothing is written any more. */
  private closed = false;

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
   * Appends `ev` to `runId` with the first of `creds` the kernel accepts; never throws. Waits
   * at most `timeoutMs` (plus one write to the store): an append still running then is
   * queued, held until it settles.
   */
  deliver(runId: string, ev: GatewayEvent, creds: EventCredential[]): Promise<void> {
    const p = this.deliverNow(runId, { ...ev, payload: this.o.redactor.redactValue(ev.payload) }, creds);
    this.answering.add(p);
    void p.finally(() => this.answering.delete(p));
    return p;
  }

  private async deliverNow(runId: string, ev: GatewayEvent, creds: EventCredential[]): Promise<void> {
    const queuedMs = this.o.clock.now();
    if (this.backlog.has(runId) || this.sending.has(runId) || this.kernel === 'hung') {
      await this.enqueue(runId, ev, creds, queuedMs);
      return;
    }
    this.count(this.sending, runId, +1);
    let row: Promise<number | null> | null = null; // written at the deadline
    let settled = false;
    const attempt = this.attempt(runId, ev, creds, 'call').then(async (a) => {
      settled = true;
      this.count(this.sending, runId, -1);
      if (a.kind !== 'retry' && this.kernel !== 'up') this.kernelAnswered(); // and the rows waiting go now
      if (row === null) {
        if (a.kind === 'retry') await this.enqueue(runId, ev, creds, queuedMs);
        // The run's events queued behind this one (a concurrent call's) may go now. A failed
        // one was queued after them: concurrent calls have no order of their own to keep.
        else if (this.backlog.has(runId)) this.schedule(0);
        return;
      }
      const id = await row;
      if (id === null) return; // its row could not be written (already dropped, with a reason)
      this.held.delete(id);
      if (a.kind === 'retry') {
        this.schedule(this.retryDelay());
        return;
      }
      await this.remove(id, runId); // it landed (or was refused) after all
      // A pass may have left this run's later events behind the held row: they may go now.
      if (this.backlog.has(runId)) this.schedule(0);
    }).catch((err: unknown) => {
      // Every step above handles its own failures; a call must not fail for its event anyway.
      this.o.logger.error('gateway event outbox: unexpected failure', { run_id: runId, err: this.message(err) });
    });
    if ((await settledWithin(attempt, this.o.timeoutMs)).state !== 'pending') return; // attempt never rejects (its catch above)
    if (settled) {
      await attempt; // it failed just now and is being queued: the call answers once it is
      return;
    }
    row = this.enqueue(runId, ev, creds, queuedMs, { held: true });
    await row;
  }

  /**
   * Stops delivering; queued rows stay for the next start. Calls still waiting for their
   * event are let finish (each within `timeoutMs`, its event then queued); a pass in
   * progress finishes the event it is sending.
   */
  async close(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.answering]);
    this.closing.abort(); // a pass's request waiting on a hung kernel: its row stays for the next start
    await Promise.allSettled([this.draining]);
    this.closed = true;
  }

  /** Delivers queued events now (tests; the timer does it otherwise). */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.draining ??= this.pass().then(
      (end) => this.passEnded(end),
      (err: unknown) => {
        this.o.logger.error('cannot read or update the gateway event outbox; asking again', { err: this.message(err) });
        this.passEnded('answered');
      },
    );
    await this.draining;
  }

  /** After a pass: wait before asking again what is left, or go again for rows queued meanwhile. */
  private passEnded(end: PassEnd): void {
    this.draining = null;
    const again = this.queuedMeanwhile;
    this.queuedMeanwhile = false;
    if (end !== 'done') {
      this.retryStep += 1;
      this.schedule(this.retryDelay());
    } else {
      this.retryStep = 0;
      if (again && this.rows > 0) this.schedule(0);
    }
  }

  /**
   * One try with each credential in turn: a refused one passes the event to the next. `from`:
   * a call's own try (the link's usual timeout), or a pass's over a queued event, whose one
   * request is left to wait long for a hung kernel rather than sent again, until close.
   */
  private async attempt(runId: string, ev: GatewayEvent, creds: EventCredential[], from: 'call' | 'outbox'): Promise<Attempt> {
    const opts: AppendOptions | undefined = from === 'outbox' ? { timeoutMs: this.o.passTimeoutMs ?? 300_000, signal: this.closing.signal } : undefined;
    let last: unknown = null;
    for (const cred of creds) {
      try {
        await this.o.link().appendEvent(runId, ev, cred, opts);
        return { kind: 'delivered' };
      } catch (err) {
        last = err;
        if (isCredentialRefusal(err)) continue;
        if (mayPass(err)) {
          const noAnswer = err instanceof KernelUnreachable;
          const quiet = this.kernel !== 'up';
          // An answer, even a 500, says the kernel is not hung or gone.
          this.kernel = noAnswer ? (err.timedOut ? 'hung' : 'refusing') : 'up';
          if (!(quiet && noAnswer)) {
            const what = noAnswer ? 'cannot reach the kernel with a gateway event' : 'the kernel did not take a gateway event';
            this.o.logger.warn(`${what}; ${from === 'outbox' ? 'it stays queued' : 'it is queued'} and ${noAnswer ? 'is sent when the kernel answers' : 'is asked again'}`, {
              kind: ev.kind,
              run_id: runId,
              err: this.message(err),
            });
          }
          return { kind: 'retry', noAnswer };
        }
        break;
      }
    }
    this.drop('refused', runId, ev, last);
    return { kind: 'refused' };
  }

  /** Writes a row; its id, or null when it could not be kept (dropped with a reason). */
  private async enqueue(runId: string, ev: GatewayEvent, creds: EventCredential[], queuedMs: number, opts: { held?: boolean } = {}): Promise<number | null> {
    if (this.closed) {
      this.drop('store', runId, ev, new Error('the gateway is shutting down'));
      return null;
    }
    if (this.rows >= (this.o.maxRows ?? 100_000)) {
      this.drop('full', runId, ev, new Error(`the outbox holds ${this.rows} events already`));
      return null;
    }
    let id: number;
    try {
      const row = await this.o.db.get<{ id: number }>('INSERT INTO gateway_event_outbox (run_id, event, creds, queued_at, queued_ms) VALUES (?, ?, ?, ?, ?) RETURNING id', [
        runId,
        JSON.stringify(ev),
        JSON.stringify(creds),
        new Date(queuedMs).toISOString(),
        queuedMs,
      ]);
      id = Number(row!.id);
    } catch (err) {
      this.drop('store', runId, ev, err);
      return null;
    }
    if (opts.held) this.held.add(id);
    this.count(this.backlog, runId, +1);
    this.rows += 1;
    this.gauge();
    if (!opts.held) this.schedule(this.kernel !== 'up' || this.retryStep > 0 ? this.retryDelay() : 0);
    return id;
  }

  /**
   * Sends queued rows oldest first. No answer at all stops the pass (the kernel is down); an
   * answer that is no verdict leaves that run's events for the next pass and goes on with the
   * other runs.
   */
  private async pass(): Promise<PassEnd> {
    const waiting = new Set<string>(); // runs with an event left behind in this pass
    let end: PassEnd = 'done';
    let after = 0;
    for (;;) {
      if (this.stopping) return end;
      const rows = await this.o.db.all<OutboxRow>('SELECT id, run_id, event, creds, queued_at, queued_ms, tries FROM gateway_event_outbox WHERE id > ? ORDER BY id LIMIT ?', [after, BATCH]);
      if (rows.length === 0) return end;
      for (const row of rows) {
        if (this.stopping) return end;
        after = row.id;
        if (this.delivered.has(row.id)) {
          await this.remove(row.id, row.run_id);
          continue;
        }
        if (waiting.has(row.run_id) || this.held.has(row.id) || this.sending.has(row.run_id)) {
          // An earlier event of the run is not in yet (left behind, held, or a call's own
          // append still in flight): this one waits too, for the pass that settling schedules.
          waiting.add(row.run_id);
          continue;
        }
        const parsed = parseRow(row);
        if (!parsed) {
          // Written by this module, so only a damaged file gets here; it must not block the rest.
          this.drop('store', row.run_id, null, new Error(`outbox row ${row.id} cannot be read`));
          await this.remove(row.id, row.run_id);
          continue;
        }
        if (this.o.clock.now() - row.queued_ms > (this.o.maxAgeMs ?? 7 * 24 * 3600 * 1000)) {
          this.drop('expired', row.run_id, parsed.ev, new Error(`queued since ${row.queued_at}`));
          await this.remove(row.id, row.run_id);
          continue;
        }
        const { ev, creds } = parsed;
        const a = await this.attempt(row.run_id, { ...ev, payload: { ...ev.payload, queued_at: row.queued_at } }, creds, 'outbox');
        if (a.kind === 'retry' && a.noAnswer) return 'down';
        if (a.kind === 'retry') {
          if (row.tries + 1 >= (this.o.maxTries ?? 10)) {
            this.drop('refused', row.run_id, ev, new Error(`the kernel did not take it in ${row.tries + 1} tries`));
            await this.remove(row.id, row.run_id);
          } else {
            await this.o.db.tx((t) => t.run('UPDATE gateway_event_outbox SET tries = tries + 1 WHERE id = ?', [row.id]), { durable: false });
            waiting.add(row.run_id);
            end = 'answered';
          }
          continue;
        }
        if (a.kind === 'delivered') this.delivered.add(row.id); // until its DELETE is through
        if (this.kernel !== 'up') this.kernelAnswered();
        await this.remove(row.id, row.run_id);
      }
    }
  }

  /**
   * Deletes a row that is done with. Not waited on for the disk: a DELETE a power loss takes
   * sends the event again, which at least once allows. One that fails is kept in `delivered`
   * (never posted again) and tried at the next pass.
   */
  private async remove(id: number, runId: string): Promise<void> {
    if (this.closed) return; // the next start sends it again (at least once)
    try {
      await this.o.db.tx((t) => t.run('DELETE FROM gateway_event_outbox WHERE id = ?', [id]), { durable: false });
    } catch (err) {
      this.o.logger.error('cannot update the gateway event outbox; the row is deleted later', { run_id: runId, err: this.message(err) });
      this.schedule(this.retryDelay());
      return;
    }
    this.delivered.delete(id);
    this.held.delete(id);
    this.count(this.backlog, runId, -1);
    this.rows = Math.max(0, this.rows - 1);
    this.gauge();
  }

  /** A kernel thought down answered: said once, and what waits for it goes now. */
  private kernelAnswered(): void {
    this.kernel = 'up';
    if (this.rows === 0) return;
    this.o.logger.info('the kernel takes gateway events again', { queued: this.rows });
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopping || this.timer) return;
    // A pass that already read past this row would miss it: it looks again when it ends.
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
    return Math.min(this.o.maxRetryMs ?? 60_000, first * 2 ** Math.min(Math.max(0, this.retryStep - 1), 16));
  }

  private count(map: Map<string, number>, runId: string, by: number): void {
    const n = (map.get(runId) ?? 0) + by;
    if (n > 0) map.set(runId, n);
    else map.delete(runId);
  }

  /** At most DROP_LOG_LINES lines per drop reason every DROP_LOG_WINDOW_MS. */
  private readonly dropLog = new LogThrottle(DROP_LOG_WINDOW_MS, DROP_LOG_LINES);

  /** Counts and logs an event that will not reach its run, naming the call it recorded (null: unreadable). */
  private drop(reason: DropReason, runId: string, ev: GatewayEvent | null, err: unknown): void {
    this.o.metrics.eventsDropped.inc({ reason });
    const unlogged = this.dropLog.pass(reason, this.o.clock.now());
    if (unlogged === null) return;
    const log = reason === 'refused' ? this.o.logger.warn : this.o.logger.error;
    const p = ev?.payload ?? {};
    log.call(this.o.logger, 'a gateway event was not recorded on its run', {
      kind: ev?.kind ?? null,
      run_id: runId,
      tool: p.tool ?? null,
      step: p.step ?? null,
      ...(typeof p.outcome === 'string' ? { outcome: p.outcome } : typeof p.reason === 'string' ? { refusal: p.reason } : {}),
      reason,
      err: this.message(err),
      ...(unlogged > 0 ? { not_logged_before: unlogged } : {}),
    });
  }

  private message(err: unknown): string {
    return this.o.redactor.redact(err instanceof Error ? err.message : String(err));
  }

  private gauge(): void {
    this.o.metrics.outboxDepth.set(this.rows);
  }
}

/**
 * Whether a failed append may succeed later unchanged: the kernel did not answer
 * (`KernelUnreachable`), answered something that is no verdict on the event (a 5xx, a 429,
 * an answer that is not svcd's; a plain Error), refused the gateway's own bearer or its
 * address (`unauthorized`, `forbidden`: a configuration an operator fixes), or failed inside
 * this process (the in-process kernel's store). An SvcError with another code (unknown run,
 * bad request) is the kernel's last word.
 */
export function mayPass(err: unknown): boolean {
  if (!(err instanceof SvcError)) return true;
  return err.code === 'unavailable' || err.code === 'unauthorized' || err.code === 'forbidden' || err.code === 'internal';
}
