/**
 * The decision engine of decisions 5.2, pure: compiled policies in, a decision out. Every rule
 * of every policy is evaluated; the most restrictive matching effect wins (deny >
 * approval_required > allow) and `rule` names the first matching rule with that effect, in
 * policy_set order then source order, as `<policy>/<rule>`. With no match the default rule
 * applies. A condition that fails to evaluate fails closed (decisions 5.1): it counts as
 * matched for deny and require_approval rules, as not matched for allow rules, and is listed
 * in `errors`.
 */
import type { Decision, DecisionResult, PolicyAction, PolicyRunContext } from '../types.js';
import { celContext } from './cel-env.js';
import type { CompiledPolicy } from './compile.js';

const RESTRICTIVENESS: Record<Decision, number> = { allow: 0, approval_required: 1, deny: 2 };

/** The rule names of the default rule (decisions 5.2). */
export const DEFAULT_RULES = { sorWrite: 'default/sor_write', allow: 'default/allow' } as const;

/** `role:<requested_by.manager>`: who approves when a rule names no approver. */
export function managerApprover(run: PolicyRunContext): string {
  return `role:${run.requested_by.manager}`;
}

/** The default rule alone: a write to a system of record needs approval unless autonomous. */
export function defaultDecision(action: PolicyAction, run: PolicyRunContext): DecisionResult {
  if (action.writes && action.system_of_record && run.remit.autonomy !== 'autonomous') {
    return { decision: 'approval_required', rule: DEFAULT_RULES.sorWrite, approver: managerApprover(run), matched: [], errors: [] };
  }
  return { decision: 'allow', rule: DEFAULT_RULES.allow, approver: null, matched: [], errors: [] };
}

function errorMessage(err: unknown): string {
  const e = err as { summary?: string; message?: string };
  return e?.summary ?? String(e?.message ?? err).split('\n')[0] ?? 'evaluation failed';
}

/** Decides a proposed action under the pinned policies, in policy_set order. */
export function decide(policies: readonly CompiledPolicy[], action: PolicyAction, run: PolicyRunContext): DecisionResult {
  let ctx: Record<string, unknown> | null = null;
  let contextError: string | null = null;
  try {
    ctx = celContext(action, run);
  } catch (err) {
    // An action no condition can read (absurdly deep arguments): every condition fails closed.
    contextError = `the action cannot be evaluated: ${errorMessage(err)}`;
  }
  const matched: DecisionResult['matched'] = [];
  const errors: DecisionResult['errors'] = [];
  let winner: { rule: string; decision: Decision; approver: string | null } | null = null;

  for (const policy of policies) {
    for (const rule of policy.rules) {
      const name = `${policy.ref.name}/${rule.name}`;
      let hit: boolean;
      try {
        if (!ctx) throw new Error(contextError!);
        const value: unknown = rule.program(ctx);
        if (typeof value === 'boolean') hit = value;
        else {
          errors.push({ rule: name, message: `condition evaluated to ${describeValue(value)}, not a bool` });
          hit = rule.decision !== 'allow';
        }
      } catch (err) {
        errors.push({ rule: name, message: errorMessage(err) });
        hit = rule.decision !== 'allow';
      }
      if (!hit) continue;
      matched.push({ rule: name, effect: rule.decision });
      if (!winner || RESTRICTIVENESS[rule.decision] > RESTRICTIVENESS[winner.decision]) {
        winner = { rule: name, decision: rule.decision, approver: rule.decision === 'approval_required' ? (rule.approver ?? managerApprover(run)) : null };
      }
    }
  }
  if (!winner) return { ...defaultDecision(action, run), matched, errors };
  return { decision: winner.decision, rule: winner.rule, approver: winner.approver, matched, errors };
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'bigint') return `the int ${value}`;
  if (typeof value === 'string') return 'a string';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value === 'object' ? 'map' : typeof value}`;
}
