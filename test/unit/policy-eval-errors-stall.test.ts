/**
 * An error inside a loop of a condition costs a constant, not the condition's length (stall
 * sweep, 2026-11-30; docs/design.md, "A policy condition's evaluation budget"). cel-js gave
 * every error a highlighted copy of the condition's line, found by walking the condition's text
 * from its start: 4,000 items without `f` under a 200,000-character condition held svcd for
 * 8.7 s in one decision. Not timed: the reads of an AST node's text are counted instead.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { evaluateCondition, policyEnvironment } from '../../src/policy/cel-env.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { decide } from '../../src/policy/decide.js';
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';

const astPrototype = Object.getPrototypeOf(policyEnvironment.parse('true').ast) as object;
const installed = Object.getOwnPropertyDescriptor(astPrototype, 'input')!;
afterEach(() => {
  Object.defineProperty(astPrototype, 'input', installed);
});

/** Counts the reads of an AST node's text that hand the text out, while `f` runs. */
function countTextReads<T>(f: () => T): { result: T; reads: number } {
  let reads = 0;
  Object.defineProperty(astPrototype, 'input', {
    ...installed,
    get(this: unknown) {
      const text = installed.get!.call(this) as string | undefined;
      if (text) reads++;
      return text;
    },
  });
  try {
    return { result: f(), reads };
  } finally {
    Object.defineProperty(astPrototype, 'input', installed);
  }
}

describe('condition errors during a decision', () => {
  it("do not read the condition's text, once per item or at all; the decision and its errors are as before", () => {
    const pad = 'a'.repeat(20_000);
    const policy = compilePolicy({ name: 'p', version: '1' }, `deny r when action.summary == "${pad}" || action.args.items.exists(x, x.f == 1)`);
    const items = Array.from({ length: 1000 }, (_, i) => ({ g: i }));
    const action = toPolicyAction({ tool: 'a.b', args: { items } });
    const { result, reads } = countTextReads(() => decide([policy], action, toPolicyRun({})));
    expect(reads).toBe(0);
    expect(result).toMatchObject({ decision: 'deny', rule: 'p/r', errors: [{ rule: 'p/r', message: 'No such key: f' }] });
  });

  it('parse and type-check errors keep their highlighted line', () => {
    let message = '';
    try {
      policyEnvironment.parse('action.tool == ').check();
    } catch (err) {
      message = String((err as Error).message);
    }
    expect(message).toContain('\n\n>    1 | action.tool == ');
    const checked = policyEnvironment.parse('action.tol == "a"').check();
    expect(String(checked.error?.message)).toContain('>    1 | action.tol');
  });

  it('evaluates without stack traces and puts the limit back', () => {
    const before = Error.stackTraceLimit;
    let seen: number | undefined;
    const args = {
      get x() {
        seen = Error.stackTraceLimit;
        return 1n;
      },
    };
    expect(evaluateCondition(policyEnvironment.parse('action.args.x == 1'), { action: { args } })).toBe(true);
    expect(seen).toBe(0);
    expect(Error.stackTraceLimit).toBe(before);
    expect(() => evaluateCondition(policyEnvironment.parse('action.args.y == 1'), { action: { args } })).toThrow('No such key: y');
    expect(Error.stackTraceLimit).toBe(before);
  });
});
