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
import { celContext, evaluateCondition } from './cel-env.js';
import type { CompiledPolicy, CompiledRule } from './compile.js';
import { costOver, dataMeter, EVALUATION_BUDGET, type DataMeter } from './condition-cost.js';

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
  const text = e?.summary ?? String(e?.message ?? err).split('\n')[0] ?? 'evaluation failed';
  return text + overloadHint(text);
}

const NUMBER_TYPES = new Set(['int', 'uint', 'double']);
const ARITHMETIC = new Set(['+', '-', '*', '/', '%']);
const ORDERING = new Set(['<', '<=', '>', '>=']);

/**
 * What to write instead, for the two type mismatches a policy over a worker's arguments meets
 * (svc-policy(5) CONDITIONS): a whole number (CEL int) in arithmetic with a double, and a
 * number ordered against a string. Both type-check, since args are dyn, and fail closed on
 * every decision; cel-js's message names the types but not the fix. Only the error's text
 * changes: the decision is the same (replay compares decision, rule and approver).
 */
export function overloadHint(message: string): string {
  const m = /^no such overload: (?:dyn<)?(\w+)>? (\S+) (?:dyn<)?(\w+)>?$/.exec(message);
  if (!m) return '';
  const [, left, op, right] = m as unknown as [string, string, string, string];
  if (ARITHMETIC.has(op) && left !== right && NUMBER_TYPES.has(left) && NUMBER_TYPES.has(right)) {
    const a = (t: string) => `${t === 'int' ? 'an' : 'a'} ${t}`;
    return ` (${a(left)} and ${a(right)} do not mix in arithmetic, and a whole number in the data is an int: convert one, as in double(action.args.amount) * 1.1)`;
  }
  if (ORDERING.has(op) && ((NUMBER_TYPES.has(left) && right === 'string') || (left === 'string' && NUMBER_TYPES.has(right)))) {
    return ' (a number and a string do not compare: write the number without quotes, or convert the string with int() or double())';
  }
  return '';
}

/**
 * One decision being made, a rule at a time: `decide` hands it every rule in one go; a policy
 * test (decisions 5.3) hands it a few at a time and lets other requests run in between
 * (src/policy/corpus.ts). Rules must come in policy_set order, then source order.
 */
export class DecisionInProgress {
  private readonly ctx: Record<string, unknown> | null = null;
  private readonly contextError: string | null = null;
  private readonly matched: DecisionResult['matched'] = [];
  private readonly errors: DecisionResult['errors'] = [];
  private winner: { rule: string; decision: Decision; approver: string | null } | null = null;
  /** Measured when the first rule whose cost grows with the data is evaluated. */
  private data: DataMeter | null = null;

  constructor(
    private readonly action: PolicyAction,
    private readonly run: PolicyRunContext,
  ) {
    try {
      this.ctx = celContext(action, run);
    } catch (err) {
      // An action no condition can read (absurdly deep arguments): every condition fails closed.
      this.contextError = `the action cannot be evaluated: ${errorMessage(err)}`;
    }
  }

  /** Evaluates one rule of `policy`. */
  evaluate(policy: CompiledPolicy, rule: CompiledRule): void {
    const name = `${policy.ref.name}/${rule.name}`;
    let hit: boolean;
    try {
      if (!this.ctx) throw new Error(this.contextError!);
      this.checkBudget(rule);
      const value: unknown = evaluateCondition(rule.program, this.ctx);
      if (typeof value === 'boolean') hit = value;
      else {
        this.errors.push({ rule: name, message: `condition evaluated to ${describeValue(value)}, not a bool` });
        hit = rule.decision !== 'allow';
      }
    } catch (err) {
      this.errors.push({ rule: name, message: errorMessage(err) });
      hit = rule.decision !== 'allow';
    }
    if (!hit) return;
    this.matched.push({ rule: name, effect: rule.decision });
    if (!this.winner || RESTRICTIVENESS[rule.decision] > RESTRICTIVENESS[this.winner.decision]) {
      this.winner = { rule: name, decision: rule.decision, approver: rule.decision === 'approval_required' ? (rule.approver ?? managerApprover(this.run)) : null };
    }
  }

  /** Throws, before it runs, for a condition that could take longer than the budget here. */
  private checkBudget(rule: CompiledRule): void {
    if (!rule.cost.growsWithData) return;
    this.data ??= dataMeter({ action: this.action, run: this.run });
    const bound = costOver(rule.cost, this.data);
    if (bound <= EVALUATION_BUDGET) return;
    throw new Error(
      `not evaluated: up to ${formatBound(bound)} steps over this action and run, over the budget of ${EVALUATION_BUDGET.toLocaleString('en-US')} ` +
        '(a loop inside a loop grows with the product of their lists; an operation on a list or text, with its size)',
    );
  }

  /** The decision over the rules evaluated so far (the default rule when none matched). */
  result(): DecisionResult {
    const { matched, errors, winner } = this;
    if (!winner) return { ...defaultDecision(this.action, this.run), matched, errors };
    return { decision: winner.decision, rule: winner.rule, approver: winner.approver, matched, errors };
  }
}

/** Decides a proposed action under the pinned policies, in policy_set order. */
export function decide(policies: readonly CompiledPolicy[], action: PolicyAction, run: PolicyRunContext): DecisionResult {
  const decision = new DecisionInProgress(action, run);
  for (const policy of policies) for (const rule of policy.rules) decision.evaluate(policy, rule);
  return decision.result();
}

function formatBound(n: number): string {
  return Number.isFinite(n) && n < 1e15 ? Math.round(n).toLocaleString('en-US') : n.toExponential(1);
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'bigint') return `the int ${value}`;
  if (typeof value === 'string') return 'a string';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value === 'object' ? 'map' : typeof value}`;
}
