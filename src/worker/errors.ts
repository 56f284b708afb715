/**
 * How a step fails. Every failure the worker reports carries a code and whether a retry could
 * change the outcome (`deterministic`, decisions §6): schema, template, refusal and denial
 * errors are deterministic; network, upstream and provider outages are not.
 */

/** Codes the worker reports in `POST /v1/leases/{id}/fail` (documented in man/svc-worker.1). */
export const WORKER_ERROR_CODES = {
  template_invalid: { deterministic: true, doc: 'a prompt or mock template names a missing value' },
  prompt_not_found: { deterministic: true, doc: "the step's prompt is not in the bundle's prompts" },
  mock_script_missing: { deterministic: true, doc: 'the mock provider has no script for this step' },
  step_invalid: { deterministic: true, doc: 'the leased step definition lacks a field its kind needs' },
  output_invalid: { deterministic: true, doc: "the step output fails the step's output_schema" },
  action_denied: { deterministic: true, doc: 'policy (or a rejected approval) denied the proposed action' },
  tool_refused: { deterministic: true, doc: 'the gateway refused the call (reason in the message); remit_not_yet_valid alone is retried' },
  tool_not_found: { deterministic: true, doc: 'the gateway has no such tool' },
  args_invalid: { deterministic: true, doc: "the tool arguments fail the tool's input schema" },
  deterministic_failure: { deterministic: true, doc: 'the tool failed in a way a retry will not fix' },
  idempotency_conflict: { deterministic: true, doc: 'the same call key was used with other arguments' },
  idempotency_outcome_unknown: { deterministic: true, doc: 'a write was cut off with no answer (now, or under this key before); a human must check it' },
  idempotency_in_flight: { deterministic: false, doc: 'the same call is still executing elsewhere (after waiting up to 60 s for it)' },
  connector_quarantined: { deterministic: false, doc: 'a canary quarantined the connector; the kernel parks the run' },
  upstream_error: { deterministic: false, doc: 'the tool upstream failed (or its circuit is open)' },
  gateway_error: { deterministic: false, doc: 'the gateway answered with an unexpected status, or stayed unavailable (503)' },
  network_error: { deterministic: false, doc: 'the kernel, gateway or provider could not be reached (the gateway after 60 s of trying, the provider after three requests)' },
  provider_error: { deterministic: false, doc: 'the model provider failed (5xx or 429 after up to three requests, or at once when its Retry-After exceeds 30 s; a timeout; a bad key)' },
  provider_rejected: { deterministic: true, doc: 'the model provider refused the request as malformed (400, 404, 422)' },
  model_loop_exceeded: { deterministic: true, doc: 'the model kept calling tools past the turn limit' },
  budget_exhausted: { deterministic: true, doc: "the step's model calls took the run past its budget (the lease's budget); no further call is made and the kernel fails the run" },
  model_output_invalid: { deterministic: true, doc: 'the model answered with something the worker cannot use' },
  step_timeout: { deterministic: false, doc: "the step ran longer than its timeout_seconds" },
  worker_shutdown: { deterministic: false, doc: 'the worker was stopped while the step ran' },
  internal: { deterministic: false, doc: 'a bug in the worker' },
} as const satisfies Record<string, { deterministic: boolean; doc: string }>;

export type WorkerErrorCode = keyof typeof WORKER_ERROR_CODES;

/** A step failure to report with `POST /v1/leases/{id}/fail`. */
export class StepError extends Error {
  readonly code: string;
  readonly deterministic: boolean;

  constructor(code: WorkerErrorCode | (string & {}), message: string, deterministic?: boolean) {
    super(message);
    this.name = 'StepError';
    this.code = code;
    this.deterministic = deterministic ?? (WORKER_ERROR_CODES as Record<string, { deterministic: boolean }>)[code]?.deterministic ?? false;
  }
}

/**
 * The lease is gone (410 `lease_expired`: expired, released by a park, or the run was parked or
 * abandoned): the step stops at once and nothing more is reported for it.
 */
export class LeaseLostError extends Error {
  constructor(readonly leaseId: string, message = `lease ${leaseId} expired or was released`) {
    super(message);
    this.name = 'LeaseLostError';
  }
}

/** Thrown inside a step when its AbortSignal fires; the reason says why. */
export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  return new StepError('worker_shutdown', typeof r === 'string' ? r : 'step aborted');
}

/** Waits `ms`, or rejects with the abort reason as soon as the signal fires. */
export function delayUnlessAborted(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Throws the abort reason when the signal has fired. */
export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortReason(signal);
}
