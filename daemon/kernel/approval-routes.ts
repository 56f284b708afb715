/**
 * Approvals (interface 2.8, 3; decisions 5.4): the inbox list `{approvals, next}`, one
 * approval, and the decision.
 */
import type { FastifyInstance } from 'fastify';
import { APPROVAL_STATES, type ApprovalState, type DecideBody } from '../../src/kernel/approvals.js';
import type { Kernel } from '../../src/kernel/kernel.js';
import { enumQuery, intQuery, stringQuery } from '../http/common.js';
import { ACTOR_SCHEMA } from './run-routes.js';
import { knownApproval } from './known-ids.js';

const decideBody = {
  type: 'object',
  required: ['decision', 'actor'],
  properties: {
    decision: { enum: ['approved', 'rejected'] },
    actor: ACTOR_SCHEMA,
    reason: { type: ['string', 'null'], maxLength: 4096 },
  },
} as const;

export async function approvalRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  const approvals = kernel.runs.approvals;

  app.get<{ Querystring: Record<string, unknown> }>('/approvals', async (req) => {
    const q = req.query;
    return approvals.list({
      state: enumQuery<ApprovalState>(q.state, 'state', APPROVAL_STATES),
      approver: stringQuery(q.approver, 'approver'),
      run_id: stringQuery(q.run_id, 'run_id'),
      limit: intQuery(q.limit, 'limit', 50, 1, 500),
      after: stringQuery(q.after, 'after'),
    });
  });

  app.get<{ Params: { id: string } }>('/approvals/:id', async (req) => approvals.get(req.params.id));

  app.post<{ Params: { id: string }; Body: DecideBody }>('/approvals/:id', { preParsing: knownApproval(kernel), schema: { body: decideBody } }, async (req) => {
    const r = await approvals.decide(req.params.id, req.body);
    return { run_id: r.run_id, run_state: r.run_state, approval: r.approval };
  });
}
