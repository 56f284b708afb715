/**
 * The one reducer (event → state) of a run. The live path appends events and folds them with
 * `reduce`; replay folds the stored log with the same function and compares. Everything the
 * state holds is derived from events (times come from each event's `at`), so the two cannot
 * drift. Pure: no clock, no store, no randomness.
 */
import type { KernelEventPayloads, RunCreatedPayload } from '../events/payloads.js';
import { EXTERNAL_EVENT_KINDS, type KernelEventKind } from '../events/kinds.js';
import { addSpend } from '../spend.js';
import type { ErrorInfo, LeaseKind, ParkedReason, RunIdentity, RunState, RunStateObject, Spend, StepKind, StepState, StepStatus } from '../types.js';

/** One step as the reducer tracks it: the public status plus what leasing needs. */
export interface StepModel extends StepStatus {
  id: string;
  kind: StepKind;
  /** The step declares a `compensate`. */
  compensate: boolean;
  /** When a pending/retry_wait step, or a waiting compensation, may be leased (ISO). */
  ready_at: string | null;
  /** The active lease on this step, if any. */
  lease_id: string | null;
  /** seq of the step's first `step.leased` (prior_events start there). */
  first_lease_seq: number | null;
  /** Action ids approved for this step (lease context `approved_actions`). */
  approved_actions: string[];
  /** Attempt number of the step's compensation (0 until it is scheduled). */
  compensation_attempt: number;
}

/** The whole state of a run. `publicState` projects it to the GET /v1/runs/{id} object. */
export interface RunModel extends RunIdentity {
  state: RunState;
  parked_reason: ParkedReason | null;
  parent_run_id: string | null;
  budget: Spend;
  usage: Spend;
  current_step: string | null;
  step_order: string[];
  steps: Record<string, StepModel>;
  pending_approval_id: string | null;
  output: unknown;
  error: ErrorInfo | null;
  created_at: string;
  updated_at: string;
  /** Compensations still to run, in order; the first is the one in progress. */
  compensations: string[];
  compensated: string[];
  compensation_failures: string[];
  abandon_reason: string | null;
}

/** The event fields the reducer reads. */
export interface ReducibleEvent {
  seq: number;
  kind: string;
  payload: Record<string, unknown>;
  at: string;
}

/** An event that is not a valid transition from the current state (a bug, or a tampered log). */
export class TransitionError extends Error {
  constructor(
    readonly seq: number,
    readonly kind: string,
    message: string,
  ) {
    super(`seq ${seq} (${kind}): ${message}`);
    this.name = 'TransitionError';
  }
}

const TERMINAL: readonly RunState[] = ['completed', 'abandoned'];

export function isTerminal(state: RunState): boolean {
  return TERMINAL.includes(state);
}


function newStep(def: { id: string; kind: StepKind; compensate: boolean }): StepModel {
  return {
    id: def.id,
    kind: def.kind,
    compensate: def.compensate,
    state: 'pending',
    attempt: 0,
    output: null,
    error: null,
    started_at: null,
    ended_at: null,
    ready_at: null,
    lease_id: null,
    first_lease_seq: null,
    approved_actions: [],
    compensation_attempt: 0,
  };
}

/** The state after `run.created`. */
export function initialModel(ev: ReducibleEvent): RunModel {
  if (ev.kind !== 'run.created') throw new TransitionError(ev.seq, ev.kind, 'a run log starts with run.created');
  if (ev.seq !== 1) throw new TransitionError(ev.seq, ev.kind, 'run.created must be seq 1');
  const p = ev.payload as unknown as RunCreatedPayload;
  const steps: Record<string, StepModel> = {};
  for (const s of p.steps) {
    // A bundle's step ids are checked when it is posted; replay also folds rows edited by hand,
    // where `__proto__` would set the map's prototype rather than add a step.
    if (typeof s?.id !== 'string' || s.id === '__proto__' || Object.hasOwn(steps, s.id)) {
      throw new TransitionError(ev.seq, ev.kind, `step id ${JSON.stringify(s?.id)} is not a step id of its own`);
    }
    steps[s.id] = newStep(s);
  }
  const first = p.steps[0]?.id ?? null;
  if (first) {
    steps[first]!.attempt = 1;
    steps[first]!.ready_at = ev.at;
  }
  return {
    run_id: p.run_id,
    state: 'running',
    parked_reason: null,
    bundle_id: p.bundle_id,
    bundle: { name: p.bundle.name, version: p.bundle.version },
    workflow: p.workflow,
    department: p.department,
    input: p.input,
    requested_by: p.requested_by,
    remit_id: p.remit_id,
    parent_run_id: p.parent_run_id ?? null,
    policies: p.policies,
    budget: { tokens: p.budget.tokens, usd: p.budget.usd },
    usage: { tokens: 0, usd: 0 },
    current_step: first,
    step_order: p.steps.map((s) => s.id),
    steps,
    pending_approval_id: null,
    output: null,
    error: null,
    created_at: ev.at,
    updated_at: ev.at,
    compensations: [],
    compensated: [],
    compensation_failures: [],
    abandon_reason: null,
  };
}

/** Folds a whole log (replay). Throws TransitionError on an invalid transition. */
export function foldEvents(events: readonly ReducibleEvent[]): RunModel {
  const f = new Fold();
  f.push(events);
  return f.result();
}

/** foldEvents in pieces (replay reads a long log a page at a time). */
export class Fold {
  private m: RunModel | null = null;

  /** Throws TransitionError on an invalid transition; the fold is then unusable. */
  push(events: readonly ReducibleEvent[]): void {
    // The model built here is private to the fold, so each transition may change it in place:
    // copying it per event was over half of replay's time (bench/README.md).
    for (const ev of events) this.m = this.m === null ? structuredClone(initialModel(ev)) : applyEvent(this.m, ev);
  }

  result(): RunModel {
    if (this.m === null) throw new TransitionError(0, '', 'the log is empty');
    return this.m;
  }
}

/** The next state. Never mutates `model`. */
export function reduce(model: RunModel, ev: ReducibleEvent): RunModel {
  return applyEvent(structuredClone(model), ev);
}

/**
 * The next state, applied to `model` itself: for a caller that owns its copy (a run writer
 * inside its transaction, the replay fold) and would otherwise clone it per event. On a
 * TransitionError `model` is left half-changed: the caller discards it.
 */
export function reduceInPlace(model: RunModel, ev: ReducibleEvent): RunModel {
  return applyEvent(model, ev);
}

/** The transition itself, applied to `m` in place (callers own `m`). */
function applyEvent(m: RunModel, ev: ReducibleEvent): RunModel {
  m.updated_at = ev.at;
  if (Object.hasOwn(EXTERNAL_EVENT_KINDS, ev.kind)) return m; // they record what happened; the state does not move
  if (ev.kind === 'run.created') fail(ev, 'run.created may only be the first event');
  const transition = Object.hasOwn(TRANSITIONS, ev.kind) ? (TRANSITIONS[ev.kind as FoldedKind] as Transition<unknown>) : undefined;
  if (!transition) fail(ev, 'unknown event kind');
  transition(m, ev.payload, ev);
  return m;
}

type FoldedKind = Exclude<KernelEventKind, 'run.created'>;
/** One kind's transition: changes `m` in place, or throws TransitionError. */
type Transition<P> = (m: RunModel, p: P, ev: ReducibleEvent) => void;

function fail(ev: ReducibleEvent, msg: string): never {
  throw new TransitionError(ev.seq, ev.kind, msg);
}

function stepOf(m: RunModel, ev: ReducibleEvent, id: unknown): StepModel {
  // Own members only: replay folds rows edited in the database too, and a step named
  // `__proto__` would otherwise be Object.prototype, which the transition then writes to.
  const s = typeof id === 'string' && Object.hasOwn(m.steps, id) ? m.steps[id] : undefined;
  return s ?? fail(ev, `unknown step ${String(id)}`);
}

/** Makes `id` the current step, ready at `at` in its first attempt; none current without one. */
function makeCurrent(m: RunModel, id: string | undefined, at: string, firstAttempt: (s: StepModel) => void): void {
  if (!id) {
    m.current_step = null;
    return;
  }
  const s = m.steps[id]!;
  firstAttempt(s);
  s.ready_at = at;
  m.current_step = id;
}

/** Makes the step after `id` ready, or clears current_step after the last one. */
function advance(m: RunModel, id: string, at: string): void {
  makeCurrent(m, m.step_order[m.step_order.indexOf(id) + 1], at, (s) => {
    s.state = 'pending';
    s.attempt = 1;
  });
}

/** Makes the head of the compensation queue ready (or none current when the queue is empty). */
function startCompensation(m: RunModel, at: string): void {
  makeCurrent(m, m.compensations[0], at, (s) => {
    s.state = 'compensating';
    s.compensation_attempt = 1;
  });
}

/** Moves the compensation queue on after its head ended. */
function nextCompensation(m: RunModel, at: string): void {
  m.compensations.shift();
  startCompensation(m, at);
}

/**
 * Every kernel kind but `run.created` (which `initialModel` folds), keyed by kind so that the
 * compiler checks each transition against its payload (src/events/payloads.ts) and that no
 * kind is left out.
 */
const TRANSITIONS: { [K in FoldedKind]: Transition<KernelEventPayloads[K]> } = {
  'step.leased'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (s.lease_id) fail(ev, `step ${s.id} is already leased`);
    if (p.kind === 'compensation') {
      if (m.state !== 'abandoning' || s.state !== 'compensating') fail(ev, `step ${s.id} has no compensation waiting`);
      s.compensation_attempt = p.attempt;
    } else {
      if (m.state !== 'running' || m.current_step !== s.id) fail(ev, `step ${s.id} is not the current step of a running run`);
      if (s.state !== 'pending' && s.state !== 'retry_wait') fail(ev, `step ${s.id} is ${s.state}, not ready`);
      s.state = 'leased';
      s.attempt = p.attempt;
      s.started_at ??= ev.at;
      s.first_lease_seq ??= ev.seq;
    }
    s.lease_id = p.lease_id;
    s.ready_at = null;
  },

  'step.completed'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (s.state !== 'leased' || s.lease_id !== p.lease_id) fail(ev, `step ${s.id} is not leased by ${p.lease_id}`);
    s.state = 'completed';
    s.output = p.output;
    s.error = null;
    s.ended_at = ev.at;
    s.lease_id = null;
    m.usage = addSpend(m.usage, p.usage);
    advance(m, s.id, ev.at);
  },

  'step.failed'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (p.lease_id !== null && s.lease_id !== p.lease_id) fail(ev, `step ${s.id} is not leased by ${p.lease_id}`);
    if (p.kind === 'compensation') {
      if (s.state !== 'compensating') fail(ev, `step ${s.id} is not compensating`);
    } else {
      if (m.current_step !== s.id) fail(ev, `step ${s.id} is not the current step`);
      if (p.lease_id === null && s.state !== 'pending' && s.state !== 'retry_wait') fail(ev, `step ${s.id} is ${s.state}`);
      s.state = 'failed';
      s.ended_at = ev.at;
    }
    s.error = { code: p.error.code, message: p.error.message };
    s.lease_id = null;
    m.usage = addSpend(m.usage, p.usage);
  },

  'step.retry_scheduled'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (p.kind === 'compensation') {
      if (s.state !== 'compensating' || s.lease_id) fail(ev, `compensation of ${s.id} is not failed`);
      s.compensation_attempt = p.attempt;
    } else {
      if (s.state !== 'failed') fail(ev, `step ${s.id} is ${s.state}, not failed`);
      s.state = 'retry_wait';
      s.attempt = p.attempt;
      s.ended_at = null;
    }
    s.ready_at = p.ready_at;
  },

  'step.quarantined'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (s.state !== 'failed' && !(s.state === 'leased' && s.lease_id === null)) fail(ev, `step ${s.id} is ${s.state}`);
    s.state = 'quarantined';
    s.ready_at = null;
  },

  'lease.expired'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (s.lease_id !== p.lease_id) fail(ev, `lease ${p.lease_id} is not the step's lease`);
    s.lease_id = null;
    if (p.kind === 'compensation') {
      if (p.next_attempt !== null) {
        s.compensation_attempt = p.next_attempt;
        s.ready_at = ev.at;
      }
    } else if (p.next_attempt !== null) {
      s.state = 'pending';
      s.attempt = p.next_attempt;
      s.ready_at = ev.at;
    } else {
      s.error = { code: 'lease_expired', message: `lease ${p.lease_id} expired on the last attempt` };
      s.ended_at = ev.at;
    }
  },

  'action.decided'(m, p, ev) {
    stepOf(m, ev, p.step);
  },

  'approval.requested'() {},

  'approval.decided'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (p.decision === 'approved' && !s.approved_actions.includes(p.action_id)) s.approved_actions.push(p.action_id);
    if (m.pending_approval_id === p.approval_id) m.pending_approval_id = null;
  },

  'run.parked'(m, p, ev) {
    if (m.state !== 'running') fail(ev, `a ${m.state} run cannot be parked`);
    const s = stepOf(m, ev, p.step);
    // The kernel parks for the step in hand: the one a lease acted on, failed or quarantined.
    // Another step would leave the current one's lease live in a parked run.
    if (m.current_step !== s.id) fail(ev, `step ${s.id} is not the current step`);
    m.state = 'parked';
    m.parked_reason = p.reason;
    if (p.reason === 'human') {
      // The lease is released at once; the step waits to be leased again after the decision.
      m.pending_approval_id = p.approval_id ?? null;
      s.state = 'pending';
      s.lease_id = null;
      s.ready_at = ev.at;
    } else if (p.reason === 'connector_quarantined') {
      // Not the step's fault: no attempt is spent.
      s.state = 'pending';
      s.lease_id = null;
      s.ended_at = null;
      s.ready_at = ev.at;
    } else if (s.state !== 'quarantined') {
      fail(ev, `step ${s.id} is ${s.state}, not quarantined`);
    }
  },

  'run.resumed'(m, _p, ev) {
    if (m.state !== 'parked') fail(ev, `a ${m.state} run cannot be resumed`);
    m.state = 'running';
    m.parked_reason = null;
    const s = m.current_step ? m.steps[m.current_step] : undefined;
    if (s) {
      if (s.state === 'quarantined') {
        s.state = 'pending';
        s.attempt = 1; // a fresh attempt count (decisions §6)
        s.ended_at = null;
      }
      if (s.state === 'pending') s.ready_at = ev.at;
    }
  },

  'run.completed'(m, p, ev) {
    if (m.state !== 'running' || m.current_step !== null) fail(ev, 'only a running run whose steps all completed can complete');
    m.state = 'completed';
    m.output = p.output;
    // Cancelled with the run. Keyed on the payload, so logs written before runs cancelled
    // their approvals replay to the state they stored.
    if (p.cancelled_approval_ids?.length) m.pending_approval_id = null;
  },

  'budget.exceeded'() {},

  'run.failed'(m, p, ev) {
    if (m.state !== 'running' && m.state !== 'parked') fail(ev, `a ${m.state} run cannot fail`);
    m.state = 'failed';
    m.parked_reason = null;
    if (p.cancelled_approval_ids?.length) m.pending_approval_id = null; // as in run.completed
    m.error = { code: p.error.code, message: p.error.message };
    const s = m.current_step ? m.steps[m.current_step] : undefined;
    if (s) {
      s.ready_at = null;
      if (s.lease_id) {
        s.lease_id = null;
        s.state = 'failed';
        s.ended_at = ev.at;
      }
    }
  },

  'run.abandon_requested'(m, p, ev) {
    if (isTerminal(m.state) || m.state === 'abandoning') fail(ev, `a ${m.state} run cannot be abandoned`);
    m.state = 'abandoning';
    m.parked_reason = null;
    m.pending_approval_id = null;
    m.abandon_reason = p.reason;
    m.usage = addSpend(m.usage, p.unreported_usage);
    for (const s of Object.values(m.steps)) {
      if (s.lease_id) {
        s.lease_id = null;
        if (s.state === 'leased') s.state = 'pending';
      }
      s.ready_at = null;
    }
    for (const id of p.compensations) {
      const s = stepOf(m, ev, id);
      if (s.state !== 'completed' || !s.compensate) fail(ev, `step ${id} has nothing to compensate`);
    }
    m.compensations = [...p.compensations];
    startCompensation(m, ev.at);
  },

  'compensation.completed'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (m.compensations[0] !== s.id || s.lease_id !== p.lease_id) fail(ev, `compensation of ${s.id} is not leased by ${p.lease_id}`);
    s.state = 'compensated';
    s.lease_id = null;
    s.ready_at = null;
    s.ended_at = ev.at;
    m.usage = addSpend(m.usage, p.usage);
    m.compensated.push(s.id);
    nextCompensation(m, ev.at);
  },

  'compensation.failed'(m, p, ev) {
    const s = stepOf(m, ev, p.step);
    if (m.compensations[0] !== s.id) fail(ev, `step ${s.id} is not being compensated`);
    s.state = 'failed';
    s.error = { code: p.error.code, message: p.error.message };
    s.lease_id = null;
    s.ready_at = null;
    s.ended_at = ev.at;
    m.compensation_failures.push(s.id);
    nextCompensation(m, ev.at);
  },

  'compensation.retry_requested'(m, p, ev) {
    if (m.state !== 'abandoned' && m.state !== 'abandoning') fail(ev, `a ${m.state} run has no compensation to retry`);
    if (p.from_state !== m.state) fail(ev, `the run is ${m.state}, not ${String(p.from_state)}`);
    if (!Array.isArray(p.steps) || p.steps.length === 0) fail(ev, 'no step to retry');
    for (const id of p.steps) {
      const s = stepOf(m, ev, id);
      if (!m.compensation_failures.includes(s.id) || s.state !== 'failed') fail(ev, `the compensation of step ${s.id} has not failed for good`);
    }
    if (new Set(p.steps).size !== p.steps.length) fail(ev, 'a step is named twice');
    // Failed no longer: `run.abandoned` names them again if they fail again.
    m.compensation_failures = m.compensation_failures.filter((id) => !p.steps.includes(id));
    // The error `run.abandoned` set for them; the next `run.abandoned` sets it again if needed.
    if (m.error?.code === 'compensation_failed') m.error = null;
    m.state = 'abandoning';
    const idle = m.compensations.length === 0;
    m.compensations.push(...p.steps);
    if (idle) startCompensation(m, ev.at); // else they start when the queue reaches them
  },

  'run.abandoned'(m, p, ev) {
    if (m.state !== 'abandoning' || m.compensations.length > 0) fail(ev, 'compensations are still running');
    m.state = 'abandoned';
    m.current_step = null;
    if (p.failed.length > 0) {
      m.error = { code: 'compensation_failed', message: `compensation failed for step(s) ${p.failed.join(', ')}` };
    }
  },
};

/** What a worker could lease from this run now (at most one item: steps run in order). */
export interface WorkItem {
  step: string;
  kind: LeaseKind;
  ready_at: string;
}

export function workItem(m: RunModel): WorkItem | null {
  const s = m.current_step ? m.steps[m.current_step] : undefined;
  if (!s || s.lease_id || !s.ready_at) return null;
  if (m.state === 'running' && (s.state === 'pending' || s.state === 'retry_wait')) return { step: s.id, kind: s.kind, ready_at: s.ready_at };
  if (m.state === 'abandoning' && s.state === 'compensating' && m.compensations[0] === s.id) return { step: s.id, kind: 'compensation', ready_at: s.ready_at };
  return null;
}

/** Completed steps that declare `compensate`, last first (decisions §6). */
export function compensationsFor(m: RunModel): string[] {
  return m.step_order.filter((id) => m.steps[id]!.state === 'completed' && m.steps[id]!.compensate).reverse();
}

/** The run state object of decisions §6 without the head fields. */
export type PublicRunState = Omit<RunStateObject, 'last_seq' | 'head_hash' | 'head_signature'> & { parent_run_id: string | null };

export function publicState(m: RunModel): PublicRunState {
  const steps: Record<string, StepStatus> = {};
  for (const id of m.step_order) {
    const s = m.steps[id]!;
    steps[id] = { state: s.state as StepState, attempt: s.attempt, output: s.output, error: s.error, started_at: s.started_at, ended_at: s.ended_at };
  }
  return {
    run_id: m.run_id,
    state: m.state,
    parked_reason: m.parked_reason,
    bundle_id: m.bundle_id,
    bundle: m.bundle,
    workflow: m.workflow,
    department: m.department,
    input: m.input,
    requested_by: m.requested_by,
    remit_id: m.remit_id,
    parent_run_id: m.parent_run_id,
    policies: m.policies,
    current_step: m.current_step,
    steps,
    usage: m.usage,
    budget: m.budget,
    pending_approval_id: m.pending_approval_id,
    output: m.output,
    error: m.error,
    created_at: m.created_at,
    updated_at: m.updated_at,
  };
}
