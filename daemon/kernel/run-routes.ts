/**
 * Runs (interface 2.4, 3, 4.1; decisions §6, §8): create, list, get, resume, abandon, replay,
 * and the retry of compensations that failed for good (docs/design.md).
 * Bodies are checked by route schemas (ajv, no coercion); query strings by hand.
 */
import type { FastifyInstance } from 'fastify';
import type { Kernel } from '../../src/kernel/kernel.js';
import { RUN_STATES, type Actor, type CreateRunBody } from '../../src/kernel/run-engine.js';
import type { RunState } from '../../src/types.js';
import { enumQuery, intQuery, stringQuery } from '../http/common.js';
import { knownRun } from './known-ids.js';
import { SvcError } from '../../src/errors.js';
import { PRINTABLE_NAME, PRINTABLE_NAME_MESSAGE, PRINTABLE_NAME_PATTERN } from '../../src/util/printable-name.js';

const requester = {
  type: 'object',
  required: ['id', 'role', 'manager'],
  properties: { id: { type: 'string', minLength: 1 }, role: { type: 'string', minLength: 1 }, manager: { type: 'string', minLength: 1 } },
} as const;

/** An actor on a request body: `{id, role}` (more members are kept), or omitted. */
export const ACTOR_SCHEMA = {
  type: 'object',
  required: ['id', 'role'],
  properties: { id: { type: 'string', minLength: 1, pattern: PRINTABLE_NAME_PATTERN }, role: { type: 'string', minLength: 1, pattern: PRINTABLE_NAME_PATTERN } },
} as const;

const createBody = {
  type: 'object',
  required: ['bundle_id', 'workflow', 'remit_id'],
  properties: {
    bundle_id: { type: 'string', minLength: 1, maxLength: 128 },
    workflow: { type: 'string', minLength: 1, maxLength: 128 },
    input: {},
    remit_id: { type: 'string', minLength: 1, maxLength: 128 },
    requested_by: requester,
  },
} as const;

/**
 * An actor recorded on an event as given (abandon, resume, external events): an object
 * (`{id, role}` for a person, `{worker_id}` for a worker, by convention), a non-empty name, or
 * null. Numbers, booleans, lists and "" are refused: the log keeps what it is given for good.
 * The conventional members, where present, are names like the approvals' `actor` (I 4.1), so a
 * log never reads `{id: 7}` or `{role: ""}`; other members are kept as given.
 */
export function recordedActor(value: unknown): Actor | null {
  const refuse = (path: string, message: string) => new SvcError('request_invalid', `${path} ${message}`, { path });
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') {
    if (value === '') throw refuse('/actor', 'must not be empty');
    if (value.length > 256) throw refuse('/actor', 'must be at most 256 characters');
    // The kernel's own actor on the events it appends: no caller may sign as it.
    if (value === 'kernel') throw refuse('/actor', '"kernel" is reserved for the events the kernel appends itself');
    if (!PRINTABLE_NAME.test(value)) throw refuse('/actor', PRINTABLE_NAME_MESSAGE);
    return value;
  }
  if (typeof value !== 'object' || Array.isArray(value)) throw refuse('/actor', 'must be an object ({id, role} or {worker_id}), a name, or null');
  for (const member of ['id', 'role', 'worker_id'] as const) {
    const v = (value as Record<string, unknown>)[member];
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw refuse(`/actor/${member}`, 'must be a non-empty string');
    if (typeof v === 'string' && !PRINTABLE_NAME.test(v)) throw refuse(`/actor/${member}`, PRINTABLE_NAME_MESSAGE);
  }
  return value as Actor;
}

/** In a body schema: any value, checked by recordedActor in the handler (it words the errors). */
export const RECORDED_ACTOR = {} as const;

const abandonBody = {
  type: 'object',
  required: ['reason'],
  properties: { reason: { type: 'string', minLength: 1, maxLength: 4096 }, actor: RECORDED_ACTOR },
} as const;

/** Interface 4.1: `{actor}`; other members are ignored like on every kernel body but remits. */
const resumeBody = {
  type: ['object', 'null'],
  properties: { actor: RECORDED_ACTOR },
} as const;

/** `{reason, actor}`, both optional: an operator's retry of compensations that failed for good. */
const retryCompensationsBody = {
  type: ['object', 'null'],
  properties: { reason: { type: ['string', 'null'], minLength: 1, maxLength: 4096 }, actor: RECORDED_ACTOR },
} as const;

export async function runRoutes(app: FastifyInstance, kernel: Kernel): Promise<void> {
  const runs = kernel.runs;
  const preParsing = knownRun(kernel);

  app.post<{ Body: CreateRunBody }>('/runs', { schema: { body: createBody } }, async (req, reply) => {
    const created = await runs.create(req.body);
    return reply.status(201).send(created);
  });

  app.get<{ Querystring: Record<string, unknown> }>('/runs', async (req) => {
    const q = req.query;
    return runs.list({
      state: enumQuery<RunState>(q.state, 'state', RUN_STATES),
      department: stringQuery(q.department, 'department'),
      limit: intQuery(q.limit, 'limit', 50, 1, 500),
      after: stringQuery(q.after, 'after'),
    });
  });

  app.get<{ Params: { id: string } }>('/runs/:id', async (req) => runs.get(req.params.id));

  app.post<{ Params: { id: string } }>('/runs/:id/replay', { preParsing }, async (req) => runs.replay(req.params.id));

  app.post<{ Params: { id: string }; Body: { reason: string; actor?: Actor } }>(
    '/runs/:id/abandon',
    { preParsing, schema: { body: abandonBody } },
    async (req, reply) => {
      const r = await runs.abandon(req.params.id, req.body.reason, recordedActor(req.body.actor));
      return reply.status(202).send({
        compensations_scheduled: r.compensations_scheduled,
        run_id: req.params.id,
        state: r.state,
        uncompensated_writes: r.uncompensated.named,
        uncompensated_writes_total: r.uncompensated.total,
      });
    },
  );

  // docs/design.md "Retrying compensations"; svcd(8).
  app.post<{ Params: { id: string }; Body: { reason?: string | null; actor?: Actor } | null }>(
    '/runs/:id/compensations/retry',
    { preParsing, schema: { body: retryCompensationsBody } },
    async (req, reply) => {
      const r = await runs.retryCompensations(req.params.id, req.body?.reason ?? null, recordedActor(req.body?.actor));
      return reply.status(202).send(r);
    },
  );

  app.post<{ Params: { id: string }; Body: { actor?: Actor } | null }>(
    '/runs/:id/resume',
    { preParsing, schema: { body: resumeBody } },
    async (req) => runs.resume(req.params.id, recordedActor(req.body?.actor)),
  );
}
