/**
 * POST /v1/remits, POST /v1/remits/{id}/derive, GET /v1/remits/{id} (interface 4.1, 5.4), and
 * GET /v1/remits: the grants that exist, for an operator or auditor (svcd(8)).
 * Bodies are validated by the remit service (one JSON Schema per body through ajv, no
 * coercion, unknown members refused) so the library and HTTP callers get the same 400s.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { knownRemit } from './known-ids.js';
import { enumQuery, intQuery, stringQuery } from '../http/common.js';

export async function remitRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  app.post('/remits', async (req, reply) => {
    const created = await kernel.remits.mint(req.body);
    return reply.status(201).send(created);
  });

  app.post<{ Params: { id: string } }>('/remits/:id/derive', { preParsing: knownRemit(kernel) }, async (req, reply) => {
    const created = await kernel.remits.derive(req.params.id, req.body);
    return reply.status(201).send(created);
  });

  app.get<{ Querystring: Record<string, unknown> }>('/remits', async (req) => {
    const q = req.query;
    return kernel.remits.list({
      state: enumQuery(q.state, 'state', ['active', 'expired'] as const),
      run_id: stringQuery(q.run_id, 'run_id'),
      parent_id: stringQuery(q.parent_id, 'parent_id'),
      limit: intQuery(q.limit, 'limit', 50, 1, 500),
      after: stringQuery(q.after, 'after'),
    });
  });

  app.get<{ Params: { id: string } }>('/remits/:id', async (req) => kernel.remits.get(req.params.id));
}
