/**
 * The run and action a policy unit test decides over: a billing refund proposed by ana
 * (support), under a supervised remit for billing.*. One shape for the policy tests, so a
 * field the policy context gains is added once.
 */
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';
import type { PolicyAction, PolicyRunContext } from '../../src/types.js';

/** A `billing.refund` write to a system of record with these args. */
export function refundAction(args: Record<string, unknown>, summary = ''): PolicyAction {
  return toPolicyAction({ tool: 'billing.refund', args, writes: true, system_of_record: true, summary });
}

/** Run run_1 of refunds/refund with `over` laid over the defaults (no usage, no grants). */
export function policyRun(over: Record<string, unknown> = {}): PolicyRunContext {
  return toPolicyRun({
    id: 'run_1',
    bundle: 'refunds',
    workflow: 'refund',
    department: 'support',
    requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
    input: {},
    usage: { tokens: 0, usd: 0 },
    remit: { autonomy: 'supervised', grants: [], tools: ['billing.*'], scopes: [] },
    ...over,
  });
}
