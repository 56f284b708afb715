/**
 * Run input and step output checks against the bundle's JSON schemas (interface 4.1 rule 2,
 * decisions §6). Validators are compiled once per (bundle, workflow or step): bundles are
 * immutable, so the cache never goes stale.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { linearRegExp } from '../util/linear-regexp.js';
import { addFormats, withDecimalMultipleOf } from '../util/schema-options.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';

// Patterns run on run input and step output: linear time (src/util/linear-regexp.ts).
const draft07 = withDecimalMultipleOf(new Ajv({ strict: false, allErrors: true, validateSchema: true, code: { regExp: linearRegExp } }));
const draft2020 = withDecimalMultipleOf(new Ajv2020({ strict: false, allErrors: true, validateSchema: true, code: { regExp: linearRegExp } }));
addFormats(draft07);
addFormats(draft2020);

/** One problem with a value, as reported in `details.errors`. */
export interface SchemaProblem {
  path: string;
  message: string;
}

export type SchemaCheck = (value: unknown) => SchemaProblem[];

const cache = new Map<string, SchemaCheck>();
const CACHE_LIMIT = 2000;

function problems(errors: ErrorObject[] | null | undefined): SchemaProblem[] {
  return (errors ?? []).slice(0, 20).map((e) => {
    // The path names the member, so the message need not name it again (as request_invalid).
    return { path: ajvErrorPath(e).path, message: schemaMessage(e) };
  });
}

/** A cached check for `schema` under `key`; a schema that does not compile rejects every value. */
export function schemaCheck(key: string, schema: unknown): SchemaCheck {
  const hit = cache.get(key);
  if (hit) return hit;
  let check: SchemaCheck;
  if (schema === undefined || schema === null || schema === true) {
    check = () => [];
  } else {
    try {
      const s = schema as { $schema?: string };
      const ajv = typeof s.$schema === 'string' && s.$schema.includes('2020-12') ? draft2020 : draft07;
      const fn: ValidateFunction = ajv.compile(schema as object);
      // The instance is shared: a schema it keeps would hold its `$id`, and the next bundle
      // version reusing that `$id` would not compile ("already exists"). The function keeps working.
      ajv.removeSchema(schema as object);
      check = (value) => {
        try {
          return fn(value) ? [] : problems(fn.errors);
        } catch (err) {
          // A `$ref` cycle no value ends (`{"$ref": "#"}`) overflows the stack: the schema's
          // fault, answered as a problem with the value's check, never a 500.
          if (err instanceof RangeError) return [{ path: '', message: `the schema cannot check a value: it refers to itself without end (${err.message})` }];
          throw err;
        }
      };
    } catch (err) {
      const message = `the schema does not compile: ${(err as Error).message}`;
      check = () => [{ path: '', message }];
    }
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(key, check);
  return check;
}
