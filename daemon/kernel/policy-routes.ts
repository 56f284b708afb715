/**
 * Policies (interface 4.1, decisions 5): POST /v1/policies, GET /v1/policies (`{policies:
 * [{policy_id, name, version, created_at}…]}`), GET /v1/policies/{name} (the latest version)
 * and /v1/policies/{name}/{version} (each `{policy_id, name, version, source, created_at}`),
 * and POST /v1/policies/test (decisions 5.3). Bodies are checked by the policy service (one
 * JSON Schema each, src/policy/requests.ts) so library and HTTP callers get the same 400s.
 */
import type { FastifyInstance } from 'fastify';
import { SvcError } from '../../src/errors.js';
import type { Kernel } from '../../src/kernel/kernel.js';

export async function policyRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  app.post('/policies', async (req, reply) => {
    const { status, ...result } = await kernel.policies.post(req.body);
    return reply.status(status).send(result);
  });

  app.get('/policies', async () => kernel.policies.list());

  app.get<{ Params: { name: string } }>('/policies/:name', async (req) => kernel.policies.getLatest(req.params.name));

  app.get<{ Params: { name: string; version: string } }>('/policies/:name/:version', async (req) =>
    kernel.policies.get(req.params.name, req.params.version),
  );

  // A test runs for seconds, in slices between which other requests are answered
  // (src/policy/corpus.ts). It stops when its client goes away (no one would read the answer)
  // and when the kernel starts closing (a drain must not wait for a dry run).
  const running = new Set<AbortController>();
  app.addHook('preClose', async () => {
    for (const test of running) test.abort(new SvcError('unavailable', 'the service is shutting down', {}));
  });

  // 1 MiB like every body but a bundle's (decisions §10); clients send a larger corpus in
  // slices (src/policy/corpus-slices.ts).
  app.post('/policies/test', async (req, reply) => {
    const test = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) test.abort(new SvcError('unavailable', 'the client closed the connection; the policy test stopped', {}));
    });
    running.add(test);
    try {
      return await kernel.policies.test(req.body, { signal: test.signal });
    } finally {
      running.delete(test);
    }
  });
}
