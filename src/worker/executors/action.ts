/**
 * An `action` step (interface 3, decisions 5.4): propose the action; on `allow` execute it
 * through the gateway under a key bound to the action id (so a re-leased, approved action runs
 * exactly once); on `approval_required` stop (the kernel parked the run and released the
 * lease); on `deny` fail deterministically.
 */
import { canonicalJson } from '../../encoding/canonical-json.js';
import { StepError } from '../errors.js';
import type { StepRuntime } from '../step-runtime.js';
import type { StepOutcome } from '../types.js';
import { isArgs } from './tool.js';
import { cutText } from '../../encoding/cut-text.js';

/**
 * The summary approvers read: the step's own, else the tool and its arguments. The arguments
 * are written as canonical JSON because the summary is part of the action, hence of its id
 * (decisions 5.4): a model answer replayed from the event log after a park has its keys in
 * another order, and must still propose the action that was approved.
 */
export function actionSummary(tool: string, args: Record<string, unknown>, given?: unknown): string {
  if (typeof given === 'string' && given.trim() !== '') return given;
  const text = `${tool} ${canonicalJson(args)}`;
  return text.length <= 200 ? text : cutText(text, 199) + '…';
}

export type ActionResult =
  | { type: 'executed'; action_id: string; result: unknown }
  | { type: 'parked'; action_id: string; approval_id: string | null }
  /** `rule` names the policy rule, or `rejected:<approval_id>`; `approval_id` is the rejected approval's. */
  | { type: 'denied'; action_id: string; rule: string | null; approval_id: string | null };

/** Proposes and, when allowed, executes one action. Shared by action and model steps. */
export async function proposeAndExecute(rt: StepRuntime, tool: string, args: Record<string, unknown>, summary: string): Promise<ActionResult> {
  const decision = await rt.propose({ tool, args, summary });
  if (decision.decision === 'deny') return { type: 'denied', action_id: decision.action_id, rule: decision.rule ?? null, approval_id: decision.approval_id ?? null };
  if (decision.decision === 'approval_required') {
    return { type: 'parked', action_id: decision.action_id, approval_id: decision.approval_id ?? null };
  }
  if (decision.decision !== 'allow') throw new StepError('internal', `kernel answered the proposal with decision ${String(decision.decision)}`, false);
  const res = await rt.callTool(tool, args, rt.actionKey(decision.action_id), null);
  return { type: 'executed', action_id: decision.action_id, result: res.result };
}

export async function executeAction(rt: StepRuntime): Promise<StepOutcome> {
  const def = rt.lease.step_def ?? {};
  if (typeof def.tool !== 'string' || def.tool === '') throw new StepError('step_invalid', `action step ${rt.lease.step} has no tool`, true);
  const args = isArgs(def.args) ? def.args : {};
  const r = await proposeAndExecute(rt, def.tool, args, actionSummary(def.tool, args, def.summary));
  // The approver's reason goes into the step's error, where an operator looking at the
  // quarantined step reads why (a model step hands it to the model instead).
  if (r.type === 'denied') throw new StepError('action_denied', deniedMessage(def.tool, r.rule, rejectionReason(rt, r.approval_id)), true);
  if (r.type === 'parked') return { type: 'parked', action_id: r.action_id, approval_id: r.approval_id, usage: rt.usage };
  return { type: 'completed', output: r.result, usage: rt.usage };
}

export function deniedMessage(tool: string, rule: string | null, reason: string | null = null): string {
  return `action ${tool} denied${rule ? ` by ${rule}` : ''}${reason !== null ? ` (the approver's reason: ${JSON.stringify(reason)})` : ''}`;
}

/** The approver's reason, when the denial is a rejected approval the step's prior events hold. */
export function rejectionReason(rt: StepRuntime, approvalId: string | null): string | null {
  if (approvalId === null) return null;
  const decided = (rt.lease.context?.prior_events ?? []).find((e) => e.kind === 'approval.decided' && (e.payload as { approval_id?: string }).approval_id === approvalId);
  const reason = (decided?.payload as { reason?: unknown } | undefined)?.reason;
  return typeof reason === 'string' && reason !== '' ? reason : null;
}
