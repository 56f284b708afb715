/**
 * The regexp engine for JSON schemas people write (a workflow's `input_schema`, a step's
 * `output_schema`, a gateway tool's `input_schema`): ajv's `code.regExp`. A `pattern` runs on
 * input callers and workers control, and the JS RegExp backtracks — `^([a-z]+)+$` on thirty
 * letters and a `!` holds the event loop for a minute. RE2 (through re2js, pure JS) runs in
 * linear time; its syntax is the portable subset JSON Schema recommends, so a pattern with a
 * backreference or lookaround does not compile and the schema is refused where it is loaded.
 */
import { RE2JS } from 're2js';
import { pointerToken } from '../encoding/json-pointer.js';
import type { RegExpEngine, RegExpLike } from 'ajv/dist/types/index.js';

function compileLinear(pattern: string): RegExpLike {
  const re = RE2JS.compile(pattern);
  // ajv keys compiled patterns by toString(): each must say which pattern it is.
  return { test: (s: string) => re.test(s), toString: () => `/${pattern}/` } as RegExpLike;
}

export const linearRegExp: RegExpEngine = Object.assign(compileLinear, { code: 'linearRegExp' });

/** Why RE2 cannot compile `pattern` (its parser's words), or null when it can. */
export function re2Problem(pattern: string): string | null {
  try {
    RE2JS.compile(pattern);
    return null;
  } catch (err) {
    return (err as Error).message.replace(/^error parsing regexp: /, '');
  }
}

/**
 * The first `pattern` (or `patternProperties` name) in a JSON schema that RE2 cannot compile,
 * with its JSON pointer below the schema, so a schema refused for it is reported at the
 * pattern rather than at its root. Null when every pattern compiles.
 */
export function firstNonLinearPattern(schema: unknown): { pointer: string; message: string } | null {
  const stack: Array<{ v: unknown; at: string }> = [{ v: schema, at: '' }];
  while (stack.length > 0) {
    const { v, at } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      const here = `${at}/${pointerToken(k)}`;
      const candidates =
        k === 'pattern' && typeof x === 'string'
          ? [[here, x] as const]
          : k === 'patternProperties' && x !== null && typeof x === 'object' && !Array.isArray(x)
            ? Object.keys(x).map((p) => [`${here}/${pointerToken(p)}`, p] as const)
            : [];
      for (const [pointer, pattern] of candidates) {
        const why = re2Problem(pattern);
        if (why !== null) return { pointer, message: `is not a pattern svc can run in linear time (${why}); backreferences and lookaround are not available` };
      }
      stack.push({ v: x, at: here });
    }
  }
  return null;
}
