/**
 * The regexp engine for JSON schemas people write (a workflow's `input_schema`, a step's
 * `output_schema`, a gateway tool's `input_schema`): ajv's `code.regExp`. A `pattern` runs on
 * input callers and workers control, and the JS RegExp backtracks — `^([a-z]+)+$` on thirty
 * letters and a `!` holds the event loop for a minute. RE2 (through re2js, pure JS) runs in
 * linear time; its syntax is the portable subset JSON Schema recommends, so a pattern with a
 * backreference or lookaround does not compile and the schema is refused where it is loaded.
 */
import { RE2JS } from 're2js';
import type { RegExpEngine, RegExpLike } from 'ajv/dist/types/index.js';

function compileLinear(pattern: string): RegExpLike {
  const re = RE2JS.compile(pattern);
  // ajv keys compiled patterns by toString(): each must say which pattern it is.
  return { test: (s: string) => re.test(s), toString: () => `/${pattern}/` } as RegExpLike;
}

export const linearRegExp: RegExpEngine = Object.assign(compileLinear, { code: 'linearRegExp' });
