/**
 * ajv's complaints in plain words, the same everywhere svc reports one (request bodies,
 * remits, policies, run input and step output, tool arguments, bundles and config files).
 * ajv says "must be integer", "must be string,null" and "must NOT have fewer than 1
 * characters"; a reader who has never seen ajv should read "must be an integer", "must be a
 * string or null" and "must not be empty". Each caller still words an unknown member itself
 * (a config file's "is not a known key" suggests the key meant) and may override a keyword
 * with its own text (a pattern said as what it allows).
 */
import type { ErrorObject } from 'ajv';
import { ajvErrorPath } from './json-pointer.js';

/** JSON type names as a sentence reads them. */
const TYPE_WORDS: Readonly<Record<string, string>> = {
  object: 'an object',
  array: 'an array',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  null: 'null',
};

/** ajv's `type` param (`"string"`, `"string,null"` or an array) as "a string or null". */
function typeWords(type: unknown): string {
  const names = (Array.isArray(type) ? type : String(type).split(',')).map((t) => TYPE_WORDS[String(t)] ?? String(t));
  return names.length <= 1 ? (names[0] ?? 'of another type') : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * The plain message for one ajv error, `extra` being the caller's words for an unknown
 * member. The error's place is `ajvErrorPath(e).path`; the message never repeats it.
 */
export function schemaMessage(e: ErrorObject, extra = 'is not allowed'): string {
  const { member } = ajvErrorPath(e);
  if (member === 'missing') return 'is required';
  if (member === 'extra') return extra;
  const p = e.params as { type?: unknown; limit?: number; allowedValues?: unknown[]; allowedValue?: unknown };
  switch (e.keyword) {
    case 'type':
      return `must be ${typeWords(p.type)}`;
    case 'enum':
      return p.allowedValues ? `must be one of ${p.allowedValues.map((v) => JSON.stringify(v)).join(', ')}` : (e.message ?? 'is invalid');
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${plural(p.limit ?? 0, 'character', 'characters')} long`;
    case 'maxLength':
      return `must be at most ${plural(p.limit ?? 0, 'character', 'characters')} long`;
    case 'minItems':
      return p.limit === 1 ? 'must not be empty' : `must have at least ${plural(p.limit ?? 0, 'item', 'items')}`;
    case 'maxItems':
      return `must have at most ${plural(p.limit ?? 0, 'item', 'items')}`;
    case 'minProperties':
      return p.limit === 1 ? 'must not be empty' : `must have at least ${plural(p.limit ?? 0, 'member', 'members')}`;
    case 'maxProperties':
      return `must have at most ${plural(p.limit ?? 0, 'member', 'members')}`;
    default:
      return e.message ?? 'is invalid';
  }
}
