/**
 * One error type for the whole of svc. Every failure that reaches a caller is an
 * SvcError carrying a stable snake_case code (interface §7, decisions §10); the
 * HTTP layer renders it as `{error: {code, message, details}}` with `status`.
 */
import { shortened } from './encoding/cut-text.js';

/** Every stable code, its HTTP status and a one-line meaning (documented in man/svcd.8). */
export const ERROR_CODES = {
  // interface 7.1
  bundle_signature_invalid: { status: 422, doc: 'bundle unsigned, or signed with an unknown key' },
  bundle_invalid: { status: 422, doc: 'bundle fails validation; details.path is a JSON pointer' },
  bundle_version_exists: { status: 409, doc: 'same bundle name and version with different content' },
  policy_invalid: { status: 422, doc: 'policy does not parse or type-check; details.line, column, message' },
  policy_version_exists: { status: 409, doc: 'same policy name and version with different source' },
  remit_widens: { status: 422, doc: 'derive request widens a field; details.field' },
  input_invalid: { status: 422, doc: 'run input fails the workflow input schema' },
  output_invalid: { status: 422, doc: 'step output fails the step output schema' },
  remit_bound: { status: 409, doc: 'remit already bound to a run' },
  lease_expired: { status: 410, doc: 'lease expired or released' },
  action_denied: { status: 403, doc: 'proposal decision is deny' },
  not_the_approver: { status: 403, doc: 'actor does not match the approver, or is the requester' },
  already_decided: { status: 409, doc: 'approval already decided' },
  // decisions §10
  not_found: { status: 404, doc: 'unknown id; details.resource and details.id' },
  unauthorized: { status: 401, doc: 'missing or wrong bearer token' },
  forbidden: { status: 403, doc: 'request from a non-loopback address while no token is configured' },
  credential_required: { status: 401, doc: 'X-Svc-Lease or X-Svc-Remit header missing' },
  credential_invalid: { status: 401, doc: 'X-Svc-Lease or X-Svc-Remit header does not check out' },
  request_invalid: { status: 400, doc: 'body not JSON, wrong field types or missing fields; details.path' },
  payload_too_large: { status: 413, doc: 'body over 1 MiB (bundles: 8 MiB)' },
  invalid_state: { status: 409, doc: 'operation not allowed in the current state' },
  requester_mismatch: { status: 422, doc: "run requested_by differs from the remit's" },
  event_kind_not_external: { status: 422, doc: 'event kind may not be posted from outside' },
  remit_invalid: { status: 422, doc: 'remit cannot be used (expired, refused token) for this operation' },
  policy_not_found: { status: 422, doc: "a policy named by the remit's policy_set does not exist" },
  template_invalid: { status: 422, doc: 'a step template is malformed or reads a path the run does not have (a deterministic step failure)' },
  method_not_allowed: { status: 405, doc: 'method not allowed on this path' },
  unavailable: { status: 503, doc: 'the service is shutting down or a dependency is unavailable' },
  // gateway, interface 7.2 and decisions §9
  tool_not_found: { status: 404, doc: 'gateway has no such tool' },
  args_invalid: { status: 422, doc: 'tool arguments fail the input schema' },
  deterministic_failure: { status: 422, doc: 'the tool failed in a way a retry will not fix' },
  idempotency_conflict: { status: 409, doc: 'same idempotency key with different arguments' },
  idempotency_in_flight: { status: 409, doc: 'same idempotency key still executing; see Retry-After' },
  idempotency_outcome_unknown: { status: 409, doc: 'a write with this key was cut off before its outcome was known (the gateway stopped, or it was given up with no answer: a sqlite statement stopped mid-run, an mcp or http write that timed out or lost its answer)' },
  upstream_error: { status: 502, doc: 'upstream failure; error.circuit is "open" when the breaker is open' },
  connector_quarantined: { status: 503, doc: 'a canary quarantined the connector' },
  internal: { status: 500, doc: 'a bug: no request input should ever produce it' },
} as const satisfies Record<string, { status: number; doc: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The error every svc module throws; `status` follows the code unless overridden. */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}, status?: number) {
    super(message);
    this.name = 'SvcError';
    this.code = code;
    this.status = status ?? ERROR_CODES[code].status;
    this.details = details;
  }

  /** The kernel envelope of interface 7.1. */
  toEnvelope(): { error: { code: ErrorCode; message: string; details: Record<string, unknown> } } {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/** The 404 not_found of decisions §10; the message quotes at most 256 characters of the id (details.id holds it whole). */
export function notFound(resource: string, id: string): SvcError {
  const shown = shortened(id, 256);
  return new SvcError('not_found', `${resource} ${shown} not found`, { resource, id });
}

export function isSvcError(err: unknown): err is SvcError {
  return err instanceof SvcError;
}
