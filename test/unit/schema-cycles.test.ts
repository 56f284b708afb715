// src/bundle/schema-cycles.ts: a $ref cycle that checks one value against itself without end
// (docs/design.md Bundles; decisions §10: no input yields a 500).
import { describe, expect, it } from 'vitest';
import { inPlaceRefCycle } from '../../src/bundle/schema-cycles.js';

describe('inPlaceRefCycle', () => {
  it('finds loops of in-place applicators, at the root or inside a member', () => {
    expect(inPlaceRefCycle({ $ref: '#' })).toBe('/');
    expect(inPlaceRefCycle({ if: { type: 'object' }, then: { $ref: '#' } })).not.toBeNull();
    expect(inPlaceRefCycle({ properties: { q: { if: { minLength: 2 }, then: { $ref: '#/properties/q' } } } })).toBe('/properties/q');
    expect(inPlaceRefCycle({ definitions: { a: { allOf: [{ $ref: '#/definitions/b' }] }, b: { anyOf: [{ type: 'string' }, { $ref: '#/definitions/a' }] } }, $ref: '#/definitions/a' })).not.toBeNull();
    expect(inPlaceRefCycle({ $defs: { 'a/b': { not: { $ref: '#/$defs/a~1b' } } } })).not.toBeNull();
    expect(inPlaceRefCycle({ const: 1, oneOf: [{ $ref: '#' }] })).toBe('/');
  });

  it('lets a loop that steps into the data end with the data, and leaves other documents to ajv', () => {
    expect(inPlaceRefCycle({ type: 'object', properties: { child: { $ref: '#' } } })).toBeNull();
    expect(inPlaceRefCycle({ type: 'array', items: { $ref: '#' } })).toBeNull();
    expect(inPlaceRefCycle({ definitions: { node: { type: 'object', additionalProperties: { $ref: '#/definitions/node' } } }, $ref: '#/definitions/node' })).toBeNull();
    expect(inPlaceRefCycle({ $ref: 'https://example.com/other.json' })).toBeNull();
    expect(inPlaceRefCycle({ enum: [{ $ref: '#' }], const: { $ref: '#' } })).toBeNull(); // data, not schemas
    expect(inPlaceRefCycle({ type: 'object' })).toBeNull();
  });

  it('reads a #/ pointer as ajv does: each token percent-decoded, then ~1 and ~0 unescaped', () => {
    // A %2F is a "/" inside a token (ajv: property "a/b"), not a separator; ajv overflows on these.
    expect(inPlaceRefCycle({ properties: { 'a/b': { allOf: [{ $ref: '#/properties/a%2Fb' }] } } })).toBe('/properties/a~1b');
    expect(inPlaceRefCycle({ $defs: { 'a/b': { not: { $ref: '#/$defs/a%7E1b' } } } })).toBe('/$defs/a~1b');
    // A "~" followed by neither 0 nor 1 stays a "~" (ajv finds the member "a~b").
    expect(inPlaceRefCycle({ $defs: { 'a~b': { not: { $ref: '#/$defs/a~b' } } } })).toBe('/$defs/a~0b');
    expect(inPlaceRefCycle({ $defs: { 'a~b': { not: { $ref: '#/%24defs/a~0b' } } } })).toBe('/$defs/a~0b');
    // Names no member: ajv cannot resolve them (its own error), so no cycle is claimed.
    expect(inPlaceRefCycle({ allOf: [{ $ref: '#/allOf%2F0' }] })).toBeNull();
    expect(inPlaceRefCycle({ properties: { a: { not: { $ref: '#/properties/a%2Fnot' } } } })).toBeNull();
    expect(inPlaceRefCycle({ properties: { a: { not: { $ref: '#/properties%2Fa' } } } })).toBeNull();
  });

  it("follows draft-07's `$id: \"#name\"` anchors and references that resolve to the root's `$id`", () => {
    // ajv overflows the stack on the first for a value reaching /properties/q.
    expect(inPlaceRefCycle({ properties: { q: { $ref: '#a' } }, definitions: { a: { $id: '#a', allOf: [{ $ref: '#a' }] } } })).toBe('/definitions/a');
    expect(inPlaceRefCycle({ $id: 'http://e/r.json', $defs: { a: { allOf: [{ $ref: 'r.json#/$defs/a' }] } } })).toBe('/$defs/a');
    expect(inPlaceRefCycle({ $id: 'http://e/dir/r.json', definitions: { a: { not: { $ref: '/dir/r.json#/definitions/a' } } } })).toBe('/definitions/a');
    // Another document's pointer is not this one's, and a subschema with an $id of its own
    // (not an anchor) is another document still.
    expect(inPlaceRefCycle({ $id: 'http://e/r.json', definitions: { a: { not: { $ref: 'other.json#/definitions/a' } } } })).toBeNull();
    expect(inPlaceRefCycle({ definitions: { a: { $id: 'http://e/other.json', not: { $ref: '#/definitions/a' } } } })).toBeNull();
  });

  it('walks a deep schema without a stack overflow', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 20_000; i++) deep = { allOf: [deep] };
    expect(inPlaceRefCycle(deep)).toBeNull();
  });
});
