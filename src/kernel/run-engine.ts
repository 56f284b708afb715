/**
 * The run engine (interface 2.4–2.8, 3, 4.1; decisions §6–§8): runs, their event logs, leases,
 * actions and approvals, resume and abandon, replay. Every state change goes through `mutate`:
 * one transaction that appends the events, folds them with the reducer and stores the new state
 * and signed head together. After the commit, metrics move and waiting lease requests wake.
 */
import type { SqlDb, TxOptions } from '../store/sql-db.js';
import { isoTime } from '../clock.js';
import { SvcError, notFound } from '../errors.js';
import { signHead } from '../events/event-hash.js';
import { ALL_EVENT_KINDS, isExternalKind } from '../events/kinds.js';
import { redactEventPayload } from '../events/redact-payload.js';
import type { CompensationRetryRequestedPayload, RunAbandonRequestedPayload, RunCreatedPayload, RunResumedPayload } from '../events/payloads.js';
import { newId } from '../ids.js';
import { globalRedactor } from '../log/logger.js';
import { sameRequester, type Bundle, type RemitPayload, type Requester, type RunEvent, type RunState, type RunStateObject, type Spend, type StepDef, type StoredBundle, type WorkflowDef } from '../types.js';
import { ApprovalService, cancelledApprovalIds, cancelPendingApprovals } from './approvals.js';
import { ActionService } from './actions.js';
import { pageNewestFirst } from './cursor.js';
import { eventRows } from './event-pages.js';
import type { Kernel } from './kernel.js';
import { LeaseService } from './leases.js';
import { WorkNotifier } from './notifier.js';
import { roundUsd, spendLeft } from '../spend.js';
import { compensationsFor, initialModel, isTerminal, workItem, type RunModel } from './reducer.js';
import { replayRun, type ReplayReport } from './replay.js';
import { insertEvent, KERNEL_ACTOR, loadRunRemitId, loadRunRow, loadWriterRow, modelColumns, parseEventRow, runStateOf, RunWriter, sealEvent, type EventRow, type RunRow, type WriterDeps } from './run-store.js';
import { schemaCheck } from './schema-check.js';
import { Sweeper } from './sweeper.js';
import { calledWrite, uncompensatedWrites, type UncompensatedWrite } from './uncompensated-writes.js';
import { unreportedUsage } from './unreported-usage.js';

/** Every run state (decisions §6), for the svc_runs gauge and list filters. */
export const RUN_STATES: readonly RunState[] = ['running', 'parked', 'completed', 'failed', 'abandoning', 'abandoned'];

/** Most events a lease context's `prior_events` carries: the last of the step's (docs/design.md "Lease context"). */
export const PRIOR_EVENTS_MAX = 1000;

/**
 * GET /v1/runs stops a page before the run states in it pass this many bytes (stored), so a
 * page holds fewer than `limit` runs, with `next` set, when their inputs and outputs are large
 * (svcd(8)). One run larger than this still comes, alone on its page.
 */
export const RUN_PAGE_BYTES = 8 * 1024 * 1024;

/** POST /v1/runs body (interface 2.4). */
export interface CreateRunBody {
  bundle_id: string;
  workflow: string;
  input?: unknown;
  remit_id: string;
  /** Defaults to the remit's requester; when given it must equal it (422 requester_mismatch). */
  requested_by?: Requester;
}

export interface RunListQuery {
  state?: RunState;
  department?: string;
  /** Page size. (Default: 50, max 500) */
  limit?: number;
  /** Opaque cursor from a previous page's `next`. */
  after?: string;
}

export interface RunEngineOptions {
  /** Milliseconds between sweeps for expired leases; 0: no timer. (Default: 500) */
  sweepIntervalMs?: number;
  /** Source of retry jitter, [0, 1). (Default: Math.random) */
  random?: () => number;
}

/** A human or service that asked for something, as recorded on events. */
export type Actor = { id: string; role: string } | Record<string, unknown> | string | null;

/** A run's model as read before a transaction: the text and what it parsed to. */
export interface ModelRead {
  text: string;
  model: RunModel;
}

export interface MutateOptions extends TxOptions {
  /**
   * The model the caller read before the transaction: when the row still holds the same text,
   * the writer starts from it instead of parsing the row again. It must not have been changed.
   */
  read?: ModelRead;
}

export class RunEngine {
  readonly notifier = new WorkNotifier();
  readonly leases: LeaseService;
  readonly actions: ActionService;
  readonly approvals: ApprovalService;
  random: () => number;
  private readonly sweeper: Sweeper;
  private started = false;
  /** Set on shutdown: long polls return at once. */
  stopping = false;

  constructor(
    readonly k: Kernel,
    opts: RunEngineOptions = {},
  ) {
    this.random = opts.random ?? Math.random;
    this.leases = new LeaseService(this);
    this.actions = new ActionService(this);
    this.approvals = new ApprovalService(this);
    this.sweeper = new Sweeper(() => this.leases.sweep(), opts.sweepIntervalMs ?? 500, k.logger);
  }

  /** Loads the gauges from the store and starts the lease sweeper. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    const rows = await this.k.db.all<{ state: string; n: number }>('SELECT state, COUNT(*) AS n FROM runs GROUP BY state');
    for (const s of RUN_STATES) this.k.metrics.runs.set({ state: s }, Number(rows.find((r) => r.state === s)?.n ?? 0));
    // Every series of interface 4.1 is exposed from the start, at 0 (a scrape before the first
    // run still shows svc_events_total and svc_usage_usd_total samples).
    for (const kind of ALL_EVENT_KINDS) this.k.metrics.events.inc({ kind }, 0);
    const departments = await this.k.db.all<{ department: string }>('SELECT DISTINCT department FROM runs');
    for (const d of departments) this.k.metrics.usageUsd.inc({ department: d.department }, 0);
    await this.approvals.refreshGauge();
    this.sweeper.start();
  }

  /** Answers every waiting long poll now and every later one at once (a drain has begun). */
  releaseWaiters(): void {
    this.stopping = true;
    this.notifier.wakeAll();
  }

  /** Stops the sweeper and releases every waiting long poll. */
  async stop(): Promise<void> {
    this.releaseWaiters();
    await this.sweeper.stop();
    this.started = false;
  }

  get writerDeps(): WriterDeps {
    return { clock: this.k.clock, keys: this.k.keys, redactor: globalRedactor };
  }

  // ------------------------------------------------------------------ the write path

  /**
   * Runs `fn` on one run inside a transaction; everything `fn` appends commits with the new
   * state and signed head, or nothing does. `fn` must only use `w.tx` for the store.
   */
  async mutate<T>(runId: string, fn: (w: RunWriter) => Promise<T>, opts: MutateOptions = {}): Promise<T> {
    const { read, ...txOpts } = opts;
    let writer: RunWriter | null = null;
    // Wake long-polls as soon as the change commits: a woken worker's lease is acknowledged
    // only after its own durable commit, whose fsync covers this transaction too.
    const wake = () => writer && this.wakeFor(writer.model);
    const { result } = await this.k.db.tx(async (tx) => {
      const row = await loadWriterRow(tx, runId);
      if (!row) throw notFound('run', runId);
      const w = new RunWriter(tx, row, this.writerDeps, read);
      const result = await fn(w);
      await w.flush();
      writer = w;
      return { result };
    }, { ...txOpts, onCommitted: wake });
    const w = writer as RunWriter | null;
    if (w) this.afterCommit(w.before, w.model, w.appended, false);
    return result;
  }

  /** Metrics and wake-ups for a committed change. */
  afterCommit(before: RunModel | null, after: RunModel, events: readonly RunEvent[], wake = true): void {
    for (const e of events) {
      this.k.metrics.events.inc({ kind: e.kind });
      const cancelled = cancelledApprovalIds(e);
      if (cancelled.length > 0) this.k.metrics.approvalsPending.dec(cancelled.length);
      this.logRunEvent(after, e);
    }
    if (!before || before.state !== after.state) {
      if (before) this.k.metrics.runs.dec({ state: before.state });
      this.k.metrics.runs.inc({ state: after.state });
    }
    if (wake) this.wakeFor(after);
  }

  /**
   * The lines an on-call reads in svcd's log (svcd(8) STARTUP AND SIGNALS, "what the log
   * says of runs"): a run that needs someone (parked for a quarantine or a quarantined
   * connector: warn; for a human: info), one that failed (warn), and what operators did
   * (resume, abandon, a retry of compensations). Ids, step, codes and counts only: inputs, outputs, messages and
   * reasons stay in the run's log (svc run show, svc run events).
   */
  private logRunEvent(run: RunModel, e: RunEvent): void {
    const p = e.payload;
    // The actor's names only: an actor object keeps whatever other members its caller sent
    // (run-routes.ts recordedActor), which are the caller's text, not ids.
    const who = (a: RunEvent['actor']): string | null => {
      if (typeof a === 'string') return a;
      if (a === null || typeof a !== 'object') return null;
      const o = a as Record<string, unknown>;
      if (typeof o.id === 'string') return typeof o.role === 'string' ? `${o.id}:${o.role}` : o.id;
      return typeof o.worker_id === 'string' ? `worker:${o.worker_id}` : null;
    };
    const log = this.k.logger;
    switch (e.kind) {
      case 'run.parked': {
        const step = typeof p.step === 'string' ? p.step : null;
        const fields = { run_id: run.run_id, step, reason: p.reason, approval_id: p.approval_id ?? null, error: step ? run.steps[step]?.error?.code ?? null : null };
        if (p.reason === 'human') log.info('run parked', fields);
        else log.warn('run parked', fields);
        return;
      }
      case 'run.failed':
        log.warn('run failed', { run_id: run.run_id, step: p.step ?? null, error: (p.error as { code?: unknown } | undefined)?.code ?? null });
        return;
      case 'run.resumed':
        if (p.via === 'resume') log.info('run resumed', { run_id: run.run_id, step: p.step ?? null, reason: p.reason, by: who(e.actor) });
        return;
      case 'run.abandon_requested':
        log.info('run abandon requested', {
          run_id: run.run_id,
          by: who(e.actor),
          from_state: p.from_state,
          compensations: Array.isArray(p.compensations) ? p.compensations.length : 0,
          uncompensated_writes: p.uncompensated_writes_total ?? (Array.isArray(p.uncompensated_writes) ? p.uncompensated_writes.length : 0),
        });
        return;
      case 'compensation.retry_requested':
        log.info('run compensations retried', { run_id: run.run_id, by: who(e.actor), from_state: p.from_state, compensations: Array.isArray(p.steps) ? p.steps.length : 0 });
        return;
      case 'run.abandoned': {
        const failed = Array.isArray(p.failed) ? p.failed.length : 0;
        const fields = { run_id: run.run_id, compensated: Array.isArray(p.compensated) ? p.compensated.length : 0, compensations_failed: failed };
        if (failed > 0) log.warn('run abandoned', fields);
        else log.info('run abandoned', fields);
        return;
      }
    }
  }

  /** Wakes long-polling lease requests for the work this run now offers, if any. */
  private wakeFor(model: RunModel): void {
    const work = workItem(model);
    if (work) this.notifier.notify(work.kind);
  }

  // ------------------------------------------------------------------ runs

  /** POST /v1/runs (interface 2.4, 4.1 rules 2 and 5; decisions §3, §6, 8.3). */
  async create(body: CreateRunBody): Promise<{ run_id: string; state: RunState }> {
    const stored = await this.k.bundles.getTrusted(body.bundle_id);
    const bundle = stored.bundle;
    const wf = workflowOf(bundle, body.workflow);
    if (!wf) {
      // An unknown workflow is an unknown id like an unknown bundle_id (decisions §10: 404).
      throw new SvcError('not_found', `bundle ${stored.name}@${stored.version} has no workflow ${body.workflow}`, {
        resource: 'workflow',
        id: body.workflow,
        bundle_id: stored.bundle_id,
        workflows: Object.keys(bundle.workflows ?? {}),
      });
    }
    const input = body.input === undefined ? null : body.input;
    const problems = schemaCheck(`${stored.bundle_id}#input#${body.workflow}`, wf.input_schema)(input);
    if (problems.length > 0) {
      throw new SvcError('input_invalid', `input does not match the input schema of workflow ${body.workflow}: ${problems[0]!.path || '/'} ${problems[0]!.message}`, {
        path: problems[0]!.path, // the first problem's pointer, as request_invalid gives it (D §10)
        errors: problems,
      });
    }
    const remit = await this.k.remits.get(body.remit_id);
    if (remit.run_id) throw new SvcError('remit_bound', `remit ${body.remit_id} is already bound to run ${remit.run_id} (a remit serves one run: mint or derive another for this one)`, { remit_id: body.remit_id, run_id: remit.run_id });
    const requestedBy = body.requested_by ?? remit.requested_by;
    if (!sameRequester(requestedBy, remit.requested_by)) {
      throw new SvcError('requester_mismatch', "requested_by differs from the remit's requester", { expected: remit.requested_by, given: requestedBy });
    }
    const policies = await this.k.policies.pin(remit.policy_set);
    const parentRunId = remit.parent_id ? ((await this.k.remits.get(remit.parent_id)).run_id ?? null) : null;
    const now = this.k.clock.now();
    const runId = newId('run', now);
    const payload: RunCreatedPayload = {
      run_id: runId,
      bundle_id: stored.bundle_id,
      bundle: { name: stored.name, version: stored.version },
      workflow: body.workflow,
      department: wf.department ?? bundle.department ?? 'default',
      input,
      requested_by: { id: requestedBy.id, role: requestedBy.role, manager: requestedBy.manager },
      remit_id: body.remit_id,
      parent_run_id: parentRunId,
      policies,
      budget: { tokens: remit.spend.tokens, usd: remit.spend.usd },
      steps: wf.steps.map((s) => ({ id: s.id, kind: s.kind, compensate: Boolean(s.compensate) })),
    };
    // Sealed and stored like every append (RunWriter.append), before the run row exists.
    const redactor = this.writerDeps.redactor;
    const ev: RunEvent = {
      seq: 1,
      hash: '',
      prev_hash: '',
      kind: 'run.created',
      payload: redactEventPayload(redactor, 'run.created', payload as unknown as Record<string, unknown>),
      actor: redactor.redactValue({ id: requestedBy.id, role: requestedBy.role }),
      at: isoTime(now),
    };
    const texts = sealEvent(runId, ev);
    const model = initialModel(ev);
    let created: RunWriter | null = null;
    const { writer } = await this.k.db.tx(async (tx) => {
      const bound = await this.k.remits.bindToRun(tx, body.remit_id, runId);
      const head = { run_id: runId, seq: 1, hash: ev.hash };
      const row: RunRow = {
        run_id: runId,
        ...modelColumns(model),
        remit_id: body.remit_id,
        parent_run_id: parentRunId,
        remit_token: bound.token,
        remit_payload: bound.payloadText,
        model: JSON.stringify(model),
        last_seq: 1,
        head_hash: ev.hash,
        head_signature: signHead((m) => this.k.keys.sign(m), head),
        head_key_id: this.k.keys.keyId,
        created_at: ev.at,
        updated_at: ev.at,
      };
      const cols = Object.keys(row);
      await tx.run(`INSERT INTO runs (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, Object.values(row) as never);
      await insertEvent(tx, runId, ev, texts);
      // The writer starts from the model the row was just written from, not a parse of its text.
      const w = new RunWriter(tx, row, this.writerDeps, { text: row.model, model });
      // A workflow without steps is complete the moment it starts.
      if (model.current_step === null) await w.append({ kind: 'run.completed', payload: { output: null }, actor: KERNEL_ACTOR });
      await w.flush();
      created = w;
      return { writer: w };
    }, { onCommitted: () => created && this.wakeFor(created.model) });
    this.afterCommit(null, writer.model, [ev, ...writer.appended], false);
    this.k.metrics.usageUsd.inc({ department: model.department }, 0); // the series exists from the run's start
    return { run_id: runId, state: writer.model.state };
  }

  /** GET /v1/runs/{id}: the state object of decisions §6. */
  async get(runId: string): Promise<RunStateObject & { parent_run_id: string | null }> {
    const row = await loadRunRow(this.k.db, runId);
    if (!row) throw notFound('run', runId);
    return runStateOf(row);
  }

  /** The reducer state of a run (internal fields included); only that column is read. */
  async model(runId: string): Promise<RunModel> {
    return (await this.modelRead(runId)).model;
  }

  /** `model` with the text it was parsed from, which `mutate` can reuse (MutateOptions.read). */
  async modelRead(runId: string): Promise<ModelRead> {
    const row = await this.k.db.get<{ model: string }>('SELECT model FROM runs WHERE run_id = ?', [runId]);
    if (!row) throw notFound('run', runId);
    return { text: row.model, model: JSON.parse(row.model) as RunModel };
  }

  /** The reducer state of a run and the run-bound remit's payload. */
  async modelAndRemit(runId: string): Promise<{ model: RunModel; remit: RemitPayload }> {
    const row = await this.k.db.get<{ model: string; remit_payload: string }>('SELECT model, remit_payload FROM runs WHERE run_id = ?', [runId]);
    if (!row) throw notFound('run', runId);
    return { model: JSON.parse(row.model) as RunModel, remit: JSON.parse(row.remit_payload) as RemitPayload };
  }

  /** GET /v1/runs: newest first, filtered, cursor-paginated (decisions §6). */
  async list(q: RunListQuery): Promise<{ runs: Array<RunStateObject & { parent_run_id: string | null }>; next: string | null }> {
    const { page, next } = await pageNewestFirst<RunRow>(this.k.db, {
      table: 'runs',
      idColumn: 'run_id',
      filters: { state: q.state, department: q.department },
      after: q.after,
      limit: q.limit ?? 50,
      bytes: { column: 'model', max: RUN_PAGE_BYTES },
    });
    return { runs: page.map(runStateOf), next };
  }

  /** GET /v1/health run counts. */
  async counts(): Promise<{ running: number; parked: number }> {
    const rows = await this.k.db.all<{ state: string; n: number }>("SELECT state, COUNT(*) AS n FROM runs WHERE state IN ('running', 'parked') GROUP BY state");
    return { running: Number(rows.find((r) => r.state === 'running')?.n ?? 0), parked: Number(rows.find((r) => r.state === 'parked')?.n ?? 0) };
  }

  // ------------------------------------------------------------------ events

  /**
   * GET /v1/runs/{id}/events (decisions §7): `limit` default 100, max 1000; a page also stops at
   * EVENT_PAGE_BYTES (src/kernel/event-pages.ts), and `next_seq` then says where it stopped.
   */
  async events(runId: string, fromSeq = 1, limit = 100): Promise<{ events: RunEvent[]; next_seq: number }> {
    const row = await this.k.db.get<{ run_id: string }>('SELECT run_id FROM runs WHERE run_id = ?', [runId]);
    if (!row) throw notFound('run', runId);
    const rows = await eventRows(this.k.db, runId, { from: fromSeq, limit, keep: 'oldest' });
    const events = rows.map(safeParseEventRow);
    return { events, next_seq: events.length ? events[events.length - 1]!.seq + 1 : fromSeq };
  }

  /** Events with fromSeq <= seq < toSeq, the most recent `max` of them that fit EVENT_PAGE_BYTES. */
  async eventRange(runId: string, fromSeq: number, toSeq: number, max = PRIOR_EVENTS_MAX): Promise<RunEvent[]> {
    if (fromSeq >= toSeq) return []; // a step's first lease: nothing before it (no query)
    const rows = await eventRows(this.k.db, runId, { from: fromSeq, to: toSeq, limit: max, keep: 'newest' });
    return rows.map(safeParseEventRow);
  }

  /**
   * Appends an external event (decisions §7) without a credential check: for in-process
   * callers such as the gateway. 422 event_kind_not_external for a kernel kind.
   */
  async appendExternalEvent(runId: string, ev: { kind: string; payload: Record<string, unknown>; actor: unknown }): Promise<{ seq: number; hash: string }> {
    if (!isExternalKind(ev.kind)) {
      throw new SvcError('event_kind_not_external', `event kind ${ev.kind} may not be posted; external kinds are note, tool.called, tool.refused, model.called`, { kind: ev.kind });
    }
    const kind = ev.kind;
    // External kinds record what happened elsewhere (notes, model and tool calls, refusals)
    // and change no run state, so they need not wait for the disk: a power loss within the
    // 100 ms sync window loses at most an audit line or makes a model call run again, never
    // a side effect twice (the gateway's idempotency claims for writes are durable).
    return this.mutate(
      runId,
      async (w) => {
        const [e] = await w.append({ kind, payload: ev.payload ?? {}, actor: (ev.actor ?? null) as RunEvent['actor'] });
        // A write recorded once the run was being abandoned is one no compensation and no
        // abandon answer knows of (a worker that had not heard yet, a token used directly, or
        // the gateway's outbox delivering a write made before, late): an operator has to hear of
        // it. A step being compensated writes as its compensation: that is the abandon at work.
        const step = typeof ev.payload?.step === 'string' ? w.model.steps[ev.payload.step] : undefined;
        const compensating = step?.state === 'compensating';
        if (kind === 'tool.called' && (w.model.state === 'abandoning' || w.model.state === 'abandoned') && !compensating && calledWrite(ev.payload)) {
          this.k.logger.warn('a write was recorded on a run after its abandon; check it by hand', { run_id: runId, seq: e!.seq, tool: ev.payload.tool, step: ev.payload.step, outcome: ev.payload.outcome, queued_at: ev.payload.queued_at ?? null });
        }
        return { seq: e!.seq, hash: e!.hash };
      },
      { durable: false },
    );
  }

  /**
   * POST /v1/runs/{id}/events: an external event with X-Svc-Lease (an active lease of this
   * run) or X-Svc-Remit (a valid token of this run's remit). `tool.refused` may come with the
   * kernel bearer alone (decisions §7: the gateway's remit token may be the bad one): `bearer`
   * says the caller proved it, by the listener's token or by being the in-process gateway.
   */
  async postExternalEvent(
    runId: string,
    ev: { kind: string; payload: Record<string, unknown>; actor: unknown },
    cred: { lease?: string; remit?: string; bearer?: boolean },
  ): Promise<{ seq: number; hash: string }> {
    const remitId = await loadRunRemitId(this.k.db, runId);
    if (remitId === undefined) throw notFound('run', runId);
    // Each credential given must check out (decisions §10: a bad one is 401), also when the
    // other one would have done.
    if (cred.lease !== undefined) {
      const ok = await this.leases.isActiveFor(cred.lease, runId);
      if (!ok) throw new SvcError('credential_invalid', 'X-Svc-Lease is not an active lease of this run', { header: 'X-Svc-Lease' });
    }
    if (cred.remit !== undefined) {
      const res = this.k.remits.verify(cred.remit, { run_id: runId });
      if (!res.ok) throw new SvcError('credential_invalid', `X-Svc-Remit is refused: ${res.reason}`, { header: 'X-Svc-Remit', reason: res.reason });
      if (res.payload.rid !== remitId) throw new SvcError('credential_invalid', "X-Svc-Remit is not this run's remit", { header: 'X-Svc-Remit', reason: 'remit_run_mismatch' });
    }
    if (cred.lease === undefined && cred.remit === undefined && (ev.kind !== 'tool.refused' || cred.bearer !== true)) {
      throw new SvcError('credential_required', 'posting events needs an X-Svc-Lease or X-Svc-Remit header', {});
    }
    return this.appendExternalEvent(runId, ev);
  }

  // ------------------------------------------------------------------ resume and abandon

  /** POST /v1/runs/{id}/resume (decisions §6): parked runs only, else 409 invalid_state. */
  async resume(runId: string, actor: Actor): Promise<{ run_id: string; state: RunState }> {
    return this.mutate(runId, async (w) => {
      const m = w.model;
      if (m.state !== 'parked' || !m.parked_reason) {
        throw new SvcError('invalid_state', `run ${runId} is ${m.state}; only a parked run can be resumed`, { run_id: runId, state: m.state });
      }
      const payload: RunResumedPayload = { reason: m.parked_reason, step: m.current_step, via: 'resume', approval_id: null };
      await w.append({ kind: 'run.resumed', payload, actor: actor as RunEvent['actor'] });
      return { run_id: runId, state: w.model.state };
    });
  }

  /**
   * POST /v1/runs/{id}/abandon (decisions §6): from any non-terminal state and from failed.
   * Active leases are released, pending approvals cancelled, and the compensations of
   * completed steps scheduled last first; with none the run is abandoned at once.
   */
  async abandon(runId: string, reason: string, actor: Actor): Promise<{ compensations_scheduled: number; state: RunState; uncompensated: { named: UncompensatedWrite[]; total: number } }> {
    const now = this.k.clock.now();
    const result = await this.mutate(runId, async (w) => {
      const m = w.model;
      if (m.state === 'abandoning') {
        // Asked again while compensations run: the same answer, as the first abandon recorded
        // it (not the compensations still queued, which shrink as they end).
        const first = await recordedAbandon(w.tx, runId);
        return { compensations_scheduled: first.compensations_scheduled, state: m.state, uncompensated: first.uncompensated, chargedUsd: 0, department: m.department };
      }
      if (isTerminal(m.state)) {
        throw new SvcError('invalid_state', `run ${runId} is ${m.state}; it can no longer be abandoned`, { run_id: runId, state: m.state });
      }
      const compensations = compensationsFor(m);
      const active = await w.tx.all<{ lease_id: string }>("SELECT lease_id FROM leases WHERE run_id = ? AND status = 'active'", [runId]);
      await w.tx.run("UPDATE leases SET status = 'released', ended_at = ? WHERE run_id = ? AND status = 'active'", [isoTime(now), runId]);
      const cancelled = await cancelPendingApprovals(w.tx, runId, isoTime(now));
      const payload: RunAbandonRequestedPayload = {
        reason,
        from_state: m.state,
        compensations,
        released_lease_id: active[0]?.lease_id ?? null,
        cancelled_approval_ids: cancelled,
      };
      const logged = await stepEvents(w.tx, runId);
      // Model calls of a step that parked or lost its lease are reported by its next lease;
      // an abandoned run has none, so abandon charges them (docs/design.md, Spend).
      const unreported = unreportedUsage(logged);
      if (unreported.tokens > 0 || unreported.usd > 0) payload.unreported_usage = unreported;
      const uncompensated = uncompensatedWrites(logged);
      if (uncompensated.total > 0) payload.uncompensated_writes = uncompensated.named;
      if (uncompensated.total > uncompensated.named.length) payload.uncompensated_writes_total = uncompensated.total;
      await w.append({ kind: 'run.abandon_requested', payload, actor: actor as RunEvent['actor'] });
      if (compensations.length === 0) {
        await w.append({ kind: 'run.abandoned', payload: { reason, compensated: [], failed: [] }, actor: KERNEL_ACTOR });
      }
      return { compensations_scheduled: compensations.length, state: w.model.state, uncompensated, chargedUsd: unreported.usd, department: m.department };
    });
    if (result.chargedUsd > 0) this.k.metrics.usageUsd.inc({ department: result.department }, result.chargedUsd);
    return { compensations_scheduled: result.compensations_scheduled, state: result.state, uncompensated: result.uncompensated };
  }

  /**
   * POST /v1/runs/{id}/compensations/retry (docs/design.md "Retrying compensations"): the
   * compensations of an abandoned (or still abandoning) run that failed for good run again,
   * each from attempt 1, after any still queued; the run is `abandoning` until they end. Asked
   * again while that retry is still running, the same answer and nothing appended (a double
   * submission); with nothing failed to retry, 409 invalid_state saying why.
   */
  async retryCompensations(runId: string, reason: string | null, actor: Actor): Promise<CompensationRetryAnswer> {
    return this.mutate(runId, async (w) => {
      const m = w.model;
      const abandonedOrAbandoning = m.state === 'abandoned' || m.state === 'abandoning';
      const failed = m.compensation_failures;
      if (abandonedOrAbandoning && failed.length > 0) {
        const payload: CompensationRetryRequestedPayload = { reason, steps: [...failed], from_state: m.state as 'abandoned' | 'abandoning' };
        await w.append({ kind: 'compensation.retry_requested', payload, actor: actor as RunEvent['actor'] });
        return { run_id: runId, state: w.model.state, compensations_scheduled: payload.steps.length, steps: payload.steps };
      }
      if (m.state === 'abandoning') {
        const pending = await retryInProgress(w.tx, runId, m);
        if (pending) return { run_id: runId, state: m.state, compensations_scheduled: pending.length, steps: pending };
      }
      throw new SvcError('invalid_state', nothingToRetry(runId, m), { run_id: runId, state: m.state });
    });
  }

  // ------------------------------------------------------------------ replay

  /** POST /v1/runs/{id}/replay (decisions §7). */
  replay(runId: string): Promise<ReplayReport> {
    return replayRun(this, runId);
  }

  // ------------------------------------------------------------------ helpers shared by the services

  /** The bundle of a run and the definition of one of its steps. */
  async stepDefOf(model: RunModel, stepId: string): Promise<{ stored: StoredBundle; def: StepDef }> {
    const stored = await this.k.bundles.get(model.bundle_id);
    const def = workflowOf(stored.bundle, model.workflow)?.steps.find((s) => s.id === stepId);
    if (!def) throw new SvcError('internal', `bundle ${model.bundle_id} lost step ${stepId}`, {});
    return { stored, def };
  }

  /**
   * Spend of this run's remit that derived remits reserved (decisions 8.3), read through the
   * run's transaction `tx`: a derive that commits between a read outside it and the budget
   * check inside would go unseen.
   */
  async reservedOf(remitId: string, tx: SqlDb): Promise<Spend> {
    return this.k.remits.reserved(remitId, tx);
  }
}

/** The workflow named `name`, own properties only. */
export function workflowOf(bundle: Bundle, name: string): WorkflowDef | undefined {
  return bundle.workflows && Object.hasOwn(bundle.workflows, name) ? bundle.workflows[name] : undefined;
}

/** Usage over budget, once derived remits' reservations are set aside (decisions §8, 8.3). */
export function budgetExceeded(usage: Spend, budget: Spend, reserved: Spend): boolean {
  const left = spendLeft(budget, reserved);
  return usage.tokens > left.tokens || roundUsd(usage.usd) > left.usd;
}

/** POST /v1/runs/{id}/compensations/retry's answer (202). */
export interface CompensationRetryAnswer {
  run_id: string;
  state: RunState;
  /** How many compensations the retry scheduled. */
  compensations_scheduled: number;
  /** Their steps, in the order they run. */
  steps: string[];
}

/**
 * The steps of the run's last `compensation.retry_requested` when that retry is still running
 * (one of them still queued), else null: a repeated request then gets the first one's answer.
 */
async function retryInProgress(tx: SqlDb, runId: string, m: RunModel): Promise<string[] | null> {
  const row = await tx.get<{ payload: string }>("SELECT payload FROM run_events WHERE run_id = ? AND kind = 'compensation.retry_requested' ORDER BY seq DESC LIMIT 1", [runId]);
  let steps: unknown;
  try {
    steps = row ? (JSON.parse(row.payload) as Partial<CompensationRetryRequestedPayload>).steps : undefined;
  } catch {
    return null; // edited into something else: as if there were none
  }
  if (!Array.isArray(steps) || !steps.every((s): s is string => typeof s === 'string')) return null;
  return steps.some((s) => m.compensations.includes(s)) ? steps : null;
}

/** Why a run has no compensation to retry, and what the operator can do instead. */
function nothingToRetry(runId: string, m: RunModel): string {
  const only = 'only compensations that failed for good (compensation.failed) of an abandoned or abandoning run can be retried';
  switch (m.state) {
    case 'abandoned':
      return `run ${runId} is abandoned and none of its compensations failed for good: there is nothing to retry`;
    case 'abandoning':
      return `run ${runId} is abandoning and none of its compensations has failed for good yet: they are still running (svc run show ${runId})`;
    case 'completed':
      return `run ${runId} is completed: nothing was abandoned, so there is no compensation to retry; ${only}`;
    default:
      return `run ${runId} is ${m.state}: it has not been abandoned, so no compensation has run (svc run abandon runs them); ${only}`;
  }
}

/**
 * What a run's `run.abandon_requested` scheduled and named: the compensations, and the
 * uncompensated writes (and how many there were); none when its payload was edited into
 * something else, rather than failing the abandon.
 */
async function recordedAbandon(tx: SqlDb, runId: string): Promise<{ compensations_scheduled: number; uncompensated: { named: UncompensatedWrite[]; total: number } }> {
  const row = await tx.get<{ payload: string }>("SELECT payload FROM run_events WHERE run_id = ? AND kind = 'run.abandon_requested' ORDER BY seq DESC LIMIT 1", [runId]);
  let p: Partial<RunAbandonRequestedPayload> = {};
  try {
    p = row ? (JSON.parse(row.payload) as RunAbandonRequestedPayload) : {};
  } catch {
    /* as if it named none */
  }
  const named = Array.isArray(p?.uncompensated_writes) ? p.uncompensated_writes : [];
  return {
    compensations_scheduled: Array.isArray(p?.compensations) ? p.compensations.length : 0,
    uncompensated: { named, total: typeof p?.uncompensated_writes_total === 'number' ? p.uncompensated_writes_total : named.length },
  };
}

/**
 * The events abandon reads (usage to charge, writes it will not undo), seq order, payloads
 * parsed; a payload edited into invalid JSON is skipped rather than failing the abandon.
 */
async function stepEvents(tx: SqlDb, runId: string): Promise<Array<{ seq: number; kind: string; payload: unknown }>> {
  const rows = await tx.all<{ seq: number; kind: string; payload: string }>(
    "SELECT seq, kind, payload FROM run_events WHERE run_id = ? AND kind IN ('model.called', 'step.failed', 'step.completed', 'action.decided', 'tool.called') ORDER BY seq",
    [runId],
  );
  return rows.map((r) => {
    try {
      return { seq: r.seq, kind: r.kind, payload: JSON.parse(r.payload) as unknown };
    } catch {
      return { seq: r.seq, kind: r.kind, payload: null };
    }
  });
}

/** An event row; a row edited into invalid JSON is returned with its raw text, never a 500. */
export function safeParseEventRow(r: EventRow): RunEvent {
  try {
    return parseEventRow(r);
  } catch {
    return { seq: r.seq, hash: r.hash, prev_hash: r.prev_hash, kind: r.kind, payload: { unparseable: r.payload }, actor: null, at: r.at };
  }
}
