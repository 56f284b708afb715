/**
 * App factories (fastify's testing guide: build, never listen). `buildKernelApp` is what
 * integration tests start on port 0; daemon/server.ts listens.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Kernel } from '../src/kernel/kernel.js';
import { globalRedactor } from '../src/log/logger.js';
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
  // The last line of defence, as on the gateway: the kernel hands out what the gateway
  // describes (an MCP tool's description can quote its own env or args) and repeats what
  // callers send; no registered secret leaves in a body. A callback hook: an async one costs
  // every response a promise (bench/README.md item 20).
  app.addHook('onSend', (_req, _reply, payload, done) => {
    done(null, typeof payload === 'string' && globalRedactor.size > 0 ? globalRedactor.redactJsonText(payload) : payload);
  });
  await app.register(kernelPlugin, { prefix: '/v1', kernel, bearerRequired: opts.token !== null });
  return app;
}
