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
import { canonicalJson } from '../encoding/canonical-json.js';

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

/**
 * The first pair of equal items, as ajv reports it: the greatest index `i` that repeats an
 * earlier item, and `j`, the nearest earlier index holding the same. One canonical JSON text per
 * item in a Map: JSON equality is equality of canonical text (keys sorted, numbers in their
 * shortest form, -0 as 0), so the check is linear in the array's size.
 */
export function duplicateItems(items: readonly unknown[]): { i: number; j: number } | null {
  const lastAt = new Map<string, number>();
  let found: { i: number; j: number } | null = null;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const key = item === undefined ? 'undefined' : canonicalJson(item);
    const j = lastAt.get(key);
    if (j !== undefined) found = { i, j };
    lastAt.set(key, i);
  }
  return found;
}

/** The item types ajv's `uniqueItems` optimizes for (scalars only), or null: `items.type` as ajv reads it. */
function scalarItemTypes(parentSchema: unknown): string[] | null {
  const items = (parentSchema as { items?: unknown } | null)?.items;
  if (items === null || typeof items !== 'object' || Array.isArray(items)) return null;
  const type = (items as { type?: unknown }).type;
  const types = type === undefined ? [] : Array.isArray(type) ? (type as string[]) : [type as string];
  return types.length > 0 && !types.some((t) => t === 'object' || t === 'array') ? types : null;
}

const isOfType = (type: string, x: unknown): boolean =>
  type === 'integer' ? typeof x === 'number' && x % 1 === 0 && !Number.isNaN(x) : type === 'number' ? typeof x === 'number' : type === 'null' ? x === null : typeof x === type;

/**
 * ajv's loop for items typed as scalars (already linear there), kept for its answer: from the
 * last item down, skipping items of another type, the first item seen again gives `i` (the
 * lower index) and `j` (the one seen first). `{type: integer}` items [1, 2, 1, 3, 2] are
 * "items ## 4 and 1", where the general loop says "## 1 and 4".
 */
export function duplicateScalars(items: readonly unknown[], types: readonly string[]): { i: number; j: number } | null {
  const indices = new Map<string, number>();
  for (let i = items.length; i--; ) {
    const item = items[i];
    if (!types.some((t) => isOfType(t, item))) continue;
    const key = types.length > 1 && typeof item === 'string' ? `${item}_` : String(item);
    const j = indices.get(key);
    if (j !== undefined) return { i, j };
    indices.set(key, i);
  }
  return null;
}

/**
 * ajv's own `uniqueItems` compares every item with every earlier one (deep equality) unless
 * the schema types the items as scalars: 30,000 objects in a run's input (349 KB) held svcd's
 * event loop 13.3 s, and 1 MiB allows some 85,000 (docs/design.md, Runs, events and
 * approvals). This one reads each item once and says what ajv says, with the same `{i, j}`.
 */
const UNIQUE_ITEMS: KeywordDefinition = {
  keyword: 'uniqueItems',
  type: 'array',
  schemaType: 'boolean',
  errors: true,
  compile(unique: boolean, parentSchema: unknown) {
    const scalars = scalarItemTypes(parentSchema);
    const check = (value: unknown[]): boolean => {
      if (!unique || value.length < 2) return true;
      const dup = scalars ? duplicateScalars(value, scalars) : duplicateItems(value);
      if (dup === null) return true;
      check.errors = [{ keyword: 'uniqueItems', message: `must NOT have duplicate items (items ## ${dup.j} and ${dup.i} are identical)`, params: { i: dup.i, j: dup.j } }];
      return false;
    };
    check.errors = null as null | Array<{ keyword: string; message: string; params: Record<string, unknown> }>;
    return check as never;
  },
};

/** Replaces ajv's `multipleOf` and `uniqueItems` with the ones above; returns the same instance. */
export function withDecimalMultipleOf<T extends { removeKeyword(keyword: string): unknown; addKeyword(def: KeywordDefinition): unknown }>(ajv: T): T {
  ajv.removeKeyword('multipleOf');
  ajv.addKeyword(MULTIPLE_OF);
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword(UNIQUE_ITEMS);
  return ajv;
}
