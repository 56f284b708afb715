/**
 * Replay of a long log (decisions §7) reads and checks it a page at a time and lets the event
 * loop go between pages (the scale sweep: 50,000 events held svcd for 0.3 s in one turn).
 * Counted in turns of the loop, never timed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPLAY_PAGE } from '../../src/kernel/replay.js';
import { openInProcessKernel, type InProcessKernel } from '../helpers/in-process-kernel.js';
import type { SqliteDb } from '../../src/store/sqlite-db.js';

const BUNDLE = {
  name: 'long',
  version: '1.0.0',
  department: 'ops',
  tools: { 'test.echo': { writes: false } },
  workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } },
};
const EVENTS = 2 * REPLAY_PAGE + 10;
let h: InProcessKernel;
let runId: string;

beforeAll(async () => {
  h = await openInProcessKernel(BUNDLE, 'svc-replay-pages-');
  const k = h.kernel;
  const remit = await k.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: { id: 'ana', role: 'agent', manager: 'lead' } });
  runId = (await k.runs.create({ bundle_id: h.bundleId, workflow: 'one', input: {}, remit_id: remit.remit_id })).run_id;
  for (let i = 1; i < EVENTS; i++) await k.runs.appendExternalEvent(runId, { kind: 'note', payload: { i }, actor: 'w' });
});
afterAll(() => h.close());

/** Turns of the event loop taken while `p` was pending. */
async function turnsWhile<T>(p: Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let done = false;
  const tick = () => {
    if (done) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const value = await p;
  done = true;
  return { value, turns };
}

describe('replay of a log longer than a page', () => {
  it('verifies it whole, letting the loop go between pages', async () => {
    const { value, turns } = await turnsWhile(h.kernel.runs.replay(runId));
    expect(value).toMatchObject({ events: EVENTS, chain_valid: true, state_matches: true, chain_errors: [], replay_error: null });
    expect(turns).toBeGreaterThanOrEqual(2);
  });

  it('still reports a row edited on a later page and rows past the head', async () => {
    const raw = (h.kernel.db as SqliteDb).raw;
    raw.prepare("UPDATE run_events SET payload = '{\"i\":-1}' WHERE run_id = ? AND seq = ?").run(runId, REPLAY_PAGE + 5);
    const r = await h.kernel.runs.replay(runId);
    expect(r.chain_errors).toEqual([{ seq: REPLAY_PAGE + 5, reason: 'hash_mismatch' }]);
    raw.prepare("INSERT INTO run_events (run_id, seq, hash, prev_hash, kind, payload, actor, at) SELECT run_id, seq + 5, hash, prev_hash, kind, payload, actor, at FROM run_events WHERE run_id = ? AND seq = ?").run(runId, EVENTS);
    const past = await h.kernel.runs.replay(runId);
    expect(past.events).toBe(EVENTS + 1);
    expect(past.chain_errors.map((e) => e.reason)).toEqual(['hash_mismatch', 'seq_gap', 'prev_hash_mismatch', 'hash_mismatch', 'head_mismatch']);
  });
});
