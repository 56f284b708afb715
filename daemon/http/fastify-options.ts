/** fastify construction options shared by the kernel and gateway listeners. */
import type { FastifyHttpOptions } from 'fastify';
import type { Server } from 'node:http';
import { renderClientError, renderFrameworkError } from './common.js';

export const ONE_MIB = 1024 * 1024;

/**
 * How long a client has to send a whole request, headers and body (svcd(8), LIMITS). fastify
 * turns Node's own bound (300 s) off, so a client sending its body a byte at a time held its
 * connection, and a descriptor, for good: enough of them and svcd could accept no one. The
 * time a route takes to answer (a long poll, a tool call) is not counted.
 */
export const REQUEST_TIMEOUT_MS = 120_000;

export function fastifyOptions(bodyLimit = ONE_MIB): FastifyHttpOptions<Server> {
  return {
    logger: false, // svc's own structured logger writes to stderr (daemon/http/common.ts)
    bodyLimit,
    requestTimeout: REQUEST_TIMEOUT_MS,
    // Node's default 16 KiB for all headers together would answer an over-long X-Svc-Remit
    // with 431 before the route sees it; decisions §3 makes a token over 16 KiB
    // token_malformed, so an oversize credential is a 401 credential_invalid (D §10). Larger
    // header blocks are a 400 request_invalid in the envelope (renderClientError).
    // Node answers an HTTP/1.1 request without Host with an empty 400 of its own; installCommon
    // answers it in the envelope instead (requireHostHeader off hands it to fastify).
    http: { maxHeaderSize: 64 * 1024, requireHostHeader: false },
    // Requests that arrive during a drain get a 503 in the listener's envelope from
    // installCommon (fastify's own 503 body is not an envelope).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // A malformed URL (`/v1/runs/%ZZ`) is answered by the router before any hook runs: render
    // it as the listener's error envelope (decisions §10).
    frameworkErrors: renderFrameworkError,
    clientErrorHandler: renderClientError,
    // An unknown id is a 404 not_found from the route whatever its length (decisions §10),
    // not a router 400: the request line is already bounded by maxHeaderSize above.
    // A trailing slash names the same resource (`/v1/runs/` is the list, not run ""); so does a
    // path with a doubled slash (`//v1/health`: a base URL ending in `/` joined to `/v1/...`).
    routerOptions: { maxParamLength: 64 * 1024, ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    ajv: {
      // Bodies are validated, never rewritten: wrong types are a 400, not a silent coercion.
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
  };
}
