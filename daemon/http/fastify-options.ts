/** fastify construction options shared by the kernel and gateway listeners. */
import type { FastifyServerOptions } from 'fastify';

export const ONE_MIB = 1024 * 1024;

export function fastifyOptions(bodyLimit = ONE_MIB): FastifyServerOptions {
  return {
    logger: false, // svc's own structured logger writes to stderr (daemon/http/common.ts)
    bodyLimit,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    ajv: {
      // Bodies are validated, never rewritten: wrong types are a 400, not a silent coercion.
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
  };
}
