/**
 * The words every schema complaint is said in (decisions §10 request_invalid, interface 7.1
 * input_invalid and bundle_invalid, 7.2 args_invalid, and the config files of svcd(8) and
 * svc-gateway(5)): plain English, the same in every place, never ajv's own phrasing.
 */
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { schemaMessage } from '../../src/encoding/schema-message.js';

const ajv = new Ajv({ allErrors: true, strict: false });

/** The messages ajv's errors become for `value` under `schema`. */
function said(schema: object, value: unknown): string[] {
  const check = ajv.compile(schema);
  expect(check(value)).toBe(false);
  return (check.errors ?? []).map((e) => schemaMessage(e));
}

describe('schemaMessage (D §10)', () => {
  it('types take an article, and a union reads as "or"', () => {
    expect(said({ type: 'object' }, 1)).toEqual(['must be an object']);
    expect(said({ type: 'integer' }, 'x')).toEqual(['must be an integer']);
    expect(said({ type: 'array' }, 'x')).toEqual(['must be an array']);
    expect(said({ type: 'boolean' }, 'x')).toEqual(['must be true or false']);
    expect(said({ type: ['string', 'null'] }, 1)).toEqual(['must be a string or null']);
  });

  it('lengths and counts are said as such; a minimum of one is "must not be empty"', () => {
    expect(said({ type: 'string', minLength: 1 }, '')).toEqual(['must not be empty']);
    expect(said({ type: 'string', minLength: 3 }, 'ab')).toEqual(['must be at least 3 characters long']);
    expect(said({ type: 'string', maxLength: 1 }, 'ab')).toEqual(['must be at most 1 character long']);
    expect(said({ type: 'array', minItems: 1 }, [])).toEqual(['must not be empty']);
    expect(said({ type: 'array', maxItems: 2 }, [1, 2, 3])).toEqual(['must have at most 2 items']);
    expect(said({ type: 'object', minProperties: 1 }, {})).toEqual(['must not be empty']);
  });

  it('a missing member is required, an unknown one is the caller\'s words, an enum lists its values', () => {
    expect(said({ type: 'object', required: ['a'] }, {})).toEqual(['is required']);
    const check = ajv.compile({ type: 'object', additionalProperties: false });
    check({ b: 1 });
    expect(schemaMessage(check.errors![0]!)).toBe('is not allowed');
    expect(schemaMessage(check.errors![0]!, 'is not a known key')).toBe('is not a known key');
    expect(said({ enum: ['a', 1] }, 'b')).toEqual(['must be one of "a", 1']);
    expect(said({ const: 'x' }, 'y')).toEqual(['must be "x"']);
  });

  it('other keywords keep ajv\'s own message, which says what the schema asks for', () => {
    expect(said({ type: 'number', minimum: 0 }, -1)).toEqual(['must be >= 0']);
  });
});
