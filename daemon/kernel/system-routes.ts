/** GET /v1/health, /v1/keys, /v1/metrics (interface 4.1, decisions §2). */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { storeHealthFault } from '../../src/store/sqlite-db.js';
import { VERSION } from '../../src/version.js';

export async function systemRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  // ok is false while the store refuses writes (a full disk, a file gone read-only: its reads,
  // and so the counts, may still work), with the fault under `store`; true again once a write
  // succeeds (svcd(8) ERRORS, unavailable).
  app.get('/health', async () => {
    const store = storeHealthFault(kernel.db);
    return {
      ok: store === null,
      version: VERSION,
      uptime_s: kernel.uptimeSeconds(),
      runs: await kernel.runCounts(),
      ...(store ? { store } : {}),
    };
  });

  app.get('/keys', async () => kernel.keys.published());

  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', kernel.metrics.registry.contentType);
    return kernel.metrics.text();
  });
}
