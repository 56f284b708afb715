/**
 * Bodies of POST /v1/remits and POST /v1/remits/{id}/derive (interface 4.1): one JSON Schema
 * each (ajv, no coercion, unknown members refused), then the checks a schema cannot say
 * (pattern syntax). Every failure is 400 `request_invalid` with `details.path`, a JSON pointer.
 *
 * Unknown members are refused rather than ignored: a caller who misspells `scopes` must not
 * silently get a remit wider than the one they meant.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { SvcError } from '../errors.js';
import type { Autonomy, Requester, Spend } from '../types.js';
import { scopePatternProblem, toolPatternProblem } from './patterns.js';
import { MAX_SPEND_USD, wholeMicroUsd } from '../spend.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';
import { PRINTABLE_NAME_MESSAGE, PRINTABLE_NAME_PATTERN } from '../util/printable-name.js';
import { DEFAULT_TTL_SECONDS, POLICY_REF } from './request-schemas.js';
import { validateRemitDerive as validateDerive, validateRemitMint as validateMint } from '../validators/compiled/remit-requests.js';

export { DEFAULT_TTL_SECONDS, DERIVE_BODY_SCHEMA, MAX_LIST_ITEMS, MAX_TTL_SECONDS, MINT_BODY_SCHEMA, POLICY_REF } from './request-schemas.js';
export { MAX_SPEND_USD };

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

const PATTERN_MESSAGES: Record<string, string> = {
  [PRINTABLE_NAME_PATTERN]: PRINTABLE_NAME_MESSAGE,
  '^\\S+$': 'must not contain whitespace',
  [POLICY_REF]: 'must be a policy name (1-64 letters, digits, ".", "_" or "-") or name@version',
};

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
