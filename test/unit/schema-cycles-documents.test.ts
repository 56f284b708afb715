/**
 * src/bundle/schema-cycles.ts and POST /bundles' schema check (docs/design.md Bundles): `$ref`
 * resolved as ajv resolves it — an embedded `$id` is another document whose `#` is its own, a
 * reference through the root's own `$id` URI and a 2020-12 `$anchor` name the root document.
 * Each case is checked against ajv itself (does the compiled schema overflow on a value?).
 */
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { inPlaceRefCycle } from '../../src/bundle/schema-cycles.js';
import { validateBundle } from '../../src/bundle/validate.js';
import { refundsBundle } from '../integration/run-fixtures.js';

/** The refunds bundle with `input_schema` for its workflow. */
function withInputSchema(input_schema: unknown): unknown {
  const b = refundsBundle();
  (b.workflows.refund as { input_schema: unknown }).input_schema = input_schema;
  return b;
}

const overflows = (ajv: any, schema: unknown, value: unknown) => {
  const fn = ajv.compile(schema);
  try {
    fn(value);
    return false;
  } catch (e) {
    return e instanceof RangeError;
  }
};

describe('in-place $ref cycles across $id and $anchor', () => {
  // An embedded resource ($id) resolves its own `#/definitions/x` against itself, not the root.
  const embedded = {
    type: 'object',
    properties: { q: { $ref: '#/definitions/leaf' } },
    definitions: {
      x: { $ref: '#/definitions/leaf' },
      leaf: { $id: 'https://example.com/leaf.json', definitions: { x: { type: 'string' } }, allOf: [{ $ref: '#/definitions/x' }] },
    },
  };

  it('an embedded $id resource resolves its own #/definitions: a valid schema is not refused', () => {
    const ajv = new (Ajv as any)({ strict: false, allErrors: true });
    expect(overflows(ajv, embedded, { q: 'abc' })).toBe(false); // ajv: no cycle at all
    expect(ajv.compile(embedded)({ q: 'abc' })).toBe(true);
    expect(inPlaceRefCycle(embedded)).toBeNull();
    expect(validateBundle(withInputSchema(embedded)).ok).toBe(true);
  });

  it('a member cycle through a $ref by the root $id URI is refused (ajv overflows on it)', () => {
    const s = { $id: 'https://example.com/in.json', type: 'object', properties: { q: { if: { minLength: 2 }, then: { $ref: 'https://example.com/in.json#/properties/q' } } } };
    expect(overflows(new (Ajv as any)({ strict: false, allErrors: true }), s, { q: 'abc' })).toBe(true);
    expect(validateBundle(withInputSchema(s)).ok).toBe(false);
  });

  it('a member cycle through a 2020-12 $anchor is refused (ajv overflows on it)', () => {
    const s = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { q: { $anchor: 'q', if: { minLength: 2 }, then: { $ref: '#q' } } } };
    expect(overflows(new (Ajv2020 as any)({ strict: false, allErrors: true }), s, { q: 'abc' })).toBe(true);
    expect(validateBundle(withInputSchema(s)).ok).toBe(false);
  });
});
