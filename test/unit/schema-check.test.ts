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
});
