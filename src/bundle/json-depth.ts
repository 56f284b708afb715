/**
 * How deep a JSON value nests, measured without recursion, so that hostile input cannot
 * overflow the stack of the recursive walks (templates, CEL values, canonical JSON) that
 * come after this check.
 */

import { pointerToken } from '../encoding/json-pointer.js';

/** The JSON pointer of the first value nested deeper than `limit` levels, or null. */
export function tooDeep(value: unknown, limit: number): string | null {
  const stack: Array<[unknown, number, string]> = [[value, 0, '']];
  while (stack.length > 0) {
    const [v, depth, pointer] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= limit) return pointer;
    if (Array.isArray(v)) v.forEach((x, i) => stack.push([x, depth + 1, `${pointer}/${i}`]));
    else for (const [k, x] of Object.entries(v)) stack.push([x, depth + 1, `${pointer}/${pointerToken(k)}`]);
  }
  return null;
}
