/**
 * The kernel under /v1: one encapsulated plugin, so it can share a process with the
 * gateway or run alone. Each domain registers its routes from its own file.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { systemRoutes } from './system-routes.js';
import { remitRoutes } from './remit-routes.js';
import { bundleRoutes } from './bundle-routes.js';
import { policyRoutes } from './policy-routes.js';
import { runRoutes } from './run-routes.js';
import { eventRoutes } from './event-routes.js';
import { leaseRoutes } from './lease-routes.js';
import { approvalRoutes } from './approval-routes.js';

export async function kernelPlugin(app: FastifyInstance, opts: { kernel: Kernel; /** Every request carried the kernel's bearer token (one is configured). */ bearerRequired?: boolean }): Promise<void> {
  const { kernel } = opts;
  await systemRoutes(app, kernel);
  await remitRoutes(app, kernel);
  await bundleRoutes(app, kernel);
  await policyRoutes(app, kernel);
  await runRoutes(app, kernel);
  await eventRoutes(app, kernel, { bearer: opts.bearerRequired === true });
  await leaseRoutes(app, kernel);
  await approvalRoutes(app, kernel);
}
