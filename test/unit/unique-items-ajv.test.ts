/**
 * svc's `uniqueItems` (src/util/schema-options.ts, docs/design.md "`uniqueItems` is linear")
 * answers as ajv's own does, pair and message included, for items typed as scalars (where
 * ajv's loop runs from the end and names the lower index first) and for any other items.
 */
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withDecimalMultipleOf } from '../../src/util/schema-options.js';

const SCHEMAS = [
  { type: 'array', uniqueItems: true },
  { type: 'array', items: { type: 'integer' }, uniqueItems: true },
  { type: 'array', items: { type: 'string' }, uniqueItems: true },
  { type: 'array', items: { type: ['string', 'number'] }, uniqueItems: true },
  { type: 'array', items: { type: ['null', 'boolean'] }, uniqueItems: true },
  { type: 'array', items: { type: 'object' }, uniqueItems: true },
  { type: 'array', items: [{ type: 'integer' }], uniqueItems: true },
  { type: 'array', uniqueItems: false },
];

const item = fc.oneof(fc.constantFrom(0, 1, 2, 1.5, -0, '1', '2', 'a', '', null, true, false), fc.constantFrom({ a: 1 }, { a: 1, b: 2 }, { b: 2, a: 1 }, [1], [1, 2], [2, 1], []));

describe('uniqueItems answers as ajv does', () => {
  it.each(SCHEMAS.map((s) => [JSON.stringify(s), s] as const))('%s', (_name, schema) => {
    const theirs = new Ajv({ allErrors: true, strict: false }).compile(schema);
    const ours = withDecimalMultipleOf(new Ajv({ allErrors: true, strict: false })).compile(schema);
    fc.assert(
      fc.property(fc.array(item, { maxLength: 8 }), (data) => {
        expect(ours(data)).toBe(theirs(data));
        expect(ours.errors ?? null).toEqual(theirs.errors ?? null);
      }),
      { numRuns: 300 },
    );
  });
});
