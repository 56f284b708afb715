/**
 * What every ajv instance that checks user data against a user's schema shares (run input,
 * step output, tool arguments, an MCP tool's structured result): `multipleOf`, and ajv-formats
 * where formats are checked.
 *
 * ajv's own check divides and asks for an integer: 19.99 / 0.01 is 1998.9999999999998 in
 * binary floating point, so it refuses 19.99 as a multiple of 0.01, and money-style schemas
 * turn away valid amounts. A tolerance on the quotient does not do either: an absolute one
 * accepts 1.0000001 under `multipleOf: 1`, a relative one accepts every large number. This
 * one compares the numbers as the decimals they are written as (JavaScript's shortest text
 * for a double, which is what a JSON number reads back as), exactly, in BigInt.
 */
import type { Ajv, KeywordDefinition } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import formatsModule from 'ajv-formats';

/** ajv-formats' plugin. It is CommonJS: under NodeNext its default import is the module object. */
export const addFormats = ((formatsModule as unknown as { default?: unknown }).default ?? formatsModule) as (ajv: Ajv | Ajv2020) => unknown;

/** `x` (finite) as digits × 10^exp, from its shortest decimal text. */
function decimalOf(x: number): { digits: bigint; exp: number } {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(Math.abs(x)))!;
  const fraction = m[2] ?? '';
  return { digits: BigInt(m[1]! + fraction), exp: Number(m[3] ?? 0) - fraction.length };
}

/** Whether `value` is a whole multiple of `step`, both read as the decimals they are written as. */
export function isMultipleOf(value: number, step: number): boolean {
  if (!Number.isFinite(value) || !Number.isFinite(step) || step === 0) return false;
  const v = decimalOf(value);
  const s = decimalOf(step);
  const exp = Math.min(v.exp, s.exp);
  return (v.digits * 10n ** BigInt(v.exp - exp)) % (s.digits * 10n ** BigInt(s.exp - exp)) === 0n;
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
