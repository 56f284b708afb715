/**
 * The gateway routes under /v1 (interface 4.2, decisions §9). Each route translates HTTP into
 * one call on the Gateway; the logic lives in src/gateway.
 */
import type { FastifyInstance } from 'fastify';
import type { ToolCallRequest } from '../../src/gateway/call.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { errorCodeOfReply } from '../http/common.js';

const nullableString = (max: number) => ({ anyOf: [{ type: 'string', minLength: 1, maxLength: max }, { type: 'null' }] });

const CALL_BODY = {
  type: 'object',
  required: ['remit_token', 'tool'],
  properties: {
    // No length bound here: a token over 16 KiB is the verifier's token_malformed refusal
    // (decisions §3, interface 5.3: a 403 with its tool.refused event), within the 1 MiB body.
    remit_token: { type: 'string' },
    run_id: { anyOf: [{ type: 'string', maxLength: 256 }, { type: 'null' }] },
    step: { anyOf: [{ type: 'string', maxLength: 256 }, { type: 'null' }] },
    lease_id: { anyOf: [{ type: 'string', maxLength: 256 }, { type: 'null' }] },
    tool: { type: 'string', minLength: 1, maxLength: 512 },
    args: { type: 'object' },
    idempotency_key: nullableString(512),
    scope: nullableString(512),
  },
} as const;

export async function gatewayRoutes(app: FastifyInstance, opts: { gateway: Gateway }): Promise<void> {
  const { gateway } = opts;

  app.get('/health', async () => gateway.health());

  app.get('/tools', async () => gateway.tools());

  const started = new WeakSet<object>();
  app.post<{ Body: ToolCallRequest }>('/tools/call', {
    schema: { body: CALL_BODY },
    // An error answered before the handler ran (body not JSON or not the schema, too large,
    // wrong content type) is counted here; every call the handler starts counts itself.
    // A callback hook: an async one would cost every call a promise (bench/README.md item 20).
    onSend: (req, reply, payload, done) => {
      if (reply.statusCode >= 400 && !started.has(req)) gateway.countUnstartedCall(req.body, errorCodeOfReply(reply) ?? 'request_invalid', reply.elapsedTime / 1000);
      done(null, payload);
    },
  }, async (req, reply) => {
    started.add(req);
    const res = await gateway.call(req.body);
    if (res.headers) void reply.headers(res.headers);
    return reply.status(res.status).send(res.body);
  });

  app.get('/canaries', async () => gateway.canaryStatuses());

  // No length limit on the name: an unknown connector is 404 however long (decisions §10).
  app.post<{ Params: { connector: string } }>('/canaries/:connector/probe', async (req) => {
    return gateway.probe(req.params.connector);
  });

  app.post<{ Params: { connector: string } }>('/canaries/:connector/release', async (req) => {
    return gateway.release(req.params.connector);
  });

  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', gateway.metrics.registry.contentType);
    return gateway.metrics.text();
  });

  if (gateway.config.test_tools) {
    // Decisions §9: the shape test.shape's probe returns, so canary drift can be driven from
    // outside. Body: {shape: {...}}, or the shape object itself.
    app.post<{ Body: Record<string, unknown> }>('/test/shape', { schema: { body: { type: 'object' } } }, async (req) => {
      const body = req.body;
      const keys = Object.keys(body);
      const shape = keys.length === 1 && keys[0] === 'shape' && body.shape !== null && typeof body.shape === 'object' && !Array.isArray(body.shape) ? (body.shape as Record<string, unknown>) : body;
      gateway.setTestShape(shape);
      return { ok: true, shape };
    });
  }
}
