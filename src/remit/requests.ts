/**
 * Bodies of POST /v1/remits and POST /v1/remits/{id}/derive (interface 4.1): one JSON Schema
 * each (ajv, no coercion, unknown members refused), then the checks a schema cannot say
 * (pattern syntax). Every failure is 400 `request_invalid` with `details.path`, a JSON pointer.
 *
 * Unknown members are refused rather than ignored: a caller who misspells `scopes` must not
 * silently get a remit wider than the one they meant.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { SvcError } from '../errors.js';
import { AUTONOMY_ORDER, type Autonomy, type Requester, type Spend } from '../types.js';
import { scopePatternProblem, toolPatternProblem } from './patterns.js';
import { MAX_SPEND_USD, wholeMicroUsd } from '../spend.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';
import { PRINTABLE_NAME_MESSAGE, PRINTABLE_NAME_PATTERN } from '../util/printable-name.js';
import { POLICY_NAME, POLICY_VERSION } from '../policy/requests.js';

/** Default remit lifetime when `ttl_seconds` is not given (decisions §3). */
export const DEFAULT_TTL_SECONDS = 3600;
/** Longest remit lifetime: 30 days (decisions §3). */
export const MAX_TTL_SECONDS = 2_592_000;
/** Most entries in tools, scopes, grants or policy_set. */
export const MAX_LIST_ITEMS = 256;

/**
 * `name` or `name@version` (decisions §3), each as POST /v1/policies takes it: a name that
 * could never be pushed would fail every run on the remit with policy_not_found.
 */
const inner = (re: RegExp) => re.source.replace(/^\^/, '').replace(/\$$/, '');
export const POLICY_REF = `^${inner(POLICY_NAME)}(@${inner(POLICY_VERSION)})?$`;

export interface MintRequest {
  tools: string[];
  scopes: string[];
  grants: string[];
  spend: Spend;
  autonomy: Autonomy;
  ttl_seconds: number;
  policy_set: string[];
  requested_by: Requester;
}

/**
 * A derive body: any subset of the create fields, plus `exp` and `nbf` (epoch seconds), the
 * two payload times interface 5.4 lets a child narrow directly; `spend` may name one member
 * and inherit the other.
 */
export type DeriveRequest = Partial<Omit<MintRequest, 'spend'>> & { spend?: Partial<Spend>; exp?: number; nbf?: number };

const PRINTABLE_NAME = PRINTABLE_NAME_PATTERN;
const PATTERN_MESSAGES: Record<string, string> = {
  [PRINTABLE_NAME]: PRINTABLE_NAME_MESSAGE,
  '^\\S+$': 'must not contain whitespace',
  [POLICY_REF]: 'must be a policy name (1-64 letters, digits, ".", "_" or "-") or name@version',
};

const stringList = (maxLength: number, extra: Record<string, unknown> = {}) => ({
  type: 'array',
  maxItems: MAX_LIST_ITEMS,
  items: { type: 'string', minLength: 1, maxLength, ...extra },
});

export { MAX_SPEND_USD };

const properties = {
  tools: stringList(256),
  scopes: stringList(512),
  grants: stringList(128, { pattern: '^\\S+$', allOf: [{ pattern: PRINTABLE_NAME }] }),
  spend: {
    type: 'object',
    additionalProperties: false,
    required: ['tokens', 'usd'],
    properties: {
      tokens: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      // Micro-dollars must stay exact integers (2^53 ≈ 9.0e15): a billion dollars is the cap.
      usd: { type: 'number', minimum: 0, maximum: MAX_SPEND_USD },
    },
  },
  autonomy: { type: 'string', enum: [...AUTONOMY_ORDER] },
  ttl_seconds: { type: 'integer', minimum: 1, maximum: MAX_TTL_SECONDS },
  policy_set: stringList(200, { pattern: POLICY_REF }),
  requested_by: {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'role', 'manager'],
    properties: {
      id: { type: 'string', minLength: 1, maxLength: 256, pattern: PRINTABLE_NAME },
      role: { type: 'string', minLength: 1, maxLength: 256, pattern: PRINTABLE_NAME },
      manager: { type: 'string', minLength: 1, maxLength: 256, pattern: PRINTABLE_NAME },
    },
  },
} as const;

/** JSON Schema of the POST /v1/remits body. */
export const MINT_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['tools', 'scopes', 'spend', 'autonomy', 'requested_by'],
  properties,
} as const;

/** Latest epoch second a derive may name (year 9999): keeps ISO times and JSON integers sane. */
const MAX_EPOCH_SECONDS = 253_402_300_799;

/**
 * JSON Schema of the POST /v1/remits/{id}/derive body: every member optional, a spend of
 * one member allowed, and `exp`/`nbf` as epoch seconds.
 */
export const DERIVE_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...properties,
    spend: { ...properties.spend, required: [], minProperties: 1 },
    exp: { type: 'integer', minimum: 0, maximum: MAX_EPOCH_SECONDS },
    nbf: { type: 'integer', minimum: 0, maximum: MAX_EPOCH_SECONDS },
  },
} as const;

const ajv = new Ajv({ allErrors: false, coerceTypes: false, useDefaults: false, removeAdditional: false, strict: true });
const validateMint = ajv.compile(MINT_BODY_SCHEMA);
const validateDerive = ajv.compile(DERIVE_BODY_SCHEMA);

/** An ajv error as request_invalid with a JSON pointer to the offending member. */
function fromAjv(errors: ErrorObject[] | null | undefined): SvcError {
  const e = errors?.[0];
  if (!e) return new SvcError('request_invalid', 'request body is invalid', { path: '' });
  const { path, member } = ajvErrorPath(e);
  const p = e.params as { pattern?: string };
  let message = schemaMessage(e);
  if (member !== 'missing' && member !== 'extra' && p.pattern !== undefined) {
    message = PATTERN_MESSAGES[p.pattern] ?? message;
  }
  return new SvcError('request_invalid', `${path || 'body'} ${message}`, { path });
}

function check<T>(validate: ValidateFunction, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new SvcError('request_invalid', 'request body must be a JSON object', { path: '' });
  }
  if (!validate(body)) throw fromAjv(validate.errors);
  const b = body as DeriveRequest;
  // Spend is kept, compared and reserved in whole micro-dollars (decisions 8.3), so the token
  // states the amount rounded to them: signed as given but narrowed as rounded, a child could
  // state more than its parent (1.0000004 under 1).
  if (b.spend?.usd !== undefined) b.spend = { ...b.spend, usd: wholeMicroUsd(b.spend.usd) };
  b.tools?.forEach((t, i) => {
    const problem = toolPatternProblem(t);
    if (problem) throw new SvcError('request_invalid', `tool pattern "${t}" ${problem}`, { path: `/tools/${i}` });
  });
  b.scopes?.forEach((s, i) => {
    const problem = scopePatternProblem(s);
    if (problem) throw new SvcError('request_invalid', `scope pattern "${s}" ${problem}`, { path: `/scopes/${i}` });
  });
  return body as T;
}

/** Validates a mint body; fills the defaults of the optional members. */
export function parseMintRequest(body: unknown): MintRequest {
  const b = check<Partial<MintRequest>>(validateMint, body);
  return {
    tools: [...b.tools!],
    scopes: [...b.scopes!],
    grants: [...(b.grants ?? [])],
    spend: { tokens: b.spend!.tokens, usd: b.spend!.usd },
    autonomy: b.autonomy!,
    ttl_seconds: b.ttl_seconds ?? DEFAULT_TTL_SECONDS,
    policy_set: [...(b.policy_set ?? [])],
    requested_by: { id: b.requested_by!.id, role: b.requested_by!.role, manager: b.requested_by!.manager },
  };
}

/** Validates a derive body (no body at all means "inherit everything"). */
export function parseDeriveRequest(body: unknown): DeriveRequest {
  if (body === undefined) return {};
  return check<DeriveRequest>(validateDerive, body);
}
