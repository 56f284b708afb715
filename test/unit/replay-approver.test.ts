// src/kernel/replay.ts sameApprover: replay compares an approver it derives afresh with the
// log's, which went through the redactor with the values registered then (svc-events(7)).
import { describe, expect, it } from 'vitest';
import { sameApprover } from '../../src/kernel/replay.js';
import { sameAsLogged } from '../../src/kernel/replay-records.js';
import { globalRedactor } from '../../src/log/logger.js';

describe('sameApprover', () => {
  it('equal as written, or through the redactor; a value registered since or no longer still compares', () => {
    expect(sameApprover('role:finance', 'role:finance')).toBe(true);
    expect(sameApprover(null, null)).toBe(true);
    expect(sameApprover('role:finance', null)).toBe(false);
    expect(sameApprover('role:finance', 'role:ops')).toBe(false);
    // Recorded while `finance` was a registered value, replayed after a restart that knows none.
    expect(sameApprover('role:[REDACTED]', 'role:finance')).toBe(true);
    expect(sameApprover('role:[REDACTED]-eu', 'role:finance-eu')).toBe(true);
    expect(sameApprover('role:[REDACTED]-eu', 'role:finance-us')).toBe(false);
    expect(sameApprover('role:[REDACTED]', 'group:finance')).toBe(false);
    // Recorded before `teamx` was registered, replayed after: both read alike redacted.
    globalRedactor.add('teamx');
    expect(sameApprover('role:teamx', 'role:teamx')).toBe(true);
    expect(sameApprover('role:[REDACTED]', 'role:teamx')).toBe(true);
    expect(sameApprover('role:a.b', 'role:aXb')).toBe(false); // the recorded text is literal, not a pattern
  });
});

describe('sameAsLogged (replay compares approval rows and remits with the log, D §7)', () => {
  it('takes a [REDACTED] part of the log for the text a value had there when it was written (a secret since unregistered)', () => {
    const logged = { tool: 'billing.refund', args: { invoice_id: '[REDACTED]', amount: 150, note: 'for [REDACTED]-eu' } };
    expect(sameAsLogged(logged, { tool: 'billing.refund', args: { invoice_id: 'inv-secret-4242', amount: 150, note: 'for acme-eu' } })).toBe(true);
    expect(sameAsLogged(logged, { tool: 'billing.refund', args: { invoice_id: 'inv-secret-4242', amount: 151, note: 'for acme-eu' } })).toBe(false);
    expect(sameAsLogged(logged, { tool: 'billing.refund', args: { invoice_id: 'inv-secret-4242', amount: 150, note: 'for acme-us' } })).toBe(false);
    expect(sameAsLogged(logged, { tool: 'billing.refund', args: { invoice_id: 'x', amount: 150, note: 'for acme-eu', extra: 1 } })).toBe(false);
    expect(sameAsLogged(['[REDACTED]'], ['a', 'b'])).toBe(false);
    expect(sameAsLogged('plain', 'other')).toBe(false);
  });
});
