/**
 * Bodies of POST /v1/policies and POST /v1/policies/test: one JSON Schema each (ajv, no
 * coercion, unknown members refused), failing with 400 `request_invalid` and the JSON pointer
 * of the offending member in `details.path` (decisions §10).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { SvcError } from '../errors.js';
import { MAX_CORPUS_CASES } from './corpus.js';
import { MAX_POLICY_SOURCE } from './parser.js';
import type { PolicyPostBody, PolicyTestBody } from './policy-service.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';

/** Policy names: letters, digits, `.`, `_`, `-`; 1–64 characters, starting with a letter or digit. */
export const POLICY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Policy versions: like names, plus `+` (so semver build metadata fits). */
export const POLICY_VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;

const name = { type: 'string', pattern: POLICY_NAME.source };
const version = { type: 'string', pattern: POLICY_VERSION.source };
const source = { type: 'string', maxLength: MAX_POLICY_SOURCE };

/** JSON Schema of the POST /v1/policies body. */
export const POLICY_POST_SCHEMA = {
  type: 'object',
  required: ['name', 'version', 'source'],
  properties: { name, version, source },
} as const;

/** JSON Schema of the POST /v1/policies/test body. */
export const POLICY_TEST_SCHEMA = {
  type: 'object',
  required: ['policy_a', 'policy_b', 'corpus'],
  properties: {
    policy_a: { type: 'object', required: ['name'], properties: { name, version } },
    policy_b: { type: 'object', properties: { name, version, source } },
    corpus: { type: 'array', maxItems: MAX_CORPUS_CASES, items: { type: 'object' } },
    /** svc's extension: flips carry the conditions that failed (errors_a, errors_b). */
    explain: { type: 'boolean' },
  },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true });
const checkPost = ajv.compile(POLICY_POST_SCHEMA);
const checkTest = ajv.compile(POLICY_TEST_SCHEMA);

const MESSAGES: Record<string, string> = {
  '/name': 'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit',
  '/version': 'must be 1-64 letters, digits, ".", "_", "+" or "-", starting with a letter or digit',
};

function fail(errors: ErrorObject[] | null | undefined): never {
  const e = errors?.[0];
  const { path, member } = e ? ajvErrorPath(e) : { path: '' };
  let message = e ? schemaMessage(e) : 'is invalid';
  if (e?.keyword === 'pattern' && member !== 'missing' && member !== 'extra') {
    message = MESSAGES[path.replace(/^\/policy_[ab]/, '')] ?? message;
  }
  throw new SvcError('request_invalid', `${path || 'body'} ${message}`, { path });
}

function check<T>(fn: ValidateFunction, body: unknown): T {
  if (!fn(body)) fail(fn.errors);
  return body as T;
}

/** Checks a POST /v1/policies body or throws 400 request_invalid. */
export function checkPolicyPost(body: unknown): PolicyPostBody {
  return check<PolicyPostBody>(checkPost, body);
}

/** Checks a POST /v1/policies/test body or throws 400 request_invalid. */
export function checkPolicyTest(body: unknown): PolicyTestBody {
  const b = check<PolicyTestBody & { policy_b: { name?: string; version?: string; source?: string } }>(checkTest, body);
  if (b.policy_b.source !== undefined && b.policy_b.version !== undefined) {
    throw new SvcError('request_invalid', '/policy_b is either {name, version} or {source, name}', { path: '/policy_b' });
  }
  if (b.policy_b.source === undefined && b.policy_b.name === undefined) {
    throw new SvcError('request_invalid', '/policy_b needs a name (and version) or a source', { path: '/policy_b' });
  }
  return b;
}
