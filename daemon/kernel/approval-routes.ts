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
import { SvcError } from '../../src/errors.js';
import { shortened } from '../../src/encoding/cut-text.js';

/**
 * The `approver` filter (interface 4.1: `role:<role>`). Every approver is `role:` and a role, so
 * another value could only ever list nothing: a client that sent `approver=finance` read an
 * empty inbox as "nothing to decide". The role itself is not checked further: a requester's
 * manager may be any text (decisions 5.2), and refusing a spelling could hide its approvals.
 */
function approverQuery(value: unknown): string | undefined {
  const v = stringQuery(value, 'approver');
  if (v === undefined || (v.startsWith('role:') && v.length > 'role:'.length)) return v;
  throw new SvcError('request_invalid', `approver must be role:<role>, as every approval names its approver; got "${shortened(v, 64)}"`, { path: '/querystring/approver' });
}

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
      approver: approverQuery(q.approver),
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
