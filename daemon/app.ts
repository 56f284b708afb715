/**
 * App factories (fastify's testing guide: build, never listen). `buildKernelApp` is what
 * integration tests start on port 0; daemon/server.ts listens.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Kernel } from '../src/kernel/kernel.js';
import { installCommon, renderKernelError } from './http/common.js';
import { fastifyOptions } from './http/fastify-options.js';
import { kernelPlugin } from './kernel/plugin.js';

export interface KernelAppOptions {
  /** Bearer token; null means loopback clients only. */
  token: string | null;
}

export async function buildKernelApp(kernel: Kernel, opts: KernelAppOptions): Promise<FastifyInstance> {
  const app = Fastify(fastifyOptions());
  installCommon(app, { token: opts.token, render: renderKernelError, logger: kernel.logger });
  await app.register(kernelPlugin, { prefix: '/v1', kernel, bearerRequired: opts.token !== null });
  return app;
}
