/** JSON pointers in details.path (interface §7: every error names the offending member). */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { ajvErrorPath, pointerToken } from '../../src/encoding/json-pointer.js';

const ajv = new Ajv2020({ allErrors: true, strict: false });

function errorsOf(schema: object, value: unknown) {
  const validate = ajv.compile(schema);
  expect(validate(value)).toBe(false);
  return validate.errors!;
}

describe('pointerToken (RFC 6901 §3)', () => {
  it('escapes ~ before /, so "~1" stays two characters of the key', () => {
    expect(pointerToken('a/b')).toBe('a~1b');
    expect(pointerToken('~1')).toBe('~01');
    expect(pointerToken(3)).toBe('3');
  });
});

describe('ajvErrorPath', () => {
  it('names a missing member itself, not its parent object', () => {
    const [e] = errorsOf({ type: 'object', properties: { a: { type: 'object', required: ['x/y'] } } }, { a: {} });
    expect(ajvErrorPath(e!)).toEqual({ path: '/a/x~1y', member: 'missing' });
  });

  it('names an unexpected member, from additionalProperties and unevaluatedProperties alike', () => {
    const [extra] = errorsOf({ type: 'object', additionalProperties: false }, { 'b~': 1 });
    expect(ajvErrorPath(extra!)).toEqual({ path: '/b~0', member: 'extra' });
    const [unevaluated] = errorsOf({ type: 'object', properties: { a: {} }, unevaluatedProperties: false }, { a: 1, z: 2 });
    expect(ajvErrorPath(unevaluated!)).toEqual({ path: '/z', member: 'extra' });
  });

  it('names a member whose name failed propertyNames', () => {
    const errors = errorsOf({ type: 'object', propertyNames: { pattern: '^[a-z]+$' } }, { ok: 1, 'Bad Name': 2 });
    const named = errors.map((e) => ajvErrorPath(e)).find((p) => p.member === 'name');
    expect(named).toEqual({ path: '/Bad Name', member: 'name' });
  });

  it('leaves any other error where ajv put it', () => {
    const [e] = errorsOf({ type: 'object', properties: { n: { type: 'integer' } } }, { n: 'x' });
    expect(ajvErrorPath(e!)).toEqual({ path: '/n' });
    const [top] = errorsOf({ type: 'object' }, 3);
    expect(ajvErrorPath(top!)).toEqual({ path: '' });
  });
});
