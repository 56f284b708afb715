/**
 * The kernel under /v1: one encapsulated plugin, so it can share a process with the
 * gateway or run alone. Each domain registers its routes from its own file.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { systemRoutes } from './system-routes.js';

export async function kernelPlugin(app: FastifyInstance, opts: { kernel: Kernel }): Promise<void> {
  const { kernel } = opts;
  await systemRoutes(app, kernel);
}
