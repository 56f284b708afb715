// src/events/redact-payload.ts: what of an event's payload the redactor may touch (docs/design.md
// Events; svc-events(7) DESCRIPTION).
import { describe, expect, it } from 'vitest';
import { redactEventPayload } from '../../src/events/redact-payload.js';
import { Redactor } from '../../src/log/logger.js';

const redactor = new Redactor();
redactor.add('5432');

describe('redactEventPayload', () => {
  it("keeps a kernel event's ids, attempts, times and spend; redacts what workers, tools and callers wrote", () => {
    const completed = { step: 'lookup', attempt: 1, lease_id: 'lease_015432', output: { port: 5432, note: 'on 5432' }, usage: { tokens: 15432, usd: 0.5432 } };
    expect(redactEventPayload(redactor, 'step.completed', completed)).toEqual({
      step: 'lookup',
      attempt: 1,
      lease_id: 'lease_015432',
      output: { port: '[REDACTED]', note: 'on [REDACTED]' },
      usage: { tokens: 15432, usd: 0.5432 },
    });
    const failed = { step: 'a', kind: 'tool', attempt: 2, lease_id: null, error: { code: 'upstream_error', message: 'port 5432 refused' }, deterministic: false, usage: { tokens: 0, usd: 0 } };
    expect(redactEventPayload(redactor, 'step.failed', failed).error).toEqual({ code: 'upstream_error', message: 'port [REDACTED] refused' });
    const retry = { step: 'a', kind: 'tool', attempt: 3, delay_ms: 5432, ready_at: '2026-11-29T05:43:20.000Z' };
    expect(redactEventPayload(redactor, 'step.retry_scheduled', retry)).toEqual(retry);
  });

  it('keeps only the run\'s id and usage of the run an action was decided on: its input is the caller\'s', () => {
    const decided = { rule: 'r/5432', run: { id: 'run_1', usage: { tokens: 5432, usd: 0 }, input: { port: 5432 }, department: 'ops' }, action: { tool: 'db.q', args: { port: 5432 } } };
    expect(redactEventPayload(redactor, 'action.decided', decided)).toEqual({
      rule: 'r/5432',
      run: { id: 'run_1', usage: { tokens: 5432, usd: 0 }, input: { port: '[REDACTED]' }, department: 'ops' },
      action: { tool: 'db.q', args: { port: '[REDACTED]' } },
    });
  });

  it("redacts an approver: a manager's is role:<requested_by.manager>, the requester's word", () => {
    const requested = { approval_id: 'apr_1', step: 's', action_id: 'a', action: {}, rule: 'default/sor_write', approver: 'role:5432-ops' };
    expect(redactEventPayload(redactor, 'approval.requested', requested).approver).toBe('role:[REDACTED]-ops');
  });

  it("keeps a posted model.called's usage of plain numbers, which abandon charges; the rest of it is redacted", () => {
    const called = { source: 'worker', step: 's', call_index: 0, usage: { tokens: 15432, usd: 0.5432 }, response: { text: 'port 5432' } };
    expect(redactEventPayload(redactor, 'model.called', called)).toEqual({ ...called, response: { text: 'port [REDACTED]' } });
    const odd = { usage: { tokens: '5432' } }; // not numbers: the poster's text, redacted
    expect(redactEventPayload(redactor, 'model.called', odd)).toEqual({ usage: { tokens: '[REDACTED]' } });
    const named = { usage: { tokens: 1, 'x-5432': 2 } }; // a member of another name: the poster's text too
    expect(redactEventPayload(redactor, 'model.called', named)).toEqual({ usage: { tokens: 1, 'x-[REDACTED]': 2 } });
  });

  it('redacts a posted event whole, kernel-looking members too, and an unknown member\'s name', () => {
    expect(redactEventPayload(redactor, 'note', { usage: { tokens: 5432 }, step: 's5432' })).toEqual({ usage: { tokens: '[REDACTED]' }, step: 's[REDACTED]' });
    expect(redactEventPayload(redactor, 'run.completed', { output: {}, x5432: 1 })).toEqual({ output: {}, 'x[REDACTED]': 1 });
  });

  // docs/design.md Events: the members a kernel event's kernel made or checked and reads back are
  // stored as is, or a `${DB_PORT}` of 5432 turns a spend, an attempt or an id the reducer and
  // replay read into "[REDACTED]" (D §7 hashes what is stored; D §8 sums what is stored).
  const kernelOwned = [
    'run_id', 'bundle_id', 'remit_id', 'parent_run_id', 'lease_id', 'released_lease_id', 'action_id', 'approval_id',
    'cancelled_approval_ids', 'args_hash', 'step', 'steps', 'compensations', 'compensated', 'failed', 'kind', 'attempt',
    'next_attempt', 'expires_at', 'ready_at', 'delay_ms', 'from_state', 'via', 'deterministic', 'budget', 'usage',
    'unreported_usage', 'reserved', 'policies', 'source', 'decision', 'rule', 'matched', 'uncompensated_writes',
    'uncompensated_writes_total',
  ];
  for (const member of kernelOwned) {
    it(`keeps a kernel event's ${member} as is, even where it shows a secret (design: Events)`, () => {
      const payload = { [member]: { tokens: 15432, text: 'x5432', list: ['5432'] }, output: 'x5432' };
      expect(redactEventPayload(redactor, 'step.completed', payload)).toEqual({ [member]: payload[member], output: 'x[REDACTED]' });
    });
  }

  it("keeps only the id and usage of an action's run, and redacts a run that is not an object", () => {
    const run = { id: 'run_05432', usage: { tokens: 15432, usd: 0 }, input: { port: 5432 } };
    expect(redactEventPayload(redactor, 'action.decided', { run })).toEqual({ run: { id: 'run_05432', usage: { tokens: 15432, usd: 0 }, input: { port: '[REDACTED]' } } });
    expect(redactEventPayload(redactor, 'action.decided', { run: 'run_5432' })).toEqual({ run: 'run_[REDACTED]' });
    expect(redactEventPayload(redactor, 'action.decided', { run: null })).toEqual({ run: null });
    expect(redactEventPayload(redactor, 'action.decided', { run: ['5432'] })).toEqual({ run: ['[REDACTED]'] });
  });

  it("redacts a posted model.called usage that is not an object of numbers (the poster's word)", () => {
    expect(redactEventPayload(redactor, 'model.called', { usage: 15432 })).toEqual({ usage: '[REDACTED]' });
    expect(redactEventPayload(redactor, 'model.called', { usage: null, note: '5432' })).toEqual({ usage: null, note: '[REDACTED]' });
    expect(redactEventPayload(redactor, 'model.called', { usage: [15432] })).toEqual({ usage: ['[REDACTED]'] });
  });

  it("keeps the name of a member the kernel owns: the name is the kernel's, not a value (a secret spelled 'attempt')", () => {
    const r = new Redactor();
    r.add('attempt');
    expect(redactEventPayload(r, 'step.leased', { attempt: 2, next_attempt: 3, attempts_left: 1 })).toEqual({ attempt: 2, next_attempt: 3, '[REDACTED]s_left': 1 });
  });

  it('hands the payload back untouched when nothing is registered', () => {
    const p = { output: { a: 1 } };
    expect(redactEventPayload(new Redactor(), 'step.completed', p)).toBe(p);
  });
});
