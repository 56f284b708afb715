// src/kernel/replay.ts sameApprover: replay compares an approver it derives afresh with the
// log's, which went through the redactor with the values registered then (svc-events(7)).
import { describe, expect, it } from 'vitest';
import { sameApprover } from '../../src/kernel/replay.js';
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
