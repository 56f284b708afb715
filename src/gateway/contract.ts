/**
 * Tool contracts (interface 2.9): the response fields a tool promises, with JSON types, and
 * the diff a canary reports when the upstream stops keeping them.
 */
import type { ContractType } from '../types.js';

/** `contract_diff` of GET /v1/canaries (interface 4.2, decisions §9). */
export interface ContractDiff {
  /** Required fields absent from the response. */
  missing: string[];
  /** Required fields present with another type. */
  type_mismatch: Array<{ field: string; expected: ContractType; actual: string }>;
  /**
   * Input fields the upstream now requires that the tool's input_schema does not (MCP drift),
   * by name, each once; which tools require them is in the repair file and `last_error`.
   */
  unexpected_required: string[];
}

export function emptyDiff(): ContractDiff {
  return { missing: [], type_mismatch: [], unexpected_required: [] };
}

export function diffIsEmpty(d: ContractDiff): boolean {
  return d.missing.length === 0 && d.type_mismatch.length === 0 && d.unexpected_required.length === 0;
}

/** The contract type name of a JSON value (`null` for null). */
export function contractTypeOf(value: unknown): ContractType | 'null' | 'undefined' {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'list';
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'number':
    case 'bigint':
      return 'number';
    case 'boolean':
      return 'bool';
    case 'object':
      return 'object';
    default:
      return 'undefined';
  }
}

/** A path segment that indexes a list: a non-negative integer written without leading zeros. */
const LIST_INDEX = /^(0|[1-9][0-9]{0,8})$/;

/**
 * Reads a dotted path (`a.b.c`) from an object; a literal key with dots wins over descent. A
 * segment that is a number indexes a list (`rows.0.email`: the first row's email), so a
 * probe can hold a list's items to a shape, not only the list.
 */
function lookup(value: unknown, path: string): { found: boolean; value: unknown } {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, path)) {
    return { found: true, value: (value as Record<string, unknown>)[path] };
  }
  let cur: unknown = value;
  for (const part of path.split('.')) {
    if (Array.isArray(cur)) {
      if (!LIST_INDEX.test(part) || Number(part) >= cur.length) return { found: false, value: undefined };
      cur = cur[Number(part)];
      continue;
    }
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, part)) return { found: false, value: undefined };
    cur = (cur as Record<string, unknown>)[part];
  }
  return { found: true, value: cur };
}

/** Compares a response with `required`; fields are dotted paths into the response object. */
export function checkContract(required: Record<string, ContractType>, response: unknown): ContractDiff {
  const diff = emptyDiff();
  for (const [field, expected] of Object.entries(required)) {
    const { found, value } = lookup(response, field);
    if (!found || value === undefined) {
      diff.missing.push(field);
      continue;
    }
    const actual = contractTypeOf(value);
    if (actual !== expected) diff.type_mismatch.push({ field, expected, actual });
  }
  return diff;
}

/**
 * The observed shape of a response for a repair request: every value replaced by its type
 * name, lists by the shape of their first item, depth-limited. Values never appear, so a
 * repair file cannot leak data.
 */
export function shapeOf(value: unknown, depth = 0): unknown {
  const t = contractTypeOf(value);
  if (depth >= 6) return t;
  if (t === 'list') {
    const list = value as unknown[];
    return list.length === 0 ? [] : [shapeOf(list[0], depth + 1)];
  }
  if (t === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>).slice(0, 100)) out[k] = shapeOf(v, depth + 1);
    return out;
  }
  return t;
}
