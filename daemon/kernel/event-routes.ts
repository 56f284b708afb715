/**
 * A run's event log (interface 4.1, 5.2, 6; decisions §7): read with from_seq/limit; external
 * kinds posted with X-Svc-Lease or X-Svc-Remit.
 */
import type { FastifyInstance } from 'fastify';
import { SvcError } from '../../src/errors.js';
import type { Kernel } from '../../src/kernel/kernel.js';
import { intQuery } from '../http/common.js';
import { knownRun } from './known-ids.js';
import { RECORDED_ACTOR, recordedActor } from './run-routes.js';

const postBody = {
  type: 'object',
  required: ['kind'],
  properties: {
    kind: { type: 'string', minLength: 1, maxLength: 64 },
    payload: { type: 'object' },
    actor: RECORDED_ACTOR,
  },
} as const;

function header(value: string | string[] | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new SvcError('credential_invalid', `${name} must be given once`, { header: name });
  // Present but empty (`X-Svc-Lease:`): a bad credential, said as what it is.
  if (value.length === 0) throw new SvcError('credential_invalid', `${name} is empty`, { header: name });
  return value;
}

/**
 * `bearer`: the listener checks a bearer token, so every request that reaches a route carried
 * it. Only then is the bearer a credential for `tool.refused` (decisions §7); a listener
 * without a token has no bearer, and every post needs X-Svc-Lease or X-Svc-Remit (I 5.2).
 */
export async function eventRoutes(app: FastifyInstance, kernel: Kernel, opts: { bearer: boolean }): Promise<void> {
  app.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>('/runs/:id/events', async (req) => {
    const fromSeq = intQuery(req.query.from_seq, 'from_seq', 1, 0, Number.MAX_SAFE_INTEGER);
    const limit = intQuery(req.query.limit, 'limit', 100, 1, 1000);
    return kernel.runs.events(req.params.id, Math.max(1, fromSeq), limit);
  });

  app.post<{ Params: { id: string }; Body: { kind: string; payload?: Record<string, unknown>; actor?: unknown } }>(
    '/runs/:id/events',
    { preParsing: knownRun(kernel), schema: { body: postBody } },
    async (req, reply) => {
      const lease = header(req.headers['x-svc-lease'], 'X-Svc-Lease');
      const remit = header(req.headers['x-svc-remit'], 'X-Svc-Remit');
      const created = await kernel.runs.postExternalEvent(
        req.params.id,
        { kind: req.body.kind, payload: req.body.payload ?? {}, actor: recordedActor(req.body.actor) },
        { lease, remit, bearer: opts.bearer },
      );
      return reply.status(201).send(created);
    },
  );
}
