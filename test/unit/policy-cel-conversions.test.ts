/**
 * CEL's conversions from a string in policy conditions (decisions 5.1: conditions are CEL;
 * cel-spec's int/uint/double/timestamp/duration of a string, read as cel-go reads them), and
 * the fail-closed decision when one fails.
 */
import { describe, expect, it } from 'vitest';
import { celContext, policyEnvironment } from '../../src/policy/cel-env.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';
import { decide } from '../../src/policy/decide.js';

/** Evaluates `fn(action.summary)` in the policy environment, the summary being `text`; `error` when it fails. */
function convert(fn: string, text: string): unknown {
  try {
    const ctx = celContext(toPolicyAction({ tool: 'a.b', summary: text }), toPolicyRun({}));
    const v: unknown = policyEnvironment.evaluate(`${fn}(action.summary)`, ctx);
    if (v instanceof Date) return v.toISOString();
    if (typeof v === 'object' && v !== null) return String(v);
    return v;
  } catch {
    return 'error';
  }
}

/** The same conversion on a `dyn` value, as a worker's argument reaches it. */
function convertDyn(fn: string, text: string): unknown {
  const p = compilePolicy({ name: 'p', version: '1' }, `deny d when ${fn}(action.args.v) == ${fn}(action.args.v)`);
  const r = decide([p], toPolicyAction({ tool: 'a.b', args: { v: text }, writes: false }), toPolicyRun({}));
  return r.errors.length > 0 ? 'error' : 'ok';
}

describe('int(string) (D 5.1, cel-spec conversions)', () => {
  it.each([
    ['987', 987n],
    ['+5', 5n],
    ['-5', -5n],
    ['-0', 0n],
    ['007', 7n],
    ['00000000000000000000001', 1n],
    ['9223372036854775807', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
  ])('reads %j', (text, value) => expect(convert('int', text)).toBe(value));

  it.each(['', ' 5', '5 ', '+', '-', '0x1F', '0X1F', '0b101', '0o17', '1_000', '1e3', '1.0', '٣', '9223372036854775808', '-9223372036854775809', '1'.repeat(100_000)])(
    'refuses %j',
    (text) => expect(convert('int', text)).toBe('error'),
  );
});

describe('uint(string) (D 5.1, cel-spec conversions)', () => {
  it.each([
    ['300', '300'],
    ['0', '0'],
    ['018446744073709551615', '18446744073709551615'],
  ])('reads %j', (text, value) => expect(convert('uint', text)).toBe(value));

  it.each(['', '-0', '+5', '-1', ' 5', '0x10', '0B1', '18446744073709551616'])('refuses %j', (text) => expect(convert('uint', text)).toBe('error'));
});

describe('double(string) (D 5.1, cel-spec conversions)', () => {
  it.each([
    ['0', 0],
    ['123.456', 123.456],
    ['-987.654', -987.654],
    ['6.02214e23', 6.02214e23],
    ['-5.43e-21', -5.43e-21],
    ['.5', 0.5],
    ['5.', 5],
    ['+1.5E3', 1500],
    ['1e-400', 0],
    ['Infinity', Infinity],
    ['-inf', -Infinity],
    ['+INF', Infinity],
  ])('reads %j', (text, value) => expect(convert('double', text)).toBe(value));

  it('reads "-0.0" as negative zero and "NaN" as NaN', () => {
    expect(Object.is(convert('double', '-0.0'), -0)).toBe(true);
    expect(convert('double', 'nan')).toBeNaN();
  });

  it.each(['', ' 1', '1 ', '.', 'e5', '1e', '0x10', '0b11', '0o7', '1_0', '1e400', '-1e400', '+nan', 'infin', '1,5'])('refuses %j', (text) =>
    expect(convert('double', text)).toBe('error'),
  );
});

describe('timestamp(string) (D 5.1, cel-spec conversions: RFC 3339)', () => {
  it.each([
    ['2004-09-16T23:59:59Z', '2004-09-16T23:59:59.000Z'],
    ['2000-01-01T00:00:00.123456789+05:30', '1999-12-31T18:30:00.123Z'],
    ['2024-02-29T12:00:00-01:00', '2024-02-29T13:00:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999999999Z', '9999-12-31T23:59:59.999Z'],
  ])('reads %j', (text, iso) => expect(convert('timestamp', text)).toBe(iso));

  it.each([
    '',
    'Sat, 01 Jan 2000 00:00:00',
    '2000-01-01 00:00:00 GMT+0100',
    '2000-01-01T00:00:00',
    '2000-01-01t00:00:00z',
    '2021-02-30T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '2000-13-01T00:00:00Z',
    '2000-01-01T24:00:00Z',
    '2000-01-01T00:00:60Z',
    '2000-01-01T00:00:00+24:00',
    '2000-01-01T00:00:00.Z',
    '+002000-01-01T00:00:00Z',
    '0001-01-01T00:00:00+00:01',
  ])('refuses %j', (text) => expect(convert('timestamp', text)).toBe('error'));
});

describe('duration(string) (D 5.1, cel-spec conversions: Go durations)', () => {
  it.each([
    ['0', '0s'],
    ['-0', '0s'],
    ['1.5h', '5400s'],
    ['-1m30s', '-90s'],
    ['2h45m', '9900s'],
    ['.5s', '0.5s'],
    ['1.s', '1s'],
    ['1\u00b5s', '0.000001s'],
    ['1\u03bcs', '0.000001s'],
    ['2562047h47m16.854775807s', '9223372036.854775807s'],
  ])('reads %j', (text, shown) => expect(convert('duration', text)).toBe(shown));

  it.each(['', 's', '.s', '-', '1', '1h 1m', '1d', '1hh', '+-1s', '2562047h47m16.854775808s', '9'.repeat(30) + 's'])('refuses %j', (text) =>
    expect(convert('duration', text)).toBe('error'),
  );
});

describe('conversions of a dyn value (D 5.1)', () => {
  it('apply to a worker argument too', () => {
    expect(convertDyn('int', '')).toBe('error');
    expect(convertDyn('uint', '-0')).toBe('error');
    expect(convertDyn('double', '0x10')).toBe('error');
    expect(convertDyn('timestamp', 'Sat, 01 Jan 2000 00:00:00')).toBe('error');
    expect(convertDyn('duration', 's')).toBe('error');
    expect(convertDyn('int', '42')).toBe('ok');
  });
});

describe('int(double) (D 5.1, cel-spec conversions: an error out of the int range)', () => {
  const evaluate = (expr: string, args: Record<string, unknown> = {}) => {
    try {
      return String(policyEnvironment.evaluate(expr, celContext(toPolicyAction({ tool: 'a.b', args }), toPolicyRun({}))));
    } catch (err) {
      return (err as Error).message.split('\n')[0];
    }
  };

  it('truncates toward zero within the range and refuses what lies outside it, as cel-go', () => {
    expect(['int(1.9)', 'int(-1.9)', 'int(9223372036854774784.0)'].map((x) => evaluate(x))).toEqual(['1', '-1', '9223372036854774784']);
    for (const x of ['int(1e30)', 'int(-1e19)', 'int(9223372036854775807.0)', 'int(-9223372036854775808.0)', 'int(dyn(1e30))', 'int(action.args.amount)']) {
      expect(evaluate(x, { amount: -1e19 }), x).toBe('int() conversion error: out of the int range');
    }
  });

  it('so an allow rule over an amount no int holds does not match: the default rule decides', () => {
    const p = compilePolicy({ name: 'refunds', version: '1' }, 'allow small_refund when int(action.args.amount) <= 100');
    const act = (amount: number) => toPolicyAction({ tool: 'billing.refund', args: { amount }, writes: true, system_of_record: true });
    expect(decide([p], act(50), toPolicyRun({}))).toMatchObject({ decision: 'allow', rule: 'refunds/small_refund' });
    const r = decide([p], act(-1e19), toPolicyRun({}));
    expect(r).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write' });
    expect(r.errors).toEqual([{ rule: 'refunds/small_refund', message: expect.stringMatching(/out of the int range/) }]);
  });
});

describe('a failed conversion fails closed (D 5.1)', () => {
  const action = (summary: string, args: Record<string, unknown> = {}) => toPolicyAction({ tool: 'crm.note', summary, args, writes: false });
  const run = toPolicyRun({});

  it('int("") counts as matched for deny, with the error listed', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny e when int(action.summary) > 3');
    const r = decide([p], action(''), run);
    expect(r).toMatchObject({ decision: 'deny', rule: 'p/e', matched: [{ rule: 'p/e', effect: 'deny' }] });
    expect(r.errors).toEqual([{ rule: 'p/e', message: expect.stringMatching(/^int\(\) conversion error/) }]);
    expect(decide([p], action('2'), run)).toMatchObject({ decision: 'allow', rule: 'default/allow', errors: [] });
    expect(decide([p], action('7'), run)).toMatchObject({ decision: 'deny', errors: [] });
  });

  it('uint("") counts as matched for require_approval and as not matched for allow', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'require_approval big by "role:finance" when uint(action.args.n) > 3u\nallow small when uint(action.args.n) <= 3u');
    const r = decide([p], action('x', { n: '' }), run);
    expect(r).toMatchObject({ decision: 'approval_required', rule: 'p/big', approver: 'role:finance' });
    expect(r.matched).toEqual([{ rule: 'p/big', effect: 'approval_required' }]);
    expect(r.errors.map((e) => e.rule)).toEqual(['p/big', 'p/small']);
  });
});
