/**
 * Bounds on request bodies both listeners parse (decisions §10: no input yields a 500).
 * - A body nested thousands of levels deep parses fine but overflows the stack of every
 *   recursive walk after it (canonical hashing, redaction, serialisation).
 * - A number too large for a double (`1e400`) parses to Infinity, which JSON cannot carry back
 *   and canonical JSON (RFC 8785) refuses: the arguments hash would throw.
 * Both are refused up front as 400 `request_invalid` with `details.path`.
 */
import { pointerToken } from './json-pointer.js';

/** Deepest nesting of objects and arrays accepted in a request body. */
export const MAX_BODY_DEPTH = 64;

export interface BodyProblem {
  /** JSON pointer of the offending value. */
  path: string;
  message: string;
}


/**
 * The first value of a parsed JSON body svc cannot work with: nested deeper than `max`
 * levels (the body itself is level 1 when it is an object or array), or a number that is not
 * finite. Null when there is none. Iterative, so it cannot overflow the stack itself.
 */
export function bodyProblem(value: unknown, max: number = MAX_BODY_DEPTH): BodyProblem | null {
  return firstProblem(value, max, true, 'request body');
}

/**
 * The first place a value from upstream (a tool's result) is nested deeper than `max`
 * levels, or null. Such a result would overflow the recursive walks after it (redaction,
 * serialisation); numbers need no check, since JSON.stringify writes Infinity as null.
 */
export function depthProblem(value: unknown, max: number, what: string): BodyProblem | null {
  return firstProblem(value, max, false, what);
}

function firstProblem(value: unknown, max: number, numbers: boolean, what: string): BodyProblem | null {
  const stack: Array<{ v: unknown; depth: number; path: string }> = [{ v: value, depth: 1, path: '' }];
  while (stack.length > 0) {
    const { v, depth, path } = stack.pop()!;
    if (numbers && typeof v === 'number' && !Number.isFinite(v)) return { path, message: `${path || '/'} is a number out of range` };
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return { path, message: `${what} is nested deeper than ${max} levels at ${path || '/'}` };
    const entries: Array<[string, unknown]> = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      stack.push({ v: x, depth: depth + 1, path: `${path}/${pointerToken(k)}` });
    }
  }
  return null;
}
