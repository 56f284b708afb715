/**
 * How the CLI says an error svcd answered with (interface 7.1 envelope `{error: {code,
 * message, details}}`, 7.2 gateway errors): the code and message on one line, then only what
 * the message does not already say. A list of problems is a line each, not a JSON blob.
 * --json still prints the whole body on stdout (cli/index.ts).
 */
import { describe, expect, it } from 'vitest';
import { errorFromBody } from '../../cli/http-client.js';

const envelope = (code: string, message: string, details: Record<string, unknown>) => ({ error: { code, message, details } });

describe('service errors in the CLI (I 7.1)', () => {
  it('details the message already quotes are not repeated as JSON', () => {
    const nf = errorFromBody(404, envelope('not_found', 'run run_x not found', { resource: 'run', id: 'run_x' }));
    expect(nf.message).toBe('not_found: run run_x not found');
    const bound = errorFromBody(409, envelope('remit_bound', 'remit rmt_a is already bound to run run_b (a remit serves one run: mint or derive another for this one)', { remit_id: 'rmt_a', run_id: 'run_b' }));
    expect(bound.message).toBe('remit_bound: remit rmt_a is already bound to run run_b (a remit serves one run: mint or derive another for this one)');
    // A number counts as said only as a whole number in the message, not as a digit of another.
    const lease = errorFromBody(410, envelope('lease_expired', 'lease lse_1 expired 10 s ago', { lease_id: 'lse_1', seconds: 1 }));
    expect(lease.message).toBe('lease_expired: lease lse_1 expired 10 s ago {"seconds":1}');
  });

  it('details the message does not say follow as JSON', () => {
    const wf = errorFromBody(404, envelope('not_found', 'bundle refunds@1.0.0 has no workflow nope', { resource: 'workflow', id: 'nope', bundle_id: 'bnd_1', workflows: ['refund'] }));
    expect(wf.message).toBe('not_found: bundle refunds@1.0.0 has no workflow nope {"bundle_id":"bnd_1","workflows":["refund"]}');
  });

  it('a list of problems is a line each after the message; one problem is the message itself', () => {
    const input = errorFromBody(422, envelope('input_invalid', 'input does not match the input schema of workflow refund: /ticket_id is required', {
      path: '/ticket_id',
      errors: [{ path: '/ticket_id', message: 'is required' }, { path: '', message: 'must be an object' }, { path: '/x', message: 'is not allowed' }],
    }));
    expect(input.message.split('\n')).toEqual([
      'input_invalid: input does not match the input schema of workflow refund: /ticket_id is required',
      '  /ticket_id: is required',
      '  /: must be an object',
      '  /x: is not allowed',
    ]);
    const one = errorFromBody(422, envelope('args_invalid', 'arguments of a.b do not match its input schema: /ms must be a number', { errors: [{ path: '/ms', message: 'must be a number' }] }));
    expect(one.message).toBe('args_invalid: arguments of a.b do not match its input schema: /ms must be a number');
    const policy = errorFromBody(422, envelope('policy_invalid', 'line 1, column 13: expected a condition', {
      line: 1, column: 13, message: 'expected a condition',
      problems: [{ line: 1, column: 13, message: 'expected a condition' }, { line: 2, column: 20, message: 'action has no member "foo"' }],
    }));
    expect(policy.message.split('\n')).toEqual(['policy_invalid: line 1, column 13: expected a condition', '  line 1, column 13: expected a condition', '  line 2, column 20: action has no member "foo"']);
  });

  it('a newline in a message or a path cannot forge a line of its own (svc(1): one line each)', () => {
    const forged = errorFromBody(422, envelope('input_invalid', 'input does not match\nsvc: ok', {
      errors: [{ path: '/a\nsvc: approved', message: 'is not allowed' }, { path: '/b', message: 'x\ny' }],
    }));
    expect(forged.message.split('\n')).toEqual(['input_invalid: input does not match svc: ok', '  /a svc: approved: is not allowed', '  /b: x y']);
  });

  it('a long list is cut, saying how many more --json shows', () => {
    const errors = Array.from({ length: 25 }, (_, i) => ({ path: `/f${i}`, message: 'is required' }));
    const lines = errorFromBody(422, envelope('input_invalid', 'input does not match: /f0 is required', { errors })).message.split('\n');
    expect(lines).toHaveLength(22);
    expect(lines.at(-1)).toBe('  … and 5 more (--json prints them all)');
  });
});
