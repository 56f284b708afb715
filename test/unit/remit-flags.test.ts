/**
 * `svc remit mint` and `derive` flags (svc(1) "Remits"): what each flag becomes in the request
 * body, and the usage errors (exit 2) said before anything is sent, in process: the CLI tests
 * spawn `svc`, whose code coverage does not see.
 */
import { describe, expect, it } from 'vitest';
import { createBody, remitIdArgument } from '../../cli/commands/remit.js';
import { EXIT, type CliError } from '../../cli/exit.js';

function usage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect((err as CliError).exitCode).toBe(EXIT.usage);
    return (err as Error).message;
  }
  throw new Error('expected a usage error');
}

describe('spend, ttl and requester flags (svc(1) --spend-tokens, --spend-usd, --ttl, --requested-by)', () => {
  it('mint needs both spend members; derive inherits the one not given', () => {
    expect(usage(() => createBody({ spendTokens: '10' }))).toBe('--spend-tokens and --spend-usd go together: give both');
    expect(createBody({ spendTokens: '10', spendUsd: '0.25' })).toEqual({ spend: { tokens: 10, usd: 0.25 } });
    expect(createBody({ spendUsd: '1' }, 'derive')).toEqual({ spend: { usd: 1 } });
  });

  it('numbers are decimal digits within the kernel range; dollars count to the micro-dollar', () => {
    for (const v of ['-1', '1.5', '1e3', '0x10', '']) {
      expect(usage(() => createBody({ spendTokens: v, spendUsd: '1' })), v).toBe(`--spend-tokens must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}, got "${v}"`);
    }
    for (const v of ['-1', '1e3', 'NaN', 'Infinity', '1000000000.5']) {
      expect(usage(() => createBody({ spendTokens: '1', spendUsd: v })), v).toBe(`--spend-usd must be a number of dollars from 0 to 1000000000, got "${v}"`);
    }
    expect(usage(() => createBody({ spendTokens: '1', spendUsd: '0.0000004' }))).toBe('--spend-usd 0.0000004 is less than a micro-dollar (0.000001), the smallest amount a budget counts');
    expect(createBody({ spendTokens: '0', spendUsd: '0' })).toEqual({ spend: { tokens: 0, usd: 0 } });
    for (const v of ['0', '2592001', '1h']) expect(usage(() => createBody({ ttl: v })), v).toBe(`--ttl must be an integer from 1 to 2592000, got "${v}"`);
    expect(createBody({ ttl: '2592000' })).toEqual({ ttl_seconds: 2592000 });
  });

  it('--requested-by is three non-empty parts', () => {
    expect(createBody({ requestedBy: 'ana:agent:support-lead' })).toEqual({ requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' } });
    for (const v of ['ana:agent', 'a:b:c:d', 'ana: :lead', '']) expect(usage(() => createBody({ requestedBy: v })), v).toBe(`--requested-by must be ID:ROLE:MANAGER, got "${v}"`);
  });
});

describe('derive times (svc(1) --expires-at, --not-before: ISO 8601 with a zone, or epoch seconds)', () => {
  it('an ISO 8601 time with a zone or epoch seconds becomes epoch seconds', () => {
    expect(createBody({ expiresAt: '2026-11-22T10:00:00Z' }, 'derive')).toEqual({ exp: Date.parse('2026-11-22T10:00:00Z') / 1000 });
    expect(createBody({ notBefore: '2026-11-22T10:00:00.5-01:30' }, 'derive')).toEqual({ nbf: Date.parse('2026-11-22T11:30:00Z') / 1000 });
    expect(createBody({ expiresAt: ' 1800000000 ' }, 'derive')).toEqual({ exp: 1800000000 });
  });

  it('a time without a zone, a date alone, or a day the calendar lacks is a usage error (not March 2)', () => {
    const iso = '(2026-11-22T10:00:00Z) or epoch seconds';
    expect(usage(() => createBody({ expiresAt: '2026-11-22T10:00:00' }, 'derive'))).toBe(`--expires-at must be an ISO 8601 time with a zone ${iso}, got "2026-11-22T10:00:00"`);
    expect(usage(() => createBody({ notBefore: '2026-11-22' }, 'derive'))).toBe(`--not-before must be an ISO 8601 time with a zone ${iso}, got "2026-11-22"`);
    expect(usage(() => createBody({ notBefore: 'tomorrow' }, 'derive'))).toBe(`--not-before must be an ISO 8601 time with a zone ${iso}, got "tomorrow"`);
    expect(usage(() => createBody({ expiresAt: '2026-02-30T10:00:00Z' }, 'derive'))).toBe('--expires-at: 2026-02-30 is not a date in the calendar, got "2026-02-30T10:00:00Z"');
  });
});

describe('a remit id where one is asked for (svc(1) derive, show)', () => {
  it('a token given instead is a usage error saying where the id is', () => {
    expect(usage(() => remitIdArgument('krt1.cp-x.payload.sig', 'remit derive'))).toMatch(/^remit derive takes a remit id \(rmt_…\), not a token: /);
    expect(remitIdArgument('rmt_01ABC', 'remit derive')).toBe('rmt_01ABC');
  });
});
