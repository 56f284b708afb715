/**
 * `preParsing` hooks for routes with an id in the path: an unknown id is 404 not_found
 * (decisions §10, `details.resource`, `details.id`) whatever the body, so a caller probing an
 * id never gets a 400 about a body that could not have mattered. They run before the body is
 * parsed, so this holds for a body that is not JSON at all, or too large, as well.
 */
import type { FastifyRequest } from 'fastify';
import { notFound } from '../../src/errors.js';
import type { Kernel } from '../../src/kernel/kernel.js';
import type { LeaseRow } from '../../src/kernel/run-store.js';

type Hook = (req: FastifyRequest) => Promise<void>;

/**
 * The row a hook found, for the route to start from instead of reading it again (the lease
 * route: one read a completion fewer; the route's own transaction re-reads what it relies on).
 */
export const knownRows = new WeakMap<FastifyRequest, unknown>();

function known(kernel: Kernel, resource: string, sql: string, keep = false): Hook {
  return async (req) => {
    const id = (req.params as { id?: string }).id ?? '';
    const row = await kernel.db.get(sql, [id]);
    if (!row) throw notFound(resource, id);
    if (keep) knownRows.set(req, row);
  };
}

export const knownRun = (k: Kernel): Hook => known(k, 'run', 'SELECT 1 AS x FROM runs WHERE run_id = ?');
/**
 * A lease route: unknown is 404, and an ended lease (released, completed, failed, expired) is
 * 410 lease_expired before the body is looked at (decisions §6: every call on such a lease is
 * 410, so a worker's malformed late report is not a 400).
 */
export const knownLease = (k: Kernel): Hook => {
  const find = known(k, 'lease', 'SELECT * FROM leases WHERE lease_id = ?', true);
  return async (req) => {
    await find(req);
    const row = knownRows.get(req) as LeaseRow;
    await k.runs.leases.active(row.lease_id, row);
  };
};
export const knownApproval = (k: Kernel): Hook => known(k, 'approval', 'SELECT 1 AS x FROM approvals WHERE approval_id = ?');
export const knownRemit = (k: Kernel): Hook => known(k, 'remit', 'SELECT 1 AS x FROM remits WHERE remit_id = ?');
