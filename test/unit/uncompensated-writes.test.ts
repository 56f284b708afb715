/**
 * Writes abandon cannot undo (decisions §6: compensations of completed steps only;
 * docs/design.md Abandon): allowed write actions and gateway writes of steps that never
 * completed, in seq order.
 */
import { describe, expect, it } from 'vitest';
import { canonicalHash } from '../../src/encoding/canonical-json.js';
import { MAX_NAMED_WRITES, uncompensatedWrites } from '../../src/kernel/uncompensated-writes.js';

const decided = (seq: number, step: string, decision: string, writes = true) => ({
  seq,
  kind: 'action.decided',
  payload: { step, decision, action: { tool: 'billing.refund', writes } },
});
const called = (seq: number, step: string, outcome: string, writes = true) => ({ seq, kind: 'tool.called', payload: { step, tool: 'crm.update', writes, outcome } });
const completed = (seq: number, step: string) => ({ seq, kind: 'step.completed', payload: { step } });

describe('uncompensatedWrites', () => {
  it('names allowed write actions and gateway writes that may have run, for steps that never completed', () => {
    const events = [
      decided(3, 'refund', 'allow'),
      called(4, 'refund', 'ok'),
      called(5, 'refund', 'upstream_error'), // a timeout may have written
      called(6, 'refund', 'idempotency_outcome_unknown'),
      called(7, 'refund', 'args_invalid'), // never ran
      called(8, 'refund', 'circuit_open'),
      called(9, 'refund', 'deterministic_failure'), // an MCP tool's error result may have written part of it
      called(14, 'refund', 'idempotency_in_flight'), // another caller holds the key: this one did not run
      decided(10, 'refund', 'approval_required'),
      decided(11, 'refund', 'deny'),
      decided(12, 'refund', 'allow', false), // a read
      called(13, 'refund', 'ok', false),
    ];
    expect(uncompensatedWrites(events).named).toEqual([
      { seq: 3, kind: 'action.decided', step: 'refund', tool: 'billing.refund' },
      { seq: 4, kind: 'tool.called', step: 'refund', tool: 'crm.update', outcome: 'ok' },
      { seq: 5, kind: 'tool.called', step: 'refund', tool: 'crm.update', outcome: 'upstream_error' },
      { seq: 6, kind: 'tool.called', step: 'refund', tool: 'crm.update', outcome: 'idempotency_outcome_unknown' },
      { seq: 9, kind: 'tool.called', step: 'refund', tool: 'crm.update', outcome: 'deterministic_failure' },
    ]);
  });

  it("counts an allowed action as one write however often it is proposed or called, naming its first call's seq and its last call's outcome (a replay is no write)", () => {
    const act = (seq: number, step: string, id: string, args: Record<string, unknown>) => ({
      seq,
      kind: 'action.decided',
      payload: { step, action_id: id, decision: 'allow', action: { tool: 'billing.refund', args, writes: true } },
    });
    const call = (seq: number, step: string, args: Record<string, unknown> | null, outcome: string, extra: Record<string, unknown> = {}) => ({
      seq,
      kind: 'tool.called',
      payload: { step, tool: 'billing.refund', writes: true, outcome, ...(args ? { args_hash: canonicalHash(args) } : {}), ...extra },
    });
    const a = { invoice: 'inv-1', amount: 10 };
    const b = { invoice: 'inv-2', amount: 20 };
    const events = [
      act(3, 'refund', 'act_a', a),
      call(4, 'refund', a, 'args_invalid'), // never ran
      act(5, 'refund', 'act_a', a), // the retried step proposes it again: the same write
      call(6, 'refund', a, 'upstream_error'), // ran it, and may have written
      act(7, 'refund', 'act_b', b),
      call(8, 'refund', b, 'ok'), // b's call, though a's came first
      call(9, 'refund', a, 'ok'), // a again after its upstream error: still a's one write
      call(10, 'refund', a, 'ok', { replayed: true }), // answered from the store
      call(11, 'refund', { invoice: 'inv-9' }, 'ok'), // no allowed action has these arguments: its own
      act(12, 'other', 'act_c', a), // allowed, never called: a write that may still run
      call(13, 'other', null, 'ok'), // recorded without args_hash: matched by step and tool
    ];
    expect(uncompensatedWrites(events)).toEqual({
      named: [
        // upstream_error at 6, ok at 9: the outcome is the last call's, and which call that is is said
        { seq: 3, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 6, outcome: 'ok', calls: 2, last_called_seq: 9 },
        { seq: 7, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 8, outcome: 'ok' },
        { seq: 11, kind: 'tool.called', step: 'refund', tool: 'billing.refund', outcome: 'ok' },
        { seq: 12, kind: 'action.decided', step: 'other', tool: 'billing.refund', called_seq: 13, outcome: 'ok' },
      ],
      total: 4,
    });
  });

  it('a repeat refused idempotency_outcome_unknown under the key of a write already named is that write again, not another (decisions §9: never a second execution)', () => {
    const call = (seq: number, step: string, outcome: string, key: string | null) => ({ seq, kind: 'tool.called', payload: { step, tool: 'ledger.create', writes: true, outcome, idempotency_key: key } });
    const events = [
      call(3, 'create', 'upstream_error', 'k1'), // timed out mid-write: its key is kept unknown
      call(6, 'create', 'idempotency_outcome_unknown', 'k1'), // the retry
      call(11, 'create', 'idempotency_outcome_unknown', 'k1'), // a resume
      call(16, 'create', 'idempotency_outcome_unknown', 'k1'), // another resume
      call(20, 'other', 'idempotency_outcome_unknown', 'k2'), // its gateway stopped mid-write and recorded no call: the only trace
      call(21, 'other', 'idempotency_outcome_unknown', 'k2'),
      call(22, 'third', 'idempotency_outcome_unknown', null), // no key to tell: named
    ];
    expect(uncompensatedWrites(events)).toEqual({
      named: [
        { seq: 3, kind: 'tool.called', step: 'create', tool: 'ledger.create', outcome: 'upstream_error' },
        { seq: 20, kind: 'tool.called', step: 'other', tool: 'ledger.create', outcome: 'idempotency_outcome_unknown' },
        { seq: 22, kind: 'tool.called', step: 'third', tool: 'ledger.create', outcome: 'idempotency_outcome_unknown' },
      ],
      total: 3,
    });
  });

  it("pairs by the args_hash the kernel recorded before the log redacted the arguments' secrets", () => {
    const raw = { url: 'https://billing.internal/s3cr3t-path/inv/1' };
    const events = [
      { seq: 3, kind: 'action.decided', payload: { step: 'refund', action_id: 'act_a', decision: 'allow', args_hash: canonicalHash(raw), action: { tool: 'billing.refund', args: { url: '[REDACTED]/inv/1' }, writes: true } } },
      { seq: 4, kind: 'tool.called', payload: { step: 'refund', tool: 'billing.refund', writes: true, outcome: 'ok', args_hash: canonicalHash(raw) } },
    ];
    expect(uncompensatedWrites(events)).toEqual({ named: [{ seq: 3, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 4, outcome: 'ok' }], total: 1 });
  });

  it('leaves out steps that completed, also when the write came from an earlier attempt', () => {
    const events = [decided(3, 'a', 'allow'), called(4, 'a', 'upstream_error'), decided(5, 'a', 'allow'), completed(6, 'a'), called(7, 'b', 'ok')];
    expect(uncompensatedWrites(events)).toEqual({ named: [{ seq: 7, kind: 'tool.called', step: 'b', tool: 'crm.update', outcome: 'ok' }], total: 1 });
  });

  it('skips payloads that are not what the kernel and gateway write; names up to the cap and counts them all', () => {
    const odd = [
      { seq: 1, kind: 'tool.called', payload: null },
      { seq: 2, kind: 'tool.called', payload: { step: 5, tool: 'x', writes: true, outcome: 'ok' } },
      { seq: 3, kind: 'action.decided', payload: { step: 'a', decision: 'allow', action: 'x' } },
      { seq: 4, kind: 'note', payload: { step: 'a', tool: 'x', writes: true } },
    ];
    expect(uncompensatedWrites(odd)).toEqual({ named: [], total: 0 });
    const many = Array.from({ length: MAX_NAMED_WRITES + 5 }, (_, i) => called(i + 1, 's', 'ok'));
    const { named, total } = uncompensatedWrites(many);
    expect(named).toHaveLength(MAX_NAMED_WRITES);
    expect(named.at(-1)!.seq).toBe(MAX_NAMED_WRITES);
    expect(total).toBe(MAX_NAMED_WRITES + 5);
  });
});
