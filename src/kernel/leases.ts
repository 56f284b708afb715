/**
 * Leases (interface 2.6, 3; decisions §6, §8): steps handed out oldest-ready first by kind,
 * long polls woken by the notifier, heartbeats, complete with the output schema check, fail
 * with retry/backoff/quarantine, and expiry by the sweeper and on access. Templates are
 * rendered when a step is leased; a render error is a deterministic step failure.
 */
import { isoTime } from '../clock.js';
import { SvcError, notFound } from '../errors.js';
import type {
  BudgetExceededPayload,
  CompensationCompletedPayload,
  CompensationFailedPayload,
  LeaseExpiredPayload,
  RunCompletedPayload,
  RunFailedPayload,
  RunParkedPayload,
  StepCompletedPayload,
  StepFailedPayload,
  StepLeasedPayload,
  StepQuarantinedPayload,
  StepRetryScheduledPayload,
} from '../events/payloads.js';
import { newId } from '../ids.js';
import { LEASE_KINDS, type ErrorInfo, type LeaseKind, type RunState, type Spend, type StepDef } from '../types.js';
import { buildLeaseContext, renderStepDef, warmToolDescriptors, type LeaseContext } from './lease-context.js';
import { spendLeft } from '../spend.js';
import { workItem, type RunModel } from './reducer.js';
import { retryDelayMs, retryPolicy } from './retry.js';
import { budgetExceeded, type RunEngine } from './run-engine.js';
import { KERNEL_ACTOR, normalizeLease, type LeaseRow, type RunWriter } from './run-store.js';
import { schemaCheck } from './schema-check.js';
import { cancelPendingApprovals } from './approvals.js';

/** Lease ttl bounds (decisions §6). */
export const LEASE_TTL = { default: 60, max: 3600 } as const;
/** Longest long poll, seconds (decisions §6). */
export const MAX_WAIT_SECONDS = 30;
/** Leases one sweep expires at most (the next sweep takes the rest). */
const SWEEP_BATCH = 200;
/** How long a lease that failed to expire waits before a sweep tries it again (ms). */
const UNEXPIRABLE_RETRY_MS = 60_000;
/** Acquire's own sweep of expired leases runs at most this often (ms of the kernel's clock). */
export const ACQUIRE_SWEEP_MS = 100;

/** POST /v1/leases body. */
export interface LeaseRequest {
  worker_id: string;
  /** (Default: every kind.) */
  kinds?: LeaseKind[];
  /** (Default: 60, max 3600) */
  ttl_seconds?: number;
  /** Long-poll for work up to this many seconds. (Default: 0, max 30) */
  wait_seconds?: number;
}

/** The lease object of interface 2.6. */
export interface LeaseObject {
  lease_id: string;
  run_id: string;
  step: string;
  kind: LeaseKind;
  attempt: number;
  expires_at: string;
  ttl_seconds: number;
  heartbeat_seconds: number;
  step_def: Record<string, unknown>;
  context: LeaseContext;
}

/** POST /v1/leases/{id}/complete body. */
export interface CompleteBody {
  output?: unknown;
  usage?: Partial<Spend>;
}

/** POST /v1/leases/{id}/fail body. */
export interface FailBody {
  error: ErrorInfo;
  deterministic?: boolean;
  usage?: Partial<Spend>;
}

/**
 * Interface 3 names exactly two outcomes. Everything that is not a retry is `quarantined`:
 * the step will not run again by itself. `run_state` in the response says what became of the
 * run (parked for `quarantine` or `connector_quarantined`, failed over budget, abandoned).
 */
export type FailOutcome = 'retry_scheduled' | 'quarantined';

/** `heartbeat_seconds` = ttl/3 rounded down, at least 1 (decisions §6). */
export function heartbeatSeconds(ttl: number): number {
  return Math.max(1, Math.floor(ttl / 3));
}

function usageOf(u: Partial<Spend> | undefined): Spend {
  return { tokens: Number(u?.tokens ?? 0), usd: Number(u?.usd ?? 0) };
}

function leaseGone(lease: Pick<LeaseRow, 'lease_id' | 'status'>): SvcError {
  const why = lease.status === 'active' || lease.status === 'expired' ? 'expired' : lease.status === 'released' ? 'was released' : `is ${lease.status}`;
  return new SvcError('lease_expired', `lease ${lease.lease_id} ${why}`, { lease_id: lease.lease_id, status: lease.status === 'active' ? 'expired' : lease.status });
}

type Prepared = { kind: 'lease'; stepDef: Record<string, unknown>; renderError: null } | { kind: 'render_error'; renderError: string };

const NOTHING_RESERVED: Spend = { tokens: 0, usd: 0 };

/**
 * The least a compensation waits before asking a quarantined connector again: releasing one
 * takes an operator or two passing canary probes (a minute apart by default), and each try
 * writes three events to the run.
 */
export const COMPENSATION_QUARANTINE_WAIT_MS = 300_000;

/**
 * On a store other svcd instances share (PostgreSQL), work they create wakes none of this
 * one's long polls (the notifier is in-process): a waiting request looks at the store again
 * this often, so a run created on another instance is leased here within about a second.
 */
export const SHARED_STORE_LOOK_MS = 1000;

export class LeaseService {
  /** The kernel clock's time of the last sweep made by acquire (sweepIfDue). */
  private lastAcquireSweep = -Infinity;
  /** The kernel clock's time at the last sweep (NaN before the first). */
  private lastSweepAt = NaN;
  /** Leases a sweep failed to expire → when (kernel clock) one may try again. */
  private readonly unexpirable = new Map<string, number>();

  constructor(private readonly e: RunEngine) {}

  private get k() {
    return this.e.k;
  }

  // ------------------------------------------------------------------ handing out

  /** POST /v1/leases: a lease, or null when there is no work (204) within `wait_seconds`. */
  async acquire(req: LeaseRequest, signal?: AbortSignal): Promise<LeaseObject | null> {
    const ttl = req.ttl_seconds ?? LEASE_TTL.default;
    const kinds = [...new Set(req.kinds ?? LEASE_KINDS)];
    // Monotonic: a wall clock stepped back must not stretch a long poll past wait_seconds
    // (back an hour, an idle request was held an hour).
    const deadline = performance.now() + Math.min(req.wait_seconds ?? 0, MAX_WAIT_SECONDS) * 1000;
    for (;;) {
      const stamp = this.e.notifier.stamp();
      await this.sweepIfDue();
      const got = await this.tryAcquire(req.worker_id, kinds, ttl);
      if (got) return got;
      const remaining = deadline - performance.now();
      if (remaining <= 0 || signal?.aborted || this.e.stopping) return null;
      const due = await this.nextDueInMs(kinds);
      const look = this.k.db.dialect === 'postgres' ? SHARED_STORE_LOOK_MS : Infinity;
      await this.e.notifier.wait(kinds, Math.min(remaining, due === null ? Infinity : Math.max(due, 0) + 5, look), signal, stamp);
    }
  }

  /** Milliseconds until a waiting step becomes ready or an active lease expires, or null. */
  private async nextDueInMs(kinds: readonly LeaseKind[]): Promise<number | null> {
    const now = this.k.clock.now();
    const marks = kinds.map(() => '?').join(', ');
    const ready = await this.k.db.get<{ t: number | null }>(`SELECT MIN(work_ready_at) AS t FROM runs WHERE work_kind IN (${marks}) AND work_ready_at > ?`, [...kinds, now]);
    const expiry = await this.k.db.get<{ t: number | null }>(`SELECT MIN(expires_at) AS t FROM leases WHERE status = 'active' AND kind IN (${marks})`, [...kinds]);
    // An expired lease is swept no sooner than sweepIfDue allows: wake then, not in a busy loop.
    const sweepAt = now >= this.lastAcquireSweep ? this.lastAcquireSweep + ACQUIRE_SWEEP_MS : now;
    const expiryAt = expiry?.t === null || expiry?.t === undefined ? null : Math.max(Number(expiry.t), sweepAt);
    const times = [ready?.t, expiryAt].filter((t) => t !== null && t !== undefined).map(Number);
    return times.length ? Math.min(...times) - now : null;
  }

  private async tryAcquire(workerId: string, kinds: LeaseKind[], ttl: number): Promise<LeaseObject | null> {
    const marks = kinds.map(() => '?').join(', ');
    // A round that met a stale candidate (its work taken or changed since the select) looks
    // again, up to MAX_ROUNDS; one that only skipped runs gets a single look more.
    const MAX_ROUNDS = 5;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const now = this.k.clock.now();
      const candidates = await this.k.db.all<{ run_id: string }>(
        `SELECT run_id FROM runs WHERE work_kind IN (${marks}) AND work_ready_at <= ? ORDER BY work_ready_at, run_id LIMIT 8`,
        [...kinds, now],
      );
      if (candidates.length === 0) return null;
      let stale = false;
      for (const c of candidates) {
        const r = await this.leaseRun(c.run_id, workerId, kinds, ttl);
        if (r === 'stale') stale = true;
        else if (r !== 'skipped') return r;
      }
      if (!stale) round = Math.max(round, MAX_ROUNDS - 2); // only skipped runs: one more look, then stop
    }
    return null;
  }

  /** Prepares outside the transaction (bundle, templates), then commits the lease. */
  private async leaseRun(runId: string, workerId: string, kinds: LeaseKind[], ttl: number): Promise<LeaseObject | 'stale' | 'skipped'> {
    const read = await this.e.modelRead(runId);
    const model = read.model;
    const item = workItem(model);
    if (!item || !kinds.includes(item.kind)) return 'stale';
    const { stored, def } = await this.e.stepDefOf(model, item.step);
    const prepared = await this.prepare(model, item.step, item.kind, def);
    await warmToolDescriptors(this.k, def, item.kind);
    const now = this.k.clock.now();
    const outcome = await this.e.mutate(runId, async (w) => {
      const cur = workItem(w.model);
      if (!cur || cur.step !== item.step || cur.kind !== item.kind || Date.parse(cur.ready_at) > now) return 'stale' as const;
      const m = w.model;
      const s = m.steps[item.step]!;
      const reserved = await this.reservedFor(w, item.kind);
      if (item.kind !== 'compensation' && budgetExceeded(m.usage, m.budget, reserved)) {
        await this.failForBudget(w, item.step, reserved);
        return 'skipped' as const;
      }
      if (prepared.kind === 'render_error') {
        // The kernel fails the step itself (lease_id null), then as a worker's deterministic
        // failure would go on: the same two events for a step and for its compensation.
        const error = { code: 'template_invalid', message: prepared.renderError };
        const attempt = item.kind === 'compensation' ? s.compensation_attempt : s.attempt;
        const failed: StepFailedPayload = { step: item.step, kind: item.kind, attempt, lease_id: null, error, deterministic: true, usage: { tokens: 0, usd: 0 } };
        await w.append({ kind: 'step.failed', payload: failed, actor: KERNEL_ACTOR });
        if (item.kind === 'compensation') await this.failCompensation(w, item.step, attempt, null, error);
        else await this.quarantine(w, item.step, attempt, 'deterministic', null);
        return 'skipped' as const;
      }
      const leaseId = newId('lease', now);
      const attempt = item.kind === 'compensation' ? s.compensation_attempt : s.attempt;
      const expiresAt = now + ttl * 1000;
      const payload: StepLeasedPayload = { step: item.step, kind: item.kind, attempt, lease_id: leaseId, worker_id: workerId, expires_at: isoTime(expiresAt) };
      const [ev] = await w.append({ kind: 'step.leased', payload: payload, actor: { worker_id: workerId } });
      await w.tx.run(
        `INSERT INTO leases (lease_id, run_id, step, kind, attempt, worker_id, status, ttl_seconds, expires_at, leased_at, ended_at)
         VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, NULL)`,
        [leaseId, runId, item.step, item.kind, attempt, workerId, ttl, expiresAt, now],
      );
      return { leaseId, attempt, expiresAt, leasedSeq: ev!.seq, model: w.model, remitToken: w.row.remit_token, remit: w.remit, reserved };
    }, { read });
    if (outcome === 'stale' || outcome === 'skipped') return outcome;
    this.k.metrics.stepsLeased.inc();
    const step = outcome.model.steps[item.step]!;
    const prior = step.first_lease_seq === null ? [] : await this.e.eventRange(runId, step.first_lease_seq, outcome.leasedSeq);
    const context = await buildLeaseContext(this.k, {
      model: outcome.model,
      bundle: stored.bundle,
      step: item.step,
      kind: item.kind,
      def,
      remitToken: outcome.remitToken,
      remit: outcome.remit,
      priorEvents: prior,
      priorEventsFromSeq: step.first_lease_seq,
      reserved: outcome.reserved,
    });
    return {
      lease_id: outcome.leaseId,
      run_id: runId,
      step: item.step,
      kind: item.kind,
      attempt: outcome.attempt,
      expires_at: isoTime(outcome.expiresAt),
      ttl_seconds: ttl,
      heartbeat_seconds: heartbeatSeconds(ttl),
      step_def: (prepared as Extract<Prepared, { kind: 'lease' }>).stepDef,
      context,
    };
  }

  /**
   * What derived remits reserved of the run's spend, read in the run's transaction; nothing for
   * a compensation, which the budget never stops.
   */
  private reservedFor(w: RunWriter, kind: LeaseKind): Promise<Spend> {
    return kind === 'compensation' ? Promise.resolve(NOTHING_RESERVED) : this.e.reservedOf(w.model.remit_id, w.tx);
  }

  private async prepare(model: RunModel, stepId: string, kind: LeaseKind, def: StepDef): Promise<Prepared> {
    try {
      return { kind: 'lease', stepDef: await renderStepDef(model, stepId, kind, def), renderError: null };
    } catch (err) {
      return { kind: 'render_error', renderError: (err as Error).message };
    }
  }

  // ------------------------------------------------------------------ the lease lifecycle

  /** The lease if it is active; expires it on access when its time ran out (then 410). */
  async active(leaseId: string, known?: LeaseRow): Promise<LeaseRow> {
    const row = known?.lease_id === leaseId ? known : await this.k.db.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [leaseId]);
    const lease = normalizeLease(row);
    if (!lease) throw notFound('lease', leaseId);
    if (lease.status !== 'active') throw leaseGone(lease);
    if (lease.expires_at <= this.k.clock.now()) {
      await this.expire(lease);
      throw leaseGone(lease);
    }
    return lease;
  }

  /** True when `leaseId` is an active lease of `runId` (X-Svc-Lease). */
  async isActiveFor(leaseId: string, runId: string): Promise<boolean> {
    const lease = normalizeLease(await this.k.db.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [leaseId]));
    return Boolean(lease && lease.run_id === runId && lease.status === 'active' && lease.expires_at > this.k.clock.now());
  }

  /** Inside a transaction: the lease is still active, else 410. */
  async requireActive(w: RunWriter, leaseId: string): Promise<LeaseRow> {
    const lease = normalizeLease(await w.tx.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [leaseId]));
    if (!lease) throw notFound('lease', leaseId);
    if (lease.status !== 'active' || lease.expires_at <= this.k.clock.now()) throw leaseGone(lease);
    return lease;
  }

  private async endLease(w: RunWriter, leaseId: string, status: LeaseRow['status']): Promise<void> {
    await w.tx.run("UPDATE leases SET status = ?, ended_at = ? WHERE lease_id = ? AND status = 'active'", [status, isoTime(this.k.clock.now()), leaseId]);
  }

  /** POST /v1/leases/{id}/heartbeat. `known`: the lease's row as the route's hook read it, so it is not read twice. */
  async heartbeat(leaseId: string, known?: LeaseRow): Promise<{ expires_at: string }> {
    const lease = await this.active(leaseId, known);
    const expiresAt = this.k.clock.now() + lease.ttl_seconds * 1000;
    const res = await this.k.db.run("UPDATE leases SET expires_at = ? WHERE lease_id = ? AND status = 'active'", [expiresAt, leaseId]);
    if (res.changes !== 1) throw leaseGone({ lease_id: leaseId, status: 'expired' });
    return { expires_at: isoTime(expiresAt) };
  }

  /**
   * POST /v1/leases/{id}/complete: `{run_state, next_step}`. `known`: the lease's row as the
   * route's hook read it (one read fewer), re-checked here.
   */
  async complete(leaseId: string, body: CompleteBody, known?: LeaseRow): Promise<{ run_state: RunState; next_step: string | null }> {
    const lease = await this.active(leaseId, known);
    // A failure report sent here by mistake would complete the step with output null, and its
    // compensation would then have no output to read: refused (once the lease is known live,
    // so an ended lease is 410 whatever was sent), not taken as a success.
    if (Object.hasOwn(body, 'error') && !Object.hasOwn(body, 'output')) {
      throw new SvcError('request_invalid', '/error is not a member of a completion: a failure is reported with POST /v1/leases/{id}/fail', { path: '/error' });
    }
    const read = await this.e.modelRead(lease.run_id);
    const model = read.model;
    const { def } = await this.e.stepDefOf(model, lease.step);
    const output = body.output === undefined ? null : body.output;
    if (lease.kind !== 'compensation' && def.output_schema !== undefined) {
      const problems = schemaCheck(`${model.bundle_id}#output#${model.workflow}#${lease.step}`, def.output_schema)(output);
      if (problems.length > 0) {
        throw new SvcError('output_invalid', `output does not match the output schema of step ${lease.step}: ${problems[0]!.path || '/'} ${problems[0]!.message}`, {
          step: lease.step,
          path: problems[0]!.path,
          errors: problems,
        });
      }
    }
    const usage = usageOf(body.usage);
    const result = await this.e.mutate(lease.run_id, async (w) => {
      await this.requireActive(w, leaseId);
      const usdBefore = w.model.usage.usd;
      const reserved = await this.reservedFor(w, lease.kind as LeaseKind);
      if (lease.kind === 'compensation') {
        const p: CompensationCompletedPayload = { step: lease.step, attempt: lease.attempt, lease_id: leaseId, output, usage };
        await w.append({ kind: 'compensation.completed', payload: p, actor: { worker_id: lease.worker_id } });
        await this.abandonedIfDone(w);
      } else {
        const p: StepCompletedPayload = { step: lease.step, attempt: lease.attempt, lease_id: leaseId, output, usage };
        await w.append({ kind: 'step.completed', payload: p, actor: { worker_id: lease.worker_id } });
        if (budgetExceeded(w.model.usage, w.model.budget, reserved)) await this.failForBudget(w, lease.step, reserved);
        else if (w.model.current_step === null) {
          const done: RunCompletedPayload = { output };
          const cancelled = await cancelPendingApprovals(w.tx, lease.run_id, isoTime(this.k.clock.now()));
          if (cancelled.length > 0) done.cancelled_approval_ids = cancelled;
          await w.append({ kind: 'run.completed', payload: done, actor: KERNEL_ACTOR });
        }
      }
      await this.endLease(w, leaseId, 'completed');
      const m = w.model;
      const chargedUsd = m.usage.usd - usdBefore;
      return { run_state: m.state, next_step: m.state === 'running' || m.state === 'abandoning' ? m.current_step : null, department: m.department, chargedUsd };
    }, { read });
    this.k.metrics.stepLatency.observe(Math.max(0, this.k.clock.now() - lease.leased_at) / 1000);
    // What the run's usage grew by, not the usage sent: the counter then sums exactly what the
    // runs' usage sums (a charge ending in half a nano-dollar is rounded with the run's total).
    if (result.chargedUsd > 0) this.k.metrics.usageUsd.inc({ department: result.department }, result.chargedUsd);
    return { run_state: result.run_state, next_step: result.next_step };
  }

  /** POST /v1/leases/{id}/fail: `{outcome, delay_ms}` (decisions §6). */
  async fail(leaseId: string, body: FailBody, known?: LeaseRow): Promise<{ outcome: FailOutcome; delay_ms: number | null; run_state: RunState }> {
    const lease = await this.active(leaseId, known);
    const model = await this.e.model(lease.run_id);
    const { def } = await this.e.stepDefOf(model, lease.step);
    const isComp = lease.kind === 'compensation';
    const policy = retryPolicy(def.retry); // a compensation retries with its step's policy
    const usage = usageOf(body.usage);
    const error: ErrorInfo = { code: body.error.code, message: body.error.message };
    const deterministic = body.deterministic === true;
    const delay = retryDelayMs(policy, lease.attempt, this.e.random);
    const result = await this.e.mutate(lease.run_id, async (w) => {
      await this.requireActive(w, leaseId);
      const usdBefore = w.model.usage.usd;
      const reserved = await this.reservedFor(w, lease.kind as LeaseKind);
      const actor = { worker_id: lease.worker_id };
      const failed: StepFailedPayload = { step: lease.step, kind: lease.kind as LeaseKind, attempt: lease.attempt, lease_id: leaseId, error, deterministic, usage };
      await w.append({ kind: 'step.failed', payload: failed, actor });
      await this.endLease(w, leaseId, 'failed');
      let outcome: FailOutcome;
      let delayMs: number | null = null;
      if (isComp && error.code === 'connector_quarantined') {
        // An abandoning run cannot park, and the quarantine lasts until the connector is
        // released: the compensation tries again at the same attempt (decisions §6: no attempt
        // spent), for as long as it takes, after the step's longest retry delay but at least
        // COMPENSATION_QUARANTINE_WAIT_MS (a max_delay_ms of 0 would spin, writing events).
        const longest = Math.max(policy.max_delay_ms, COMPENSATION_QUARANTINE_WAIT_MS);
        const wait = Math.max(COMPENSATION_QUARANTINE_WAIT_MS, retryDelayMs({ ...policy, initial_delay_ms: longest, max_delay_ms: longest }, 1, this.e.random));
        await this.scheduleRetry(w, lease.step, 'compensation', lease.attempt, wait);
        outcome = 'retry_scheduled';
        delayMs = wait;
      } else if (isComp) {
        if (deterministic || lease.attempt >= policy.max_attempts) {
          await this.failCompensation(w, lease.step, lease.attempt, leaseId, error);
          outcome = 'quarantined';
        } else {
          await this.scheduleRetry(w, lease.step, 'compensation', lease.attempt + 1, delay);
          outcome = 'retry_scheduled';
          delayMs = delay;
        }
      } else if (budgetExceeded(w.model.usage, w.model.budget, reserved)) {
        await this.failForBudget(w, lease.step, reserved);
        outcome = 'quarantined';
      } else if (error.code === 'connector_quarantined') {
        const parked: RunParkedPayload = { reason: 'connector_quarantined', step: lease.step, approval_id: null, lease_id: leaseId };
        await w.append({ kind: 'run.parked', payload: parked, actor: KERNEL_ACTOR });
        outcome = 'quarantined';
      } else if (deterministic || lease.attempt >= policy.max_attempts) {
        await this.quarantine(w, lease.step, lease.attempt, deterministic ? 'deterministic' : 'max_attempts', leaseId);
        outcome = 'quarantined';
      } else {
        await this.scheduleRetry(w, lease.step, lease.kind as LeaseKind, lease.attempt + 1, delay);
        outcome = 'retry_scheduled';
        delayMs = delay;
      }
      return { outcome, delay_ms: delayMs, run_state: w.model.state, department: w.model.department, chargedUsd: w.model.usage.usd - usdBefore };
    });
    if (result.chargedUsd > 0) this.k.metrics.usageUsd.inc({ department: result.department }, result.chargedUsd); // as complete's
    return { outcome: result.outcome, delay_ms: result.delay_ms, run_state: result.run_state };
  }

  /**
   * Expires leases before handing out work, so a step whose lease ran out is handed out again
   * at once rather than at the sweeper's next tick; at most every ACQUIRE_SWEEP_MS of the
   * kernel's clock, since under load the query cost ≈1 % of a step cycle for nothing
   * (bench/README.md item 22). A lease lives at least a second, so this delays nothing by more
   * than a tenth of its life.
   */
  private sweepIfDue(): Promise<number> | number {
    const now = this.k.clock.now();
    if (now >= this.lastAcquireSweep && now < this.lastAcquireSweep + ACQUIRE_SWEEP_MS) return 0;
    this.lastAcquireSweep = now;
    return this.sweep();
  }

  /** Expires every active lease whose time ran out; returns how many. */
  async sweep(): Promise<number> {
    const now = this.k.clock.now();
    // No live lease ends later than now + its ttl (a heartbeat sets exactly that): one that does
    // was set before the wall clock stepped back, and would outlive its holder by the step (an
    // hour back, a crashed worker's step waited an hour). Brought back to now + ttl, looked for
    // on the first sweep (the clock may have moved while the kernel was down) and whenever the
    // clock reads earlier than at the last sweep.
    if (!(now >= this.lastSweepAt)) {
      await this.k.db.run("UPDATE leases SET expires_at = ? + ttl_seconds * 1000 WHERE status = 'active' AND expires_at > ? + ttl_seconds * 1000", [now, now]);
      this.unexpirable.clear(); // their retry times are on the clock as it read before: tried again now
    }
    this.lastSweepAt = now;
    // Leases that failed to expire sort first: selected past them, and tried again later.
    const due = (await this.k.db.all<LeaseRow>("SELECT * FROM leases WHERE status = 'active' AND expires_at <= ? ORDER BY expires_at LIMIT ?", [now, SWEEP_BATCH + this.unexpirable.size])).map((r) => normalizeLease(r)!);
    // Held back leases sort first, so one not among these is no longer active: forgotten.
    const seen = new Set(due.map((l) => l.lease_id));
    for (const id of this.unexpirable.keys()) if (!seen.has(id)) this.unexpirable.delete(id);
    let n = 0;
    for (const lease of due) {
      const retryAt = this.unexpirable.get(lease.lease_id);
      if (retryAt !== undefined && now < retryAt) continue;
      try {
        if (await this.expire(lease)) n++;
        this.unexpirable.delete(lease.lease_id);
      } catch (err) {
        // One lease that cannot be expired (a damaged run, a store fault) must not hold up
        // the others, nor fill the log every sweep: tried again, and logged, once a minute.
        this.unexpirable.set(lease.lease_id, now + UNEXPIRABLE_RETRY_MS);
        this.k.logger.error('cannot expire a lease; the sweep goes on and tries it again in a minute', { lease_id: lease.lease_id, run_id: lease.run_id, err: (err as Error)?.message ?? String(err) });
      }
    }
    return n;
  }

  /** Expires one lease (decisions §6): the step is ready again with attempt + 1. */
  async expire(lease: LeaseRow): Promise<boolean> {
    const model = await this.e.model(lease.run_id);
    // A compensation retries with its step's policy. Bundles are immutable, so a step the
    // bundle lacks is a bug: say so, and expire the lease under the default policy rather than
    // leave it (and every lease after it in this sweep) active forever.
    let maxAttempts = retryPolicy(undefined).max_attempts;
    try {
      maxAttempts = retryPolicy((await this.e.stepDefOf(model, lease.step)).def.retry).max_attempts;
    } catch (err) {
      this.k.logger.error('expiring a lease whose step the bundle lacks', { lease_id: lease.lease_id, run_id: lease.run_id, step: lease.step, err: (err as Error).message });
    }
    const expired = await this.e.mutate(lease.run_id, async (w) => {
      const cur = normalizeLease(await w.tx.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [lease.lease_id]));
      if (!cur || cur.status !== 'active' || cur.expires_at > this.k.clock.now()) return false;
      await this.endLease(w, lease.lease_id, 'expired');
      const s = w.model.steps[lease.step];
      if (!s || s.lease_id !== lease.lease_id) return true; // the run moved on without it
      const isComp = lease.kind === 'compensation';
      const attempt = isComp ? s.compensation_attempt : s.attempt;
      const next = attempt < maxAttempts ? attempt + 1 : null;
      const p: LeaseExpiredPayload = { lease_id: lease.lease_id, step: lease.step, kind: lease.kind as LeaseKind, attempt, next_attempt: next, reason: 'ttl' };
      await w.append({ kind: 'lease.expired', payload: p, actor: KERNEL_ACTOR });
      if (next === null) {
        const error = { code: 'lease_expired', message: `lease ${lease.lease_id} expired on attempt ${attempt} of ${maxAttempts}` };
        // The lease whose expiry ended the last attempt, named as a failed lease is.
        if (isComp) await this.failCompensation(w, lease.step, attempt, lease.lease_id, error);
        else await this.quarantine(w, lease.step, attempt, 'max_attempts', lease.lease_id);
      }
      return true;
    });
    if (expired) this.k.metrics.leasesExpired.inc();
    return expired;
  }

  /**
   * A lease handed out by a long poll whose client was gone before the response reached it
   * (the worker died while waiting): released at once, and the step is ready again with the
   * same attempt, so it neither waits out the ttl nor spends an attempt. Recorded as
   * `lease.expired` with `reason: "undelivered"`; not counted in svc_leases_expired_total.
   * Returns false when the lease was no longer active.
   */
  async releaseUndelivered(leaseId: string): Promise<boolean> {
    const lease = normalizeLease(await this.k.db.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [leaseId]));
    if (!lease || lease.status !== 'active') return false;
    return this.e.mutate(lease.run_id, async (w) => {
      const cur = normalizeLease(await w.tx.get<LeaseRow>('SELECT * FROM leases WHERE lease_id = ?', [leaseId]));
      if (!cur || cur.status !== 'active') return false;
      await this.endLease(w, leaseId, 'released');
      const s = w.model.steps[lease.step];
      if (!s || s.lease_id !== leaseId) return true;
      const attempt = lease.kind === 'compensation' ? s.compensation_attempt : s.attempt;
      const p: LeaseExpiredPayload = { lease_id: leaseId, step: lease.step, kind: lease.kind as LeaseKind, attempt, next_attempt: attempt, reason: 'undelivered' };
      await w.append({ kind: 'lease.expired', payload: p, actor: KERNEL_ACTOR });
      return true;
    });
  }

  // ------------------------------------------------------------------ event sequences

  private async scheduleRetry(w: RunWriter, step: string, kind: LeaseKind, attempt: number, delayMs: number): Promise<void> {
    const p: StepRetryScheduledPayload = { step, kind, attempt, delay_ms: delayMs, ready_at: isoTime(this.k.clock.now() + delayMs) };
    await w.append({ kind: 'step.retry_scheduled', payload: p, actor: KERNEL_ACTOR });
  }

  /** `leaseId` is the lease whose failure or expiry parks the run, null when the kernel failed the step. */
  private async quarantine(w: RunWriter, step: string, attempt: number, reason: StepQuarantinedPayload['reason'], leaseId: string | null): Promise<void> {
    const q: StepQuarantinedPayload = { step, attempt, reason };
    const parked: RunParkedPayload = { reason: 'quarantine', step, approval_id: null, lease_id: leaseId };
    await w.append({ kind: 'step.quarantined', payload: q, actor: KERNEL_ACTOR }, { kind: 'run.parked', payload: parked, actor: KERNEL_ACTOR });
  }

  /** `budget.exceeded` then `run.failed` with budget_exhausted (decisions §8). */
  async failForBudget(w: RunWriter, step: string | null, reserved: Spend): Promise<void> {
    const m = w.model;
    const exceeded: BudgetExceededPayload = { step, usage: m.usage, budget: m.budget, reserved };
    const failed: RunFailedPayload = {
      error: { code: 'budget_exhausted', message: budgetMessage(m.usage, m.budget, reserved) },
      step,
    };
    const cancelled = await cancelPendingApprovals(w.tx, w.row.run_id, isoTime(this.k.clock.now()));
    if (cancelled.length > 0) failed.cancelled_approval_ids = cancelled;
    await w.append({ kind: 'budget.exceeded', payload: exceeded, actor: KERNEL_ACTOR }, { kind: 'run.failed', payload: failed, actor: KERNEL_ACTOR });
  }

  private async failCompensation(w: RunWriter, step: string, attempt: number, leaseId: string | null, error: ErrorInfo): Promise<void> {
    const p: CompensationFailedPayload = { step, attempt, lease_id: leaseId, error };
    await w.append({ kind: 'compensation.failed', payload: p, actor: KERNEL_ACTOR });
    await this.abandonedIfDone(w);
  }

  /** `run.abandoned` once the last compensation ended. */
  async abandonedIfDone(w: RunWriter): Promise<void> {
    const m = w.model;
    if (m.state !== 'abandoning' || m.compensations.length > 0) return;
    await w.append({ kind: 'run.abandoned', payload: { reason: m.abandon_reason ?? '', compensated: m.compensated, failed: m.compensation_failures }, actor: KERNEL_ACTOR });
  }
}


/** Why a run failed `budget_exhausted`, naming the reservation when derived remits hold one. */
function budgetMessage(usage: Spend, budget: Spend, reserved: Spend): string {
  if (reserved.tokens === 0 && reserved.usd === 0) return `usage ${JSON.stringify(usage)} exceeds the remit's spend ${JSON.stringify(budget)}`;
  const left = spendLeft(budget, reserved);
  return `usage ${JSON.stringify(usage)} exceeds ${JSON.stringify(left)}: the remit's spend ${JSON.stringify(budget)} less ${JSON.stringify(reserved)} reserved by derived remits`;
}
