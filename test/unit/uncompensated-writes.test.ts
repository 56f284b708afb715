/**
 * Writes abandon cannot undo (decisions §6: compensations of completed steps only;
 * docs/design.md Abandon): allowed write actions and gateway writes of steps that never
 * completed, in seq order.
 */
import { describe, expect, it } from 'vitest';
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
      { seq: 4, kind: 'tool.called', step: 'refund', tool: 'crm.update' },
      { seq: 5, kind: 'tool.called', step: 'refund', tool: 'crm.update' },
      { seq: 6, kind: 'tool.called', step: 'refund', tool: 'crm.update' },
      { seq: 9, kind: 'tool.called', step: 'refund', tool: 'crm.update' },
    ]);
  });

  it("counts an allowed action and the gateway call that ran it as one write, naming the call's seq (a replay is no write)", () => {
    const refund = (seq: number, step: string, outcome: string, extra: Record<string, unknown> = {}) => ({
      seq,
      kind: 'tool.called',
      payload: { step, tool: 'billing.refund', writes: true, outcome, ...extra },
    });
    const events = [
      decided(3, 'refund', 'allow'),
      refund(4, 'refund', 'upstream_error'), // ran it (and may have written): the action's call
      decided(5, 'refund', 'allow'), // the next attempt proposes it again
      refund(6, 'refund', 'ok'),
      refund(7, 'refund', 'ok', { replayed: true }), // a repeat answered from the store
      decided(8, 'other', 'allow'), // allowed, never called: still a write that may run
      refund(9, 'refund', 'ok'), // no allowed action left to account for it: a write of its own
      refund(10, 'other', 'ok'), // step other's action, run later: its call
    ];
    expect(uncompensatedWrites(events)).toEqual({
      named: [
        { seq: 3, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 4 },
        { seq: 5, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 6 },
        { seq: 8, kind: 'action.decided', step: 'other', tool: 'billing.refund', called_seq: 10 },
        { seq: 9, kind: 'tool.called', step: 'refund', tool: 'billing.refund' },
      ],
      total: 4,
    });
  });

  it('leaves out steps that completed, also when the write came from an earlier attempt', () => {
    const events = [decided(3, 'a', 'allow'), called(4, 'a', 'upstream_error'), decided(5, 'a', 'allow'), completed(6, 'a'), called(7, 'b', 'ok')];
    expect(uncompensatedWrites(events)).toEqual({ named: [{ seq: 7, kind: 'tool.called', step: 'b', tool: 'crm.update' }], total: 1 });
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
