/**
 * The inbox's data layer: polls the kernel for the pending approvals of one approver role
 * (every 2 s by default), keeps the runs they park and the focused run's recent events, and
 * turns a decision's outcome (including a lost race, 409 already_decided) into data the
 * screen can explain. React-free: the app subscribes to snapshots.
 */
import {
  ApiError,
  approverOf,
  INBOX_PAGE,
  LIST_ALL_CAP,
  type Actor,
  type Approval,
  type ApprovalDecision,
  type ApprovalsApi,
  type EventView,
  type RunView,
} from './approvals-api.js';
import { TransportError } from '../http-client.js';
import { argsText } from './format.js';

/** How the last poll went. */
export type Connection =
  | { state: 'connecting' }
  | { state: 'ok'; at: string }
  /** No answer at all: names the address and counts the attempts; polling keeps retrying. */
  | { state: 'unreachable'; url: string; error: string; attempts: number; since: string }
  /** The kernel answered with an error (a wrong token: 401 unauthorized); polling keeps retrying. */
  | { state: 'error'; url: string; code: string; message: string; attempts: number };

/** What the screen renders; replaced (never mutated) on every change. */
export interface InboxSnapshot {
  /** The role whose inbox this is, as `role:<role>`. */
  approver: string;
  /** Kernel base address. */
  url: string;
  connection: Connection;
  /** True once one list has succeeded. */
  loaded: boolean;
  /** Pending approvals for `approver`, newest first: the newest LIST_ALL_CAP of them. */
  approvals: Approval[];
  /** True when more are pending than `approvals` holds (the list stopped at its cap). */
  more?: boolean;
  /** Runs of the listed approvals, by run id (absent while loading or when unreadable). */
  runs: Readonly<Record<string, RunView>>;
  /** Recent events (oldest first) of runs that have been focused, by run id. */
  events: Readonly<Record<string, EventView[]>>;
}

/** The result of one decision, in terms the screen can explain. */
export type DecideOutcome =
  | { ok: true; approval_id: string; decision: ApprovalDecision; run_id: string; run_state: string }
  /** Someone else decided first (409); `current` is the approval as it now stands, when readable. */
  | { ok: false; approval_id: string; code: 'already_decided'; message: string; current: Approval | null }
  | { ok: false; approval_id: string; code: string; message: string; status: number | null; details: Record<string, unknown> };

export interface InboxSourceOptions {
  api: ApprovalsApi;
  /** Who decides; its role selects the inbox. */
  actor: Actor;
  /** Poll period in ms (Default: 2000). */
  intervalMs?: number;
  /** How many recent events of a run to keep (Default: 8). */
  eventsShown?: number;
  /** Parallel run reads per poll (Default: 4). */
  concurrency?: number;
  /** Runs read by one poll are handed to the screen this many at a time (Default: 50). */
  runBatch?: number;
}

type Listener = (snap: InboxSnapshot) => void;

/** Polls one approver role's pending approvals and the runs behind them. */
export class InboxSource {
  readonly approver: string;
  private snap: InboxSnapshot;
  private readonly listeners = new Set<Listener>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running = false;
  private polling: Promise<void> | null = null;
  private focused: string | null = null;
  private failures = 0;
  private readonly intervalMs: number;
  private readonly eventsShown: number;
  private readonly concurrency: number;
  private readonly runBatch: number;
  /** The run ids of the listed approvals (what `snap.approvals` references). */
  private listed = new Set<string>();
  /** Reads started so far; each read is numbered as it starts. */
  private reads = 0;
  /** By run id: the number of the read whose run (and whose events) the screen shows. */
  private readonly shownRun = new Map<string, number>();
  private readonly shownEvents = new Map<string, number>();

  constructor(private readonly opts: InboxSourceOptions) {
    this.approver = approverOf(opts.actor.role);
    this.intervalMs = opts.intervalMs ?? 2000;
    this.eventsShown = opts.eventsShown ?? 8;
    this.concurrency = opts.concurrency ?? 4;
    this.runBatch = Math.max(1, opts.runBatch ?? 50);
    this.snap = { approver: this.approver, url: opts.api.baseUrl, connection: { state: 'connecting' }, loaded: false, approvals: [], more: false, runs: {}, events: {} };
  }

  get actor(): Actor {
    return this.opts.actor;
  }

  snapshot(): InboxSnapshot {
    return this.snap;
  }

  /** Calls `fn` on every new snapshot; returns the unsubscribe function. */
  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Polls now and then every `intervalMs` after each poll ends (never two at once). */
  start(): void {
    if (this.running) return;
    this.running = true;
    void this.tick();
  }

  /** Stops polling; an in-flight poll finishes but schedules nothing. */
  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One poll now (joins the poll in flight, if any). */
  refresh(): Promise<void> {
    if (!this.polling) {
      this.polling = this.poll().finally(() => {
        this.polling = null;
      });
    }
    return this.polling;
  }

  /** The run whose details the screen shows: loaded at once if missing, then kept fresh by polls. */
  focus(runId: string | null): void {
    if (runId === this.focused) return;
    this.focused = runId;
    if (runId && (!this.snap.runs[runId] || !this.snap.events[runId])) {
      void this.readRun(runId, true)
        .then((got) => got && this.emitRuns([got]))
        .catch(() => undefined);
    }
  }

  /** Decides an approval as the actor; refreshes the list whatever the outcome. */
  async decide(approvalId: string, decision: ApprovalDecision, reason: string): Promise<DecideOutcome> {
    let outcome: DecideOutcome;
    try {
      const res = await this.opts.api.decide(approvalId, decision, this.opts.actor, reason);
      outcome = { ok: true, approval_id: approvalId, decision, run_id: res.run_id, run_state: res.run_state };
    } catch (err) {
      // Someone decided first (409 already_decided), or the run was abandoned meanwhile and
      // the approval cancelled (409 invalid_state): both are a race this approver lost.
      if (err instanceof ApiError && (err.code === 'already_decided' || (err.code === 'invalid_state' && err.details.state === 'cancelled'))) {
        let current: Approval | null = null;
        try {
          current = await this.opts.api.get(approvalId);
        } catch {
          current = null;
        }
        outcome = { ok: false, approval_id: approvalId, code: 'already_decided', message: err.message, current };
      } else if (err instanceof ApiError) {
        outcome = { ok: false, approval_id: approvalId, code: err.code, message: err.message, status: err.status, details: err.details };
      } else if (err instanceof TransportError && err.reason === 'timed out') {
        // The POST may have reached svcd and been recorded: say so, as the CLI does (svc(1)).
        const within = err.timeoutMs !== undefined ? ` within ${err.timeoutMs / 1000} s` : '';
        const message = `no answer from ${err.baseUrl}${within}; the decision may have been recorded all the same: the list shows it once svcd answers`;
        outcome = { ok: false, approval_id: approvalId, code: 'unconfirmed', message, status: null, details: {} };
      } else if (err instanceof TransportError) {
        outcome = { ok: false, approval_id: approvalId, code: 'unreachable', message: err.message, status: null, details: {} };
      } else {
        outcome = { ok: false, approval_id: approvalId, code: 'failed', message: (err as Error).message ?? String(err), status: null, details: {} };
      }
    }
    // A poll that started before the decision may hold the old list: wait it out, then poll anew.
    await this.polling;
    await this.refresh();
    return outcome;
  }

  private async tick(): Promise<void> {
    if (!this.running) return;
    await this.refresh();
    if (!this.running) return;
    this.timer = setTimeout(() => void this.tick(), this.intervalMs);
  }

  private async poll(): Promise<void> {
    let listed: { approvals: Approval[]; more: boolean };
    try {
      // Pages of svcd's largest size; whether more are pending than the cap is said on the screen.
      listed = await this.opts.api.listUpTo({ state: 'pending', approver: this.approver }, LIST_ALL_CAP, INBOX_PAGE);
    } catch (err) {
      this.failures++;
      if (err instanceof TransportError) {
        const prev = this.snap.connection;
        const since = prev.state === 'unreachable' ? prev.since : new Date().toISOString();
        this.emit({ connection: { state: 'unreachable', url: err.baseUrl, error: err.reason, attempts: this.failures, since } });
      } else if (err instanceof ApiError) {
        this.emit({ connection: { state: 'error', url: this.snap.url, code: err.code, message: err.message, attempts: this.failures } });
      } else {
        this.emit({ connection: { state: 'error', url: this.snap.url, code: 'failed', message: (err as Error).message ?? String(err), attempts: this.failures } });
      }
      return;
    }
    this.failures = 0;
    // An unchanged list keeps its objects, and the array itself: the screen then has nothing
    // to recompute over 1000 rows, and only the header's time changes.
    const approvals = reuse(this.snap.approvals, listed.approvals);
    const wanted = new Set(approvals.map((a) => a.run_id));
    const patch: Partial<InboxSnapshot> = { connection: { state: 'ok', at: new Date().toISOString() }, loaded: true };
    if (approvals !== this.snap.approvals) patch.approvals = approvals;
    if (listed.more !== this.snap.more) patch.more = listed.more;
    // Keep only the runs still referenced; read the missing ones and the focused one again.
    if (Object.keys(this.snap.runs).some((id) => !wanted.has(id))) patch.runs = pick(this.snap.runs, wanted);
    if (Object.keys(this.snap.events).some((id) => !wanted.has(id))) patch.events = pick(this.snap.events, wanted);
    this.listed = wanted;
    for (const m of [this.shownRun, this.shownEvents]) for (const id of m.keys()) if (!wanted.has(id)) m.delete(id);
    this.emit(patch);
    const toLoad = [...wanted].filter((id) => !this.snap.runs[id] || id === this.focused);
    // Handed over in batches: one snapshot (a copy of the runs and a render) per run read
    // made a first load of 1000 runs quadratic.
    let batch: Loaded[] = [];
    await mapLimit(toLoad, this.concurrency, async (id) => {
      const got = await this.readRun(id, id === this.focused).catch(() => null);
      if (!got) return;
      batch.push(got);
      if (batch.length >= this.runBatch) {
        this.emitRuns(batch);
        batch = [];
      }
    });
    this.emitRuns(batch);
  }

  /** Reads a run (and its recent events); null when svcd no longer has it. */
  private async readRun(runId: string, withEvents: boolean): Promise<Loaded | null> {
    const read = ++this.reads;
    const run = await this.opts.api.run(runId).catch((err: unknown) => {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    });
    if (!run) return null;
    let events: EventView[] | undefined;
    if (withEvents) events = await this.opts.api.recentEvents(runId, this.eventsShown, run.last_seq);
    return { runId, read, run, events };
  }

  /**
   * Hands read runs to the screen: only those whose approval is still listed, and only what
   * changed (a run read again as it was keeps its object, and no snapshot is made for it).
   */
  private emitRuns(loaded: Loaded[]): void {
    let runs: Record<string, RunView> | null = null;
    let events: Record<string, EventView[]> | null = null;
    for (const { runId, read, run, events: evs } of loaded) {
      // The approval may have left the list meanwhile; keep only what is still referenced.
      if (!this.listed.has(runId)) continue;
      // A poll's batch can be handed over after a later read of the same run (the selection
      // moved to it): what the screen shows is never replaced by an older read.
      if ((this.shownRun.get(runId) ?? 0) < read) {
        this.shownRun.set(runId, read);
        if (!sameJson(this.snap.runs[runId], run)) (runs ??= { ...this.snap.runs })[runId] = run;
      }
      if (evs && (this.shownEvents.get(runId) ?? 0) < read) {
        this.shownEvents.set(runId, read);
        if (!sameJson(this.snap.events[runId], evs)) (events ??= { ...this.snap.events })[runId] = evs;
      }
    }
    if (runs || events) this.emit({ ...(runs ? { runs } : {}), ...(events ? { events } : {}) });
  }

  private emit(patch: Partial<InboxSnapshot>): void {
    this.snap = { ...this.snap, ...patch };
    for (const fn of this.listeners) fn(this.snap);
  }
}

interface Loaded {
  runId: string;
  /** The read's number (InboxSource.reads as it started). */
  read: number;
  run: RunView;
  events?: EventView[];
}

function sameJson(a: unknown, b: unknown): boolean {
  return a !== undefined && json(a) === json(b);
}

/** JSON text of an object kept across polls, written once (the objects are never mutated). */
const texts = new WeakMap<object, string>();
function json(v: unknown): string {
  if (typeof v !== 'object' || v === null) return JSON.stringify(v);
  let t = texts.get(v);
  if (t === undefined) texts.set(v, (t = JSON.stringify(v)));
  return t;
}

/**
 * `next` with each approval that reads as before replaced by the earlier object, and the
 * earlier array itself when nothing was added, removed, moved or changed.
 */
function reuse(prev: Approval[], next: Approval[]): Approval[] {
  const byId = new Map(prev.map((a) => [a.approval_id, a]));
  let same = prev.length === next.length;
  const out = next.map((a, i) => {
    const old = byId.get(a.approval_id);
    const keep = old !== undefined && sameJson(old, a) ? old : a;
    if (keep !== prev[i]) same = false;
    return keep;
  });
  return same ? prev : out;
}

function pick<T>(from: Readonly<Record<string, T>>, ids: Set<string>): Record<string, T> {
  const out: Record<string, T> = {};
  for (const [id, v] of Object.entries(from)) if (ids.has(id)) out[id] = v;
  return out;
}

async function mapLimit<T>(items: T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  });
  await Promise.all(workers);
}

/** Case-insensitive filter over tool, run id, rule, requester (id and role) and approval id. */
export function matchesFilter(a: Approval, run: RunView | undefined, text: string): boolean {
  const needle = text.trim().toLowerCase();
  if (!needle) return true;
  const hay = [a.action?.tool, a.run_id, a.rule, a.approval_id, run?.requested_by?.id, run?.requested_by?.role, a.action?.summary, argsText(a)]
    .filter((s): s is string => typeof s === 'string')
    .map((s) => s.toLowerCase());
  return hay.some((s) => s.includes(needle));
}

/** Why a 403 not_the_approver happened, in the approver's terms (decisions 5.4). */
export function explainNotTheApprover(
  actor: Actor,
  approval: Approval | undefined,
  run: RunView | undefined,
  serverMessage: string,
  details: Record<string, unknown> = {},
): string {
  if (approval && approverOf(actor.role) !== approval.approver) {
    return `you act as role:${actor.role} but this approval needs ${approval.approver}`;
  }
  if (run?.requested_by?.id === actor.id || details.reason === 'self_approval') {
    return `${actor.id} requested this run; a requester cannot approve their own run`;
  }
  return serverMessage;
}
