/**
 * The gateway listener (interface 4.2): its own fastify app, so it runs beside the kernel in
 * one svcd process or alone. Errors use the gateway body `{ok: false, error: {code, message,
 * details}}` (decisions §9) and every response passes through the redactor on its way out.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { SvcError } from '../../src/errors.js';
import { gatewayError } from '../../src/gateway/call.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { globalRedactor, type Logger, type Redactor } from '../../src/log/logger.js';
import { installCommon, type ErrorRenderer } from '../http/common.js';
import { fastifyOptions } from '../http/fastify-options.js';
import { gatewayRoutes } from './routes.js';

/**
 * The gateway error body of an error thrown on a gateway route (decisions §9): the same
 * `gatewayError` the call path answers with (which adds `error.circuit` itself when a
 * breaker is open).
 */
export const renderGatewayError: ErrorRenderer = (err: SvcError) => gatewayError(err.code, err.message, err.details).body;

export interface GatewayAppOptions {
  /** Bearer token; null means loopback clients only (decisions §9). */
  token: string | null;
  logger: Logger;
  redactor?: Redactor;
}

export async function buildGatewayApp(gateway: Gateway, opts: GatewayAppOptions): Promise<FastifyInstance> {
  const app = Fastify(fastifyOptions());
  const redactor = opts.redactor ?? globalRedactor;
  installCommon(app, { token: opts.token, render: renderGatewayError, logger: opts.logger, redactor });
  await app.register(gatewayRoutes, { prefix: '/v1', gateway });
  return app;
}
