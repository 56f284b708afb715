/**
 * Paged replay (decisions §7, docs/design.md "Replay reads in pages") against the one-shot read
 * it replaced: a row spliced in at any seq, however low, is still read and reported, and an
 * append that lands while the replay runs is a later head's, not a row past this one.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openInProcessKernel, type InProcessKernel } from '../helpers/in-process-kernel.js';
import type { SqliteDb } from '../../src/store/sqlite-db.js';
import type { SqlDb } from '../../src/store/sql-db.js';

const BUNDLE = {
  name: 'short',
  version: '1.0.0',
  department: 'ops',
  tools: { 'test.echo': { writes: false } },
  workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } },
};
let h: InProcessKernel;
let runId: string;

beforeEach(async () => {
  h = await openInProcessKernel(BUNDLE, 'svc-replay-review-');
  const k = h.kernel;
  const remit = await k.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: { id: 'ana', role: 'agent', manager: 'lead' } });
  runId = (await k.runs.create({ bundle_id: h.bundleId, workflow: 'one', input: {}, remit_id: remit.remit_id })).run_id;
  for (let i = 1; i < 5; i++) await k.runs.appendExternalEvent(runId, { kind: 'note', payload: { i }, actor: 'w' });
});
afterEach(() => h.close());

describe('paged replay vs one-shot replay', () => {
  it('reports a row spliced in below Number.MIN_SAFE_INTEGER (the one-shot read saw every row)', async () => {
    const raw = (h.kernel.db as SqliteDb).raw;
    raw.prepare('INSERT INTO run_events (run_id, seq, hash, prev_hash, kind, payload, actor, at) SELECT run_id, -9223372036854775808, hash, prev_hash, kind, payload, actor, at FROM run_events WHERE run_id = ? AND seq = 1').run(runId);
    const n = (raw.prepare('SELECT COUNT(*) AS n FROM run_events WHERE run_id = ?').get(runId) as { n: number }).n;
    const r = await h.kernel.runs.replay(runId);
    expect(r.events).toBe(n); // 6 rows in the log
    expect(r.chain_valid).toBe(false);
  });

  it('does not report an append made while the replay ran as a row past the head', async () => {
    const db = h.kernel.db as SqlDb & Record<string, unknown>;
    const orig = db.all;
    let pages = 0;
    let appended: Promise<unknown> | null = null;
    db.all = ((sql: string, p?: unknown[]) => {
      // A worker's append that reaches the store just before the replay reads past the head.
      if (sql.includes('FROM run_events') && ++pages === 2) appended = h.kernel.runs.appendExternalEvent(runId, { kind: 'note', payload: { late: true }, actor: 'w' });
      return orig.call(db, sql, p as never);
    }) as never;
    try {
      const r = await h.kernel.runs.replay(runId);
      await appended;
      expect(appended).not.toBeNull();
      expect(r.chain_errors).toEqual([]);
      expect(r).toMatchObject({ events: 5, chain_valid: true, state_matches: true });
    } finally {
      db.all = orig;
    }
  });
});
