/**
 * Replay of decisions recorded before `matches` ran on RE2 (D §7, D 5.1; svc-policy(5)). Until
 * 2026-11-29 cel-js ran `matches` on the JS RegExp; a store upgraded from then holds decisions
 * made that way. Patterns accepted by both engines still read some text differently (`.` and
 * `\r`, `\s` and U+00A0, a character outside the BMP), and a stored policy may take its
 * pattern from the data (`(?i)…`, `\A…`). Such a decision is the policy's all the same:
 * replay must not report it as a mismatch. Here the old engine is the JS RegExp put back
 * under `matches` while the decisions are made (what the old build ran), RE2 for the replay.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { lease, leaseAndComplete, propose, pushBundle, pushPolicy, refundsBundle, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

const engine = vi.hoisted(() => ({ jsRegExp: false }));
vi.mock('../../src/policy/re2-matches.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/policy/re2-matches.js')>();
  return { ...original, re2Matches: (text: string, pattern: string) => (engine.jsRegExp ? new RegExp(pattern).test(text) : original.re2Matches(text, pattern)) };
});

afterEach(() => {
  engine.jsRegExp = false;
});

const LITERALS = `deny blank_memo
  when action.args.memo.matches("^\\\\s*$")
deny odd_note
  when action.args.note.matches("^a.b$")
allow code_ok
  when action.args.code.matches("^[A-Z]{3}-\\\\d{4}$") && action.args.note.matches("^[a-z ]+$|^a.b$|^.$")
`;

/** Accepted by svc until 2026-11-29 (a pattern from the run's input); put in the store as it was then. */
const FROM_INPUT = `allow by_input
  when action.args.code.matches(run.input.pattern)
`;

/** One run through its action step: the decision on `args` under `policy`, recorded on the engine in force. */
async function decideOne(d: RunDaemon, bundleId: string, policy: string, args: Record<string, unknown>, input: Record<string, unknown> = {}): Promise<{ run_id: string; decision: string; rule: string }> {
  const run = await startRun(d, bundleId, { policy_set: [policy], input: { invoice_id: 'inv-1', ticket: 't', ...input } });
  await leaseAndComplete(d, { amount: 50 }, undefined, ['model']);
  await leaseAndComplete(d, { rows: [] }, undefined, ['tool']);
  const l = (await lease(d, ['action'])).body;
  const p = await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', code: 'ABC-1234', note: 'please refund', memo: 'x', ...args } });
  const body = p.status === 403 ? p.body.error.details : p.body;
  // Park nothing for the next run's leases: release the action step either way.
  if (p.status === 200 && body.decision === 'allow') await d.kernel_(`/leases/${l.lease_id}/complete`, { body: { output: { id: 'r-1' }, usage: { tokens: 1, usd: 0 } } });
  else await d.kernel_(`/runs/${run.run_id}/abandon`, { body: { reason: 'test', actor: { id: 'ops-1', role: 'ops' } } });
  return { run_id: run.run_id, decision: body.decision, rule: body.rule };
}

describe('replay of decisions recorded with the JS RegExp `matches` (D §7)', () => {
  it('literal patterns on text RE2 reads otherwise, and a stored pattern from the input: no decision mismatch', async () => {
    await using d = await startRunDaemon();
    const bundle = refundsBundle();
    bundle.workflows.refund!.input_schema = { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' }, ticket: { type: 'string' }, pattern: { type: 'string' } } };
    const bundleId = await pushBundle(d, bundle);
    await pushPolicy(d, 'literals', '1', LITERALS);
    const db = new Database(join(d.dataDir, 'kernel.db'));
    db.prepare('INSERT INTO policies (policy_id, name, version, source, created_at) VALUES (?, ?, ?, ?, ?)').run('pol_01M8MB3VSATNZMPBR9BAEG9X5M', 'from_input', '1', FROM_INPUT, new Date().toISOString());
    db.close();

    engine.jsRegExp = true; // the old build
    const recorded = [
      await decideOne(d, bundleId, 'literals', { memo: '\u00a0' }), // JS \s takes U+00A0, RE2 \s does not
      await decideOne(d, bundleId, 'literals', { note: 'a\rb' }), // JS . stops at \r, RE2 . does not
      await decideOne(d, bundleId, 'literals', { note: '😀' }), // JS . is one UTF-16 unit
      await decideOne(d, bundleId, 'from_input', {}, { pattern: '(?i)abc' }), // no JS RegExp: fails closed
      await decideOne(d, bundleId, 'from_input', {}, { pattern: '\\AABC' }), // JS: the letter A
      await decideOne(d, bundleId, 'literals', {}), // reads alike
    ];
    expect(recorded.map((r) => r.rule)).toEqual(['literals/blank_memo', 'default/sor_write', 'default/sor_write', 'default/sor_write', 'default/sor_write', 'literals/code_ok']);
    engine.jsRegExp = false; // the upgraded build

    for (const r of recorded) {
      const rep = await d.kernel_(`/runs/${r.run_id}/replay`, { method: 'POST' });
      expect(rep.status).toBe(200);
      expect(rep.body, r.rule).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [] });
    }

    // Decided now, on RE2: a literal pattern reads as the JS RegExp read it (re2-matches.ts
    // jsReading), a pattern from the data is RE2's (`(?i)` works); each replays the same.
    const now = [
      await decideOne(d, bundleId, 'literals', { memo: '\u00a0' }),
      await decideOne(d, bundleId, 'literals', { note: 'a\rb' }),
      await decideOne(d, bundleId, 'from_input', {}, { pattern: '(?i)abc' }),
    ];
    expect(now.map((r) => r.rule)).toEqual(['literals/blank_memo', 'default/sor_write', 'from_input/by_input']);
    for (const r of now) expect((await d.kernel_(`/runs/${r.run_id}/replay`, { method: 'POST' })).body.decision_mismatches).toEqual([]);
  });

  it('a decision neither engine makes from the stored source is still a mismatch', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    await pushPolicy(d, 'literals', '1', LITERALS);
    const r = await decideOne(d, bundleId, 'literals', { note: 'axb' });
    expect(r.rule).toBe('literals/odd_note');
    const db = new Database(join(d.dataDir, 'kernel.db'));
    db.prepare('UPDATE policies SET source = ? WHERE name = ?').run(LITERALS.replace('"^a.b$")\nallow', '"^a.c$")\nallow'), 'literals');
    db.close();
    const rep = (await d.kernel_(`/runs/${r.run_id}/replay`, { method: 'POST' })).body;
    expect(rep.chain_valid).toBe(true);
    expect(rep.decision_mismatches).toHaveLength(1);
    expect(rep.decision_mismatches[0]).toMatchObject({ recorded: { rule: 'literals/odd_note' }, replayed: { rule: 'literals/code_ok' } });
  });
});
