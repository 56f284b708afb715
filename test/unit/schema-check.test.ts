// src/kernel/schema-check.ts: run input and step output against a bundle's schemas (interface
// 4.1 rule 2, decisions §6 output_invalid, §10 no 500).
import { describe, expect, it } from 'vitest';
import { schemaCheck } from '../../src/kernel/schema-check.js';

describe('schemaCheck', () => {
  it('two schemas with one $id compile side by side (a bundle version after another), each checking as written', () => {
    const a = schemaCheck('b1/w', { $id: 'https://example.com/s.json', type: 'object', properties: { n: { type: 'number' } } });
    const b = schemaCheck('b2/w', { $id: 'https://example.com/s.json', type: 'object', properties: { n: { type: 'string' } } });
    expect(a({ n: 1 })).toEqual([]);
    expect(b({ n: 'x' })).toEqual([]);
    expect(a({ n: 'x' })).toEqual([{ path: '/n', message: 'must be a number' }]);
    expect(b({ n: 1 })).toEqual([{ path: '/n', message: 'must be a string' }]);
  });

  it('a $ref cycle no value ends (stored before bundles were refused for it) is a problem with the value, not a thrown error', () => {
    const check = schemaCheck('b3/w', { $ref: '#' });
    expect(check({ any: 1 })).toEqual([{ path: '', message: expect.stringMatching(/^the schema cannot check a value: it refers to itself without end/) }]);
    // A cycle through data ends with the data.
    const tree = schemaCheck('b4/w', { type: 'object', properties: { child: { $ref: '#' }, n: { type: 'number' } } });
    expect(tree({ child: { child: { n: 1 } } })).toEqual([]);
    expect(tree({ child: { child: { n: 'x' } } })).toEqual([{ path: '/child/child/n', message: 'must be a number' }]);
  });

  // A stall sweep: ajv's own uniqueItems compared every item with every earlier one (20,000
  // objects in a run's input held svcd's event loop 5.9 s). Counted, not timed: a Proxy counts
  // the reads of the array's items.
  it('uniqueItems reads each item of the array a bounded number of times, whatever its length', () => {
    const check = schemaCheck('uniq/w', { type: 'array', uniqueItems: true });
    const reads = (n: number, dup: boolean): number => {
      const items = Array.from({ length: n }, (_, i) => ({ a: dup && i === n - 1 ? 0 : i }));
      let count = 0;
      const proxy = new Proxy(items, { get: (t, k, r) => ((typeof k === 'string' && /^\d+$/.test(k) && count++), Reflect.get(t, k, r)) });
      check(proxy);
      return count;
    };
    for (const n of [100, 2000]) {
      expect(reads(n, false)).toBeLessThanOrEqual(2 * n);
      expect(reads(n, true)).toBeLessThanOrEqual(2 * n);
    }
  });

  it('uniqueItems names the pair ajv named: the last item repeating an earlier one, and the nearest such earlier one', () => {
    const check = schemaCheck('uniq2/w', { type: 'object', properties: { xs: { type: 'array', uniqueItems: true } } });
    expect(check({ xs: [{ a: 1, b: [2] }, { b: [2], a: 1 }, 3, 'x', 3, 1] })).toEqual([{ path: '/xs', message: 'must NOT have duplicate items (items ## 2 and 4 are identical)' }]);
    expect(check({ xs: [1, 2, 1, 1, 2] })).toEqual([{ path: '/xs', message: 'must NOT have duplicate items (items ## 1 and 4 are identical)' }]);
    expect(check({ xs: [0, -0] })).toEqual([{ path: '/xs', message: 'must NOT have duplicate items (items ## 0 and 1 are identical)' }]);
    expect(check({ xs: [1, '1', [1], { '1': 1 }, null, false, 0] })).toEqual([]);
    expect(schemaCheck('uniq3/w', { type: 'array', uniqueItems: false })([1, 1])).toEqual([]);
  });
});
