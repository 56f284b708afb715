/**
 * Approvals (interface 2.8, 3; decisions 5.4): the inbox list, one approval, and the decision
 * with the approver check and no self-approval. A decision on a run parked for this approval
 * returns the run to `running` in the same transaction.
 */
import { isoTime } from '../clock.js';
import { SvcError, notFound } from '../errors.js';
import type { ApprovalDecidedPayload, RunResumedPayload } from '../events/payloads.js';
import type { SqlDb } from '../store/sql-db.js';
import { isExternalKind } from '../events/kinds.js';
import { globalRedactor } from '../log/logger.js';
import type { PolicyAction, RunEvent, RunState } from '../types.js';
import { pageNewestFirst } from './cursor.js';
import type { RunEngine } from './run-engine.js';

/** Approval states: `cancelled` when its run ended (completed, failed, abandoned) before a decision. */
export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'cancelled';
export const APPROVAL_STATES: readonly ApprovalState[] = ['pending', 'approved', 'rejected', 'cancelled'];

/** A row of `approvals`. */
export interface ApprovalRow {
  approval_id: string;
  run_id: string;
  step: string;
  action_id: string;
  action: string;
  rule: string;
  approver: string;
  state: ApprovalState;
  created_at: string;
  decided_at: string | null;
  decision: 'approved' | 'rejected' | null;
  actor: string | null;
  reason: string | null;
  /** JSON `[{rule, message}]` of the conditions that failed closed, or NULL (approvalErrors). */
  errors: string | null;
}

/** A condition that failed to evaluate when the approval was asked for (decisions 5.1). */
export interface ConditionError {
  rule: string;
  message: string;
}

/** GET /v1/approvals/{id} and each entry of the list. */
export interface ApprovalObject {
  approval_id: string;
  run_id: string;
  step: string;
  action_id: string;
  action: PolicyAction;
  rule: string;
  approver: string;
  state: ApprovalState;
  created_at: string;
  decided_at: string | null;
  decision: 'approved' | 'rejected' | null;
  actor: { id: string; role: string } | null;
  reason: string | null;
  /**
   * The conditions that failed closed when this approval was asked for (decisions 5.1), as the
   * proposal's answer listed them; present only when there were some, so the approval may
   * exist because the policy could not read the action rather than because a rule matched.
   */
  errors?: ConditionError[];
}

export interface ApprovalListQuery {
  state?: ApprovalState;
  /** `role:<role>` */
  approver?: string;
  run_id?: string;
  /** (Default: 50, max 500) */
  limit?: number;
  after?: string;
}

/** POST /v1/approvals/{id} body. */
export interface DecideBody {
  decision: 'approved' | 'rejected';
  actor: { id: string; role: string };
  reason?: string | null;
}

export function approvalObject(r: ApprovalRow): ApprovalObject {
  return {
    approval_id: r.approval_id,
    run_id: r.run_id,
    step: r.step,
    action_id: r.action_id,
    action: JSON.parse(r.action) as PolicyAction,
    rule: r.rule,
    approver: r.approver,
    state: r.state,
    created_at: r.created_at,
    decided_at: r.decided_at,
    decision: r.decision,
    actor: r.actor ? (JSON.parse(r.actor) as { id: string; role: string }) : null,
    reason: r.reason,
    ...(r.errors ? { errors: JSON.parse(r.errors) as ConditionError[] } : {}),
  };
}

/**
 * The `errors` column for a new approval: the failed conditions, redacted as the
 * action.decided event that lists them is (a message may quote a value), or NULL for none.
 */
export function approvalErrors(errors: readonly ConditionError[]): string | null {
  return errors.length > 0 ? JSON.stringify(globalRedactor.redactValue(errors)) : null;
}

/**
 * Cancels the pending approvals of a run that is ending (completed, failed or abandoning): no
 * step of it will be leased again to act on a decision, so they leave the approvers' inboxes.
 * A run parked for a human that is resumed and then ends keeps one otherwise. Returns their
 * ids, newest last, for the ending event's `cancelled_approval_ids`.
 */
export async function cancelPendingApprovals(tx: SqlDb, runId: string, at: string): Promise<string[]> {
  const pending = await tx.all<{ approval_id: string }>("SELECT approval_id FROM approvals WHERE run_id = ? AND state = 'pending' ORDER BY approval_id", [runId]);
  if (pending.length > 0) await tx.run("UPDATE approvals SET state = 'cancelled', decided_at = ? WHERE run_id = ? AND state = 'pending'", [at, runId]);
  return pending.map((p) => p.approval_id);
}

/**
 * The approvals an event says it cancelled: the kernel's ending events name them
 * (cancelPendingApprovals); a posted event's payload is the poster's word and cancels nothing.
 */
export function cancelledApprovalIds(ev: Pick<RunEvent, 'kind' | 'payload'>): string[] {
  if (isExternalKind(ev.kind)) return [];
  const ids = (ev.payload as { cancelled_approval_ids?: unknown } | null)?.cancelled_approval_ids;
  return Array.isArray(ids) ? ids.map(String) : [];
}

export class ApprovalService {
  constructor(private readonly e: RunEngine) {}

  /** Sets svc_approvals_pending from the store. */
  async refreshGauge(): Promise<void> {
    const r = await this.e.k.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM approvals WHERE state = 'pending'");
    this.e.k.metrics.approvalsPending.set(Number(r?.n ?? 0));
  }

  /** GET /v1/approvals: newest first; `{approvals, next}`. */
  async list(q: ApprovalListQuery): Promise<{ approvals: ApprovalObject[]; next: string | null }> {
    const { page, next } = await pageNewestFirst<ApprovalRow>(this.e.k.db, {
      table: 'approvals',
      idColumn: 'approval_id',
      filters: { state: q.state, approver: q.approver, run_id: q.run_id },
      after: q.after,
      limit: q.limit ?? 50,
    });
    return { approvals: page.map(approvalObject), next };
  }

  /** GET /v1/approvals/{id}. */
  async get(approvalId: string): Promise<ApprovalObject> {
    const row = await this.e.k.db.get<ApprovalRow>('SELECT * FROM approvals WHERE approval_id = ?', [approvalId]);
    if (!row) throw notFound('approval', approvalId);
    return approvalObject(row);
  }

  /**
   * POST /v1/approvals/{id} (decisions 5.4): the actor's role must be the approver's and the
   * actor must not be the run's requester (403 not_the_approver); a second decision is 409
   * already_decided. Returns `{run_id, run_state}` (the route's answer) and the decided approval.
   */
  async decide(approvalId: string, body: DecideBody): Promise<{ run_id: string; run_state: RunState; approval: ApprovalObject }> {
    const k = this.e.k;
    const first = await k.db.get<ApprovalRow>('SELECT * FROM approvals WHERE approval_id = ?', [approvalId]);
    if (!first) throw notFound('approval', approvalId);
    const now = isoTime(k.clock.now());
    let decidedNow = false;
    const result = await this.e.mutate(first.run_id, async (w) => {
      const a = await w.tx.get<ApprovalRow>('SELECT * FROM approvals WHERE approval_id = ?', [approvalId]);
      if (!a) throw notFound('approval', approvalId);
      // A decided (or cancelled) approval answers 409 to anyone: interface §3 makes every
      // second decision 409 already_decided, whoever sends it.
      if (a.state === 'cancelled') {
        throw new SvcError('invalid_state', `approval ${approvalId} was cancelled when run ${a.run_id} ended (${w.model.state}) before a decision`, {
          approval_id: approvalId,
          state: a.state,
          run_state: w.model.state,
        });
      }
      if (a.state !== 'pending') {
        throw new SvcError('already_decided', `approval ${approvalId} is already ${a.state}`, { approval_id: approvalId, state: a.state, decision: a.decision, decided_at: a.decided_at });
      }
      const role = a.approver.startsWith('role:') ? a.approver.slice(5) : a.approver;
      if (body.actor.role !== role) {
        throw new SvcError('not_the_approver', `approval ${approvalId} is for ${a.approver}; ${body.actor.id} acts as role:${body.actor.role}`, {
          approver: a.approver,
          actor: body.actor,
        });
      }
      if (sameIdentity(body.actor.id, w.model.requested_by.id)) {
        throw new SvcError('not_the_approver', `${body.actor.id} requested run ${a.run_id} and cannot approve its actions`, { approver: a.approver, actor: body.actor, reason: 'self_approval' });
      }
      const reason = body.reason ?? null;
      await w.tx.run("UPDATE approvals SET state = ?, decision = ?, decided_at = ?, actor = ?, reason = ? WHERE approval_id = ? AND state = 'pending'", [
        body.decision,
        body.decision,
        now,
        JSON.stringify({ id: body.actor.id, role: body.actor.role }),
        reason,
        approvalId,
      ]);
      decidedNow = true;
      // Read before the appends: w.model is the state as each append leaves it.
      const { state, parked_reason, pending_approval_id, current_step } = w.model;
      const parkedForThis = state === 'parked' && parked_reason === 'human' && pending_approval_id === approvalId;
      const p: ApprovalDecidedPayload = { approval_id: approvalId, step: a.step, action_id: a.action_id, decision: body.decision, reason };
      const actor = { id: body.actor.id, role: body.actor.role };
      await w.append({ kind: 'approval.decided', payload: p, actor });
      if (parkedForThis) {
        const r: RunResumedPayload = { reason: 'human', step: current_step, via: 'approval', approval_id: approvalId };
        await w.append({ kind: 'run.resumed', payload: r, actor });
      }
      const row = await w.tx.get<ApprovalRow>('SELECT * FROM approvals WHERE approval_id = ?', [approvalId]);
      return { run_id: a.run_id, run_state: w.model.state, approval: approvalObject(row!) };
    });
    if (decidedNow) k.metrics.approvalsPending.dec();
    return result;
  }
}

/**
 * Whether two actor ids name the same person for the no-self-approval rule (decisions 5.4).
 * Ids are compared as people write them, not byte for byte: `alice `, `Alice` and a
 * full-width `ａｌｉｃｅ` are alice, so none of them approves alice's own run; nor does
 * `alice` followed by a character that shows nothing (a combining grapheme joiner U+034F, a
 * variation selector, a Hangul filler: default-ignorable characters that are no format
 * character, so an id may hold them), and `STRASSE` is `straße` (upper-cased before it is
 * lower-cased, the way case folding compares). Erring this way can only refuse a decision,
 * never let one through.
 */
export function sameIdentity(a: string, b: string): boolean {
  const norm = (s: string) => s.normalize('NFKC').replace(INVISIBLE, '').trim().toUpperCase().toLowerCase().normalize('NFKC');
  return norm(a) === norm(b);
}

/** Characters that show nothing on their own (Unicode's Default_Ignorable_Code_Point). */
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/gu;
