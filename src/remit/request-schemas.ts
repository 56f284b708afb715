/**
 * JSON Schemas of the POST /v1/remits and POST /v1/remits/{id}/derive bodies (interface 4.1),
 * and the bounds they hold. Data only: src/validators/compiled/ holds their validators,
 * compiled ahead of time (docs/design.md "Validators compiled ahead of time").
 */
import { AUTONOMY_ORDER } from '../types.js';
import { MAX_SPEND_USD } from '../spend.js';
import { PRINTABLE_NAME_PATTERN } from '../util/printable-name.js';
import { POLICY_NAME, POLICY_VERSION } from '../policy/request-schemas.js';

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

const PRINTABLE_NAME = PRINTABLE_NAME_PATTERN;

const stringList = (maxLength: number, extra: Record<string, unknown> = {}) => ({
  type: 'array',
  maxItems: MAX_LIST_ITEMS,
  items: { type: 'string', minLength: 1, maxLength, ...extra },
});

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
