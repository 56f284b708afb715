/**
 * `multipleOf` for every ajv instance that checks user data against a user's schema (run
 * input, step output, tool arguments, an MCP tool's structured result).
 *
 * ajv's own check divides and asks for an integer: 19.99 / 0.01 is 1998.9999999999998 in
 * binary floating point, so it refuses 19.99 as a multiple of 0.01, and money-style schemas
 * turn away valid amounts. Its `multipleOfPrecision` option is an absolute tolerance on the
 * quotient, which accepts 1.0000001 under `multipleOf: 1` and still refuses large amounts. This
 * one is relative: the quotient may be off an integer by a few units in its last place, the
 * most that rounding the decimal value, the step and their division can add up to.
 */
import type { KeywordDefinition } from 'ajv';

/** Units in the last place of the quotient that rounding may account for. */
const ULPS = 4;

/** Whether `value` is a multiple of `step`, up to the rounding of binary floating point. */
export function isMultipleOf(value: number, step: number): boolean {
  const q = value / step;
  if (!Number.isFinite(q)) return false;
  return Math.abs(q - Math.round(q)) <= Math.abs(q) * ULPS * Number.EPSILON;
}

const MULTIPLE_OF: KeywordDefinition = {
  keyword: 'multipleOf',
  type: 'number',
  schemaType: 'number',
  errors: true,
  compile(step: number) {
    const check = (value: number): boolean => {
      if (isMultipleOf(value, step)) return true;
      check.errors = [{ keyword: 'multipleOf', message: `must be multiple of ${step}`, params: { multipleOf: step } }];
      return false;
    };
    check.errors = null as null | Array<{ keyword: string; message: string; params: Record<string, unknown> }>;
    return check as never;
  },
};

/** Replaces ajv's `multipleOf` with the one above; returns the same instance. */
export function withDecimalMultipleOf<T extends { removeKeyword(keyword: string): unknown; addKeyword(def: KeywordDefinition): unknown }>(ajv: T): T {
  ajv.removeKeyword('multipleOf');
  ajv.addKeyword(MULTIPLE_OF);
  return ajv;
}
