/**
 * POST /v1/bundles (body up to 8 MiB, decisions §10), GET /v1/bundles, GET /v1/bundles/{id}
 * (interface 4.1 rule 1, decisions 4). The list body is `{bundles: [summary…]}`; a bundle is
 * returned as stored: `{bundle_id, name, version, bundle, signature, created_at}`.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { ONE_MIB } from '../http/fastify-options.js';

/** Largest accepted POST /v1/bundles body. */
export const BUNDLE_BODY_LIMIT = 8 * ONE_MIB;

const postSchema = {
  body: {
    type: 'object',
    required: ['bundle'],
    properties: {
      bundle: { type: 'object' },
      // A missing or null signature, or one without its members, is an unsigned bundle: 422
      // bundle_signature_invalid (interface 7.1), judged by the bundle service. Members of the
      // wrong type are a 400 request_invalid with their path, as any wrong type (decisions §10).
      signature: {
        type: ['object', 'null'],
        properties: { key_id: { type: 'string' }, signature: { type: 'string' } },
      },
    },
  },
} as const;

export async function bundleRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  app.post('/bundles', { bodyLimit: BUNDLE_BODY_LIMIT, schema: postSchema }, async (req, reply) => {
    const { status, ...result } = await kernel.bundles.post(req.body as { bundle: unknown; signature?: unknown });
    return reply.status(status).send(result);
  });

  app.get('/bundles', async () => kernel.bundles.list());

  app.get<{ Params: { id: string } }>('/bundles/:id', async (req) => kernel.bundles.get(req.params.id));
}
