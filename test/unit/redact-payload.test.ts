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

  it('hands the payload back untouched when nothing is registered', () => {
    const p = { output: { a: 1 } };
    expect(redactEventPayload(new Redactor(), 'step.completed', p)).toBe(p);
  });
});
