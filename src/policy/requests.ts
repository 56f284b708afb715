/**
 * Bodies of POST /v1/policies and POST /v1/policies/test: one JSON Schema each (ajv, no
 * coercion, unknown members refused), failing with 400 `request_invalid` and the JSON pointer
 * of the offending member in `details.path` (decisions §10).
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { SvcError } from '../errors.js';
import { validatePolicyPost as checkPost, validatePolicyTest as checkTest } from '../validators/compiled/policy-requests.js';
import type { PolicyPostBody, PolicyTestBody } from './policy-service.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';

export { POLICY_NAME, POLICY_POST_SCHEMA, POLICY_TEST_SCHEMA, POLICY_VERSION } from './request-schemas.js';

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
