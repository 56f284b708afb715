/**
 * Action proposals (interface 2.7, 3, 4.1 rule 4; decisions 5.2, 5.4). The kernel enriches the
 * proposal from the gateway's descriptors and the bundle (never from the worker), answers from
 * an existing approval when there is one, else decides with the run's pinned policies, and
 * records `action.decided` with everything replay needs. `approval_required` creates the
 * approval, parks the run for a human and releases the lease in the same transaction.
 */
import { isoTime } from '../clock.js';
import { canonicalHash, canonicalJson, sha256Hex } from '../encoding/canonical-json.js';
import { SvcError } from '../errors.js';
import type { ActionDecidedPayload, ApprovalRequestedPayload, RunParkedPayload } from '../events/payloads.js';
import { newId } from '../ids.js';
import { managerApprover } from '../policy/decide.js';
import type { Bundle, Decision, DecisionResult, PolicyAction, PolicyRunContext, RemitPayload } from '../types.js';
import { describeTool } from './lease-context.js';
import type { RunModel } from './reducer.js';
import type { RunEngine } from './run-engine.js';
import { KERNEL_ACTOR } from './run-store.js';
import { approvalErrors, type ApprovalRow } from './approvals.js';

/** `act_` + first 26 hex of sha256(run_id + "\n" + step + "\n" + JCS(action)) (decisions 5.4). */
export function actionId(runId: string, step: string, action: unknown): string {
  return 'act_' + sha256Hex(`${runId}\n${step}\n${canonicalJson(action)}`).slice(0, 26);
}

/** Response of POST /v1/leases/{id}/actions. */
export interface ProposalResult {
  action_id: string;
  decision: Decision;
  rule: string;
  approval_id: string | null;
  approver: string | null;
  /**
   * Conditions that failed at decision time and counted fail-closed (decisions 5.1), as
   * `{rule, message}`; present only when there are some, so a clean decision keeps the
   * interface 4.1 shape.
   */
  errors?: Array<{ rule: string; message: string }>;
}

/** The `run` variable of policy expressions (decisions 5.1). */
export function policyRunContext(m: RunModel, remit: RemitPayload): PolicyRunContext {
  return {
    id: m.run_id,
    bundle: m.bundle.name,
    workflow: m.workflow,
    department: m.department,
    requested_by: m.requested_by,
    input: m.input,
    usage: { ...m.usage },
    remit: { autonomy: remit.autonomy, grants: [...remit.grants], tools: [...remit.tools], scopes: [...remit.scopes] },
  };
}

/**
 * The action the policies see: tool, connector, operation, args and summary from the
 * proposal; `writes` and `system_of_record` from the descriptors and the bundle. A tool no
 * gateway describes is a write to a system of record (decisions 5.2).
 */
export async function enrichAction(k: Parameters<typeof describeTool>[0], bundle: Bundle, proposal: Record<string, unknown>): Promise<PolicyAction> {
  const tool = proposal.tool as string;
  const d = await describeTool(k, bundle, tool);
  const dot = tool.indexOf('.');
  const args = proposal.args;
  return {
    tool,
    connector: d.connector || (dot > 0 ? tool.slice(0, dot) : tool),
    operation: dot > 0 ? tool.slice(dot + 1) : '',
    args: args !== null && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {},
    writes: d.known ? d.writes : true,
    system_of_record: d.known ? d.system_of_record : true,
    summary: typeof proposal.summary === 'string' ? proposal.summary : '',
  };
}

/** The decision an existing approval dictates (decisions 5.4). */
export function decisionFromApproval(a: Pick<ApprovalRow, 'approval_id' | 'state' | 'rule' | 'approver'>): DecisionResult | null {
  if (a.state === 'approved') return { decision: 'allow', rule: `approved:${a.approval_id}`, approver: a.approver, matched: [], errors: [] };
  if (a.state === 'rejected') return { decision: 'deny', rule: `rejected:${a.approval_id}`, approver: a.approver, matched: [], errors: [] };
  if (a.state === 'pending') return { decision: 'approval_required', rule: a.rule, approver: a.approver, matched: [], errors: [] };
  return null;
}

/** `<connector>.<operation>`: both parts non-empty, no blanks, no `*`; the first dot splits them. */
const TOOL_ID = /^[^.\s*]+\.[^\s*]+$/;

export class ActionService {
  constructor(private readonly e: RunEngine) {}

  /**
   * POST /v1/leases/{id}/actions. Returns the decision; throws 403 action_denied (after the
   * decision is recorded) for deny, 410 for a lease that is not active.
   */
  async propose(leaseId: string, proposal: Record<string, unknown>): Promise<ProposalResult> {
    const k = this.e.k;
    if (typeof proposal.tool !== 'string' || proposal.tool.length === 0) throw new SvcError('request_invalid', '/action/tool must be a non-empty string', { path: '/action/tool' });
    // Interface 2.1: a tool id is <connector>.<operation> (a pattern such as billing.* is no id).
    if (!TOOL_ID.test(proposal.tool)) {
      throw new SvcError('request_invalid', `/action/tool "${proposal.tool}" is not a tool id <connector>.<operation>`, { path: '/action/tool' });
    }
    if (proposal.args !== undefined && (proposal.args === null || typeof proposal.args !== 'object' || Array.isArray(proposal.args))) {
      throw new SvcError('request_invalid', '/action/args must be an object', { path: '/action/args' });
    }
    if (proposal.summary !== undefined && typeof proposal.summary !== 'string') throw new SvcError('request_invalid', '/action/summary must be a string', { path: '/action/summary' });
    for (let attempt = 0; ; attempt++) {
      const lease = await this.e.leases.active(leaseId);
      if (lease.kind === 'compensation') {
        throw new SvcError('invalid_state', 'a compensation lease runs its compensate tool directly; it proposes no actions', { lease_id: leaseId });
      }
      const { model, remit } = await this.e.modelAndRemit(lease.run_id);
      const stored = await k.bundles.get(model.bundle_id);
      const id = actionId(model.run_id, lease.step, proposal);
      const action = await enrichAction(k, stored.bundle, proposal);
      const runCtx = policyRunContext(model, remit);
      const existing = await k.db.get<ApprovalRow>('SELECT * FROM approvals WHERE run_id = ? AND action_id = ?', [model.run_id, id]);
      const fromApproval = existing ? decisionFromApproval(existing) : null;
      if (existing && !fromApproval) {
        throw new SvcError('invalid_state', `the approval ${existing.approval_id} of this action is ${existing.state}`, { approval_id: existing.approval_id, state: existing.state });
      }
      const decided = fromApproval ?? (await k.policies.decide(model.policies, action, runCtx));
      const now = k.clock.now();
      let created = false;
      let conflict = false;
      const result = await this.e.mutate(model.run_id, async (w) => {
        // Each attempt says afresh: PostgreSQL may run this again after a serialization failure (pg-db.ts).
        created = false;
        conflict = false;
        await this.e.leases.requireActive(w, leaseId);
        const again = await w.tx.get<ApprovalRow>('SELECT * FROM approvals WHERE run_id = ? AND action_id = ?', [model.run_id, id]);
        if ((again?.state ?? null) !== (existing?.state ?? null)) {
          conflict = true; // decided or created meanwhile: decide again
          return null;
        }
        let approvalId: string | null = existing && fromApproval ? existing.approval_id : null;
        let approver = decided.approver;
        if (decided.decision === 'approval_required' && !approvalId) {
          approvalId = newId('approval', now);
          approver = decided.approver ?? managerApprover(runCtx);
          await w.tx.run(
            `INSERT INTO approvals (approval_id, run_id, step, action_id, action, rule, approver, state, created_at, errors)
             VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
            [approvalId, model.run_id, lease.step, id, canonicalJson(action), decided.rule, approver, isoTime(now), approvalErrors(decided.errors)],
          );
          created = true;
        }
        const payload: ActionDecidedPayload = {
          step: lease.step,
          lease_id: leaseId,
          action_id: id,
          proposal,
          action,
          // Hashed before the log's redaction can touch the arguments: it is the gateway's
          // args_hash of the call that runs this action (src/kernel/uncompensated-writes.ts).
          args_hash: canonicalHash(action.args),
          run: runCtx,
          policies: model.policies,
          source: fromApproval ? 'approval' : 'policy',
          decision: decided.decision,
          rule: decided.rule,
          approver: approver ?? null,
          approval_id: approvalId,
          matched: decided.matched,
          errors: decided.errors,
        };
        await w.append({ kind: 'action.decided', payload: payload, actor: { worker_id: lease.worker_id } });
        if (decided.decision === 'approval_required') {
          if (created) {
            const req: ApprovalRequestedPayload = { approval_id: approvalId!, step: lease.step, action_id: id, action, rule: decided.rule, approver: approver! };
            await w.append({ kind: 'approval.requested', payload: req, actor: KERNEL_ACTOR });
          }
          // Interface 4.1 rule 4: park for the human and release the lease at once.
          const parked: RunParkedPayload = { reason: 'human', step: lease.step, approval_id: approvalId, lease_id: leaseId };
          await w.append({ kind: 'run.parked', payload: parked, actor: KERNEL_ACTOR });
          await w.tx.run("UPDATE leases SET status = 'released', ended_at = ? WHERE lease_id = ? AND status = 'active'", [isoTime(now), leaseId]);
        }
        const answer: ProposalResult = { action_id: id, decision: decided.decision, rule: decided.rule, approval_id: approvalId, approver: approver ?? null };
        if (decided.errors.length > 0) answer.errors = decided.errors;
        return answer;
      });
      if (conflict || !result) {
        if (attempt >= 3) throw new SvcError('unavailable', 'the approval for this action kept changing; try again', {}, 503);
        continue;
      }
      if (created) k.metrics.approvalsPending.inc();
      if (result.decision === 'deny') {
        throw new SvcError('action_denied', `action ${result.action_id} is denied by ${result.rule}`, {
          action_id: result.action_id,
          decision: 'deny',
          rule: result.rule,
          approval_id: result.approval_id,
          ...(result.errors ? { errors: result.errors } : {}),
        });
      }
      return result;
    }
  }
}
