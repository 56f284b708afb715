/**
 * Payload shapes of the kernel's event kinds (decisions §7; man/svc-events.7). The engine
 * builds them, the reducer folds them, replay re-reads them: one definition for all three.
 */
import type { RunIdentity, Decision, ErrorInfo, LeaseKind, ParkedReason, PolicyAction, PolicyRef, PolicyRunContext, RunState, Spend, StepKind } from '../types.js';
import type { KernelEventKind } from './kinds.js';

export interface RunCreatedPayload extends RunIdentity {
  parent_run_id: string | null;
  budget: Spend;
  steps: Array<{ id: string; kind: StepKind; compensate: boolean }>;
}

export interface StepLeasedPayload {
  step: string;
  kind: LeaseKind;
  attempt: number;
  lease_id: string;
  worker_id: string;
  expires_at: string;
}

export interface StepCompletedPayload {
  step: string;
  attempt: number;
  lease_id: string;
  output: unknown;
  usage: Spend;
}

export interface StepFailedPayload {
  step: string;
  kind: LeaseKind;
  attempt: number;
  /** Null when the kernel failed the step itself (a template that does not render). */
  lease_id: string | null;
  error: ErrorInfo;
  deterministic: boolean;
  usage: Spend;
}

export interface StepRetryScheduledPayload {
  step: string;
  kind: LeaseKind;
  /** The attempt the step will make next. */
  attempt: number;
  delay_ms: number;
  ready_at: string;
}

export interface StepQuarantinedPayload {
  step: string;
  attempt: number;
  reason: 'deterministic' | 'max_attempts';
}

export interface LeaseExpiredPayload {
  lease_id: string;
  step: string;
  kind: LeaseKind;
  attempt: number;
  /** The attempt the step will make next; null when attempts ran out (a step.quarantined follows). */
  next_attempt: number | null;
  /**
   * `ttl` when the ttl ran out (absent in logs written before 2026-11-25, read as `ttl`).
   * `undelivered` when the lease never reached its worker (the long poll's client went away
   * first): the lease is released at once and the step is ready again with the same attempt
   * (`next_attempt` = `attempt`).
   */
  reason?: 'ttl' | 'undelivered';
}

export interface ActionDecidedPayload {
  step: string;
  lease_id: string;
  action_id: string;
  /** The proposal exactly as the worker sent it (action_id is computed over it). */
  proposal: Record<string, unknown>;
  /** The enriched action the policies saw. */
  action: PolicyAction;
  /** sha256 of JCS(action.args) as proposed, before the log's redaction: the gateway's `args_hash` of the call that runs it (absent before 2026-11-28). */
  args_hash?: string;
  /** The run as the policies saw it. */
  run: PolicyRunContext;
  policies: PolicyRef[];
  /** `policy`: decided by the pinned policies; `approval`: answered by an existing approval. */
  source: 'policy' | 'approval';
  decision: Decision;
  rule: string;
  approver: string | null;
  approval_id: string | null;
  matched: Array<{ rule: string; effect: Decision }>;
  errors: Array<{ rule: string; message: string }>;
}

export interface ApprovalRequestedPayload {
  approval_id: string;
  step: string;
  action_id: string;
  action: PolicyAction;
  rule: string;
  approver: string;
}

export interface ApprovalDecidedPayload {
  approval_id: string;
  step: string;
  action_id: string;
  decision: 'approved' | 'rejected';
  reason: string | null;
}

export interface RunParkedPayload {
  reason: ParkedReason;
  step: string;
  /** The approval a `human` park waits for; null for the other reasons. */
  approval_id: string | null;
  /** The lease whose proposal, failure or expiry parked the run; null when the kernel failed the step itself. */
  lease_id: string | null;
  // Both are written on every park since 2026-11-28; a log written before may lack them, so
  // readers of stored events (the reducer) take a missing one as null.
}

export interface RunResumedPayload {
  /** What the run was parked for. */
  reason: ParkedReason;
  step: string | null;
  /** `resume` for POST /runs/{id}/resume, `approval` when a decision un-parked it. */
  via: 'resume' | 'approval';
  /** The deciding approval for `via: approval`; null for `via: resume`. */
  approval_id: string | null;
}

export interface RunCompletedPayload {
  output: unknown;
  /** The approvals still pending when the run ended, cancelled with it; present only when any were. */
  cancelled_approval_ids?: string[];
}

export interface RunFailedPayload {
  error: ErrorInfo;
  step: string | null;
  /** As in run.completed. */
  cancelled_approval_ids?: string[];
}

export interface BudgetExceededPayload {
  step: string | null;
  usage: Spend;
  budget: Spend;
  /** Spend of this run's remit reserved by derived remits (decisions 8.3). */
  reserved: Spend;
}

/**
 * A write of a step that never completed (run.abandon_requested): the event that shows it —
 * an allowed write action, or a gateway write no allowed action accounts for.
 */
export interface UncompensatedWrite {
  seq: number;
  kind: 'action.decided' | 'tool.called';
  step: string;
  tool: string;
  /** An action's execution: the seq of the gateway's `tool.called` that ran it, when there is one. */
  called_seq?: number;
  /**
   * The gateway's outcome of that call (of a `tool.called` entry, its own): `ok`, or a failure
   * such as `deterministic_failure` or `upstream_error` that may still have written. For an
   * action called more than once, its last call's.
   */
  outcome?: string;
  /** Present when the gateway ran the action more than once (a retry, a resume under a fresh key): how often. */
  calls?: number;
  /** With `calls`: the seq of the last call, the one `outcome` is of. */
  last_called_seq?: number;
}

export interface RunAbandonRequestedPayload {
  reason: string;
  from_state: RunState;
  /** Steps whose compensations run, in order (reverse step order). */
  compensations: string[];
  released_lease_id: string | null;
  cancelled_approval_ids: string[];
  /** Model usage recorded by the worker that no lease reported (src/kernel/unreported-usage.ts); absent when none. */
  unreported_usage?: Spend;
  /** Writes allowed or run for steps that never completed, which no compensation undoes (src/kernel/uncompensated-writes.ts); the first 100, absent when none. */
  uncompensated_writes?: UncompensatedWrite[];
  /** How many there were, present only when more than `uncompensated_writes` names. */
  uncompensated_writes_total?: number;
}

export interface CompensationCompletedPayload {
  step: string;
  attempt: number;
  lease_id: string;
  output: unknown;
  usage: Spend;
}

export interface CompensationFailedPayload {
  step: string;
  attempt: number;
  lease_id: string | null;
  error: ErrorInfo;
}

/**
 * An operator's retry of compensations that failed for good (POST /v1/runs/{id}/compensations/retry):
 * `steps` (the steps whose `compensation.failed` no later event retried, in the order they
 * failed) run again, after any still queued, each from attempt 1; the run is `abandoning`
 * until they end and a new `run.abandoned` closes it.
 */
export interface CompensationRetryRequestedPayload {
  /** Why, as the operator gave it; null when none was given. */
  reason: string | null;
  steps: string[];
  /** `abandoned`, or `abandoning` when other compensations were still running. */
  from_state: 'abandoning' | 'abandoned';
}

export interface RunAbandonedPayload {
  reason: string;
  compensated: string[];
  failed: string[];
}

/** Each kernel kind's payload: what a run writer accepts for it (and the reducer reads back). */
export interface KernelEventPayloads {
  'run.created': RunCreatedPayload;
  'step.leased': StepLeasedPayload;
  'step.completed': StepCompletedPayload;
  'step.failed': StepFailedPayload;
  'step.retry_scheduled': StepRetryScheduledPayload;
  'step.quarantined': StepQuarantinedPayload;
  'lease.expired': LeaseExpiredPayload;
  'action.decided': ActionDecidedPayload;
  'approval.requested': ApprovalRequestedPayload;
  'approval.decided': ApprovalDecidedPayload;
  'run.parked': RunParkedPayload;
  'run.resumed': RunResumedPayload;
  'run.completed': RunCompletedPayload;
  'run.failed': RunFailedPayload;
  'run.abandon_requested': RunAbandonRequestedPayload;
  'compensation.completed': CompensationCompletedPayload;
  'compensation.failed': CompensationFailedPayload;
  'compensation.retry_requested': CompensationRetryRequestedPayload;
  'run.abandoned': RunAbandonedPayload;
  'budget.exceeded': BudgetExceededPayload;
}

/** Compiles only while the map above names every kernel kind and nothing else. */
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
export const PAYLOADS_NAME_EVERY_KERNEL_KIND: SameKeys<keyof KernelEventPayloads, KernelEventKind> = true;
