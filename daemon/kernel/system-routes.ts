/** GET /v1/health, /v1/keys, /v1/metrics (interface 4.1, decisions §2). */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { VERSION } from '../../src/version.js';

export async function systemRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  app.get('/health', async () => ({
    ok: true,
    version: VERSION,
    uptime_s: Math.floor((kernel.clock.now() - kernel.startedAt) / 1000),
    runs: await kernel.runCounts(),
  }));

  app.get('/keys', async () => kernel.keys.published());

  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', kernel.metrics.registry.contentType);
    return kernel.metrics.text();
  });
}
