/**
 * Leases and action proposals (interface 2.6, 2.7, 3, 4.1 rule 4; decisions §6, 5.4). A lease
 * request long-polls up to `wait_seconds` and gives up when the client goes away.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { knownLease, knownRows } from './known-ids.js';
import { LEASE_TTL, MAX_WAIT_SECONDS, type CompleteBody, type FailBody, type LeaseRequest } from '../../src/kernel/leases.js';
import { LEASE_KINDS } from '../../src/types.js';
import type { LeaseRow } from '../../src/kernel/run-store.js';
import { MAX_USAGE_TOKENS, MAX_USAGE_USD } from '../../src/spend.js';

/** Spend of the step; other members (a model name, say) are ignored. */
const usage = {
  type: 'object',
  // Bounded (src/spend.ts): an unbounded usd would sum to Infinity, which no event can carry.
  properties: { tokens: { type: 'integer', minimum: 0, maximum: MAX_USAGE_TOKENS }, usd: { type: 'number', minimum: 0, maximum: MAX_USAGE_USD } },
} as const;

const leaseBody = {
  type: 'object',
  required: ['worker_id'], // kinds, like ttl_seconds, has a default: every kind
  properties: {
    worker_id: { type: 'string', minLength: 1, maxLength: 256 },
    kinds: { type: 'array', minItems: 1, maxItems: 4, items: { enum: LEASE_KINDS } },
    ttl_seconds: { type: 'integer', minimum: 1, maximum: LEASE_TTL.max },
    wait_seconds: { type: 'number', minimum: 0, maximum: MAX_WAIT_SECONDS },
  },
} as const;

const completeBody = {
  type: 'object',
  properties: { output: {}, usage },
} as const;

const failBody = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code'],
      properties: { code: { type: 'string', minLength: 1, maxLength: 128 }, message: { type: 'string', maxLength: 65536 } },
    },
    deterministic: { type: 'boolean' },
    usage,
  },
} as const;

const actionBody = {
  type: 'object',
  required: ['action'],
  properties: {
    action: {
      type: 'object',
      required: ['tool'],
      properties: { tool: { type: 'string', minLength: 1, maxLength: 256 }, args: { type: 'object' }, summary: { type: 'string', maxLength: 4096 } },
    },
  },
} as const;

export async function leaseRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  const leases = kernel.runs.leases;
  // Before the body is parsed: an unknown lease is 404 and an ended one 410 whatever was sent.
  const preParsing = knownLease(kernel);

  // Long polls must not hold up a drain: wake them when the listener starts closing.
  app.addHook('preClose', async () => kernel.runs.releaseWaiters());

  app.post<{ Body: LeaseRequest }>('/leases', { schema: { body: leaseBody } }, async (req, reply) => {
    const gone = new AbortController();
    let handed: string | null = null;
    // A worker that dies while long-polling must not be handed a lease it can never see: when
    // the response cannot be delivered (the client went away before it was flushed), the
    // lease is released at once and the step is ready again with the same attempt.
    const release = (leaseId: string) => {
      leases.releaseUndelivered(leaseId).catch((err: unknown) => kernel.logger.warn('could not release an undelivered lease', { lease_id: leaseId, err: String(err) }));
    };
    reply.raw.on('close', () => {
      if (reply.raw.writableFinished) return;
      gone.abort();
      if (handed !== null) release(handed);
    });
    const lease = await leases.acquire(req.body, gone.signal);
    if (!lease) return reply.status(204).send();
    if (gone.signal.aborted || reply.raw.destroyed) {
      release(lease.lease_id);
      return reply.status(204).send();
    }
    handed = lease.lease_id;
    return lease;
  });

  app.post<{ Params: { id: string } }>('/leases/:id/heartbeat', { preParsing }, async (req) => leases.heartbeat(req.params.id, knownRows.get(req) as LeaseRow | undefined));

  app.post<{ Params: { id: string }; Body: CompleteBody }>('/leases/:id/complete', { preParsing, schema: { body: completeBody } }, async (req) =>
    leases.complete(req.params.id, req.body, knownRows.get(req) as LeaseRow | undefined),
  );

  app.post<{ Params: { id: string }; Body: FailBody & { error: { code: string; message?: string } } }>(
    '/leases/:id/fail',
    { preParsing, schema: { body: failBody } },
    async (req) => leases.fail(req.params.id, { ...req.body, error: { code: req.body.error.code, message: req.body.error.message ?? '' } }, knownRows.get(req) as LeaseRow | undefined),
  );

  app.post<{ Params: { id: string }; Body: { action: Record<string, unknown> } }>('/leases/:id/actions', { preParsing, schema: { body: actionBody } }, async (req) => {
    const r = await kernel.runs.actions.propose(req.params.id, req.body.action);
    // Interface 4.1's four members; `errors` (decisions 5.1) only when a condition failed closed.
    return { action_id: r.action_id, decision: r.decision, rule: r.rule, approval_id: r.approval_id, ...(r.errors ? { errors: r.errors } : {}) };
  });
}
