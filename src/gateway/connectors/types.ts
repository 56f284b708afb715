/**
 * What every connector is to the gateway: a set of tools with descriptors, a scope derivation
 * per call (interface 4.2 table), and a call that either returns a result or throws one of the
 * two failure kinds the gateway distinguishes (decisions §9): an upstream error (502, counts
 * towards the circuit breaker, released idempotency claim) or a deterministic failure (422,
 * stored, never retried).
 */
import type { ValidateFunction } from 'ajv';
import type { ToolDescriptor } from '../../types.js';
import type { ConnectorType, ProbeConfig } from '../config.js';

/** One tool of a connector: its public descriptor and the compiled input schema. */
export interface ConnectorTool {
  descriptor: ToolDescriptor;
  /** The operation name (the part after `<connector>.`). */
  operation: string;
  validate: ValidateFunction;
}

/** What a connector may ask about the call it is executing. */
export interface CallContext {
  /** Aborted when the call's timeout passes or the gateway stops. */
  signal: AbortSignal;
  /** Epoch milliseconds (the gateway's clock). */
  now(): number;
  /**
   * The call is about to touch one more scope than its arguments named (an http redirect to
   * another host): true when the remit (and the request's scope) grant it, and then the scope
   * joins the call's `scopes` in the response and its `tool.called` event (interface 4.2
   * rule 3: a call is granted, and reports, every scope it touches).
   */
  enterScope(scope: string): boolean;
  /**
   * The scopes deriveScopes gave for this call's arguments, which the remit granted; absent
   * for a canary's probe, which no remit governs. A connector that resolves its arguments
   * again for the call (fs: a directory may be swapped for a symlink meanwhile) checks the
   * scope it lands in is one of these, or enters it.
   */
  derivedScopes?: readonly string[];
  /**
   * The connector gave up a write it had already started (its timeout, the gateway stopping)
   * and cannot tell whether it took effect: the call's idempotency key becomes `unknown`
   * (decisions §9), so a repeat is refused rather than run a second time. It may be said early
   * (an http POST answered by a redirect it follows): only a call that then fails reads it.
   */
  outcomeUnknown(): void;
}

/**
 * How long the gateway waits, after a write's timeout, for its connector's call to settle:
 * a connector that learns only then whether the write had started (a killed sqlite process's
 * last messages) must call `outcomeUnknown()` within it.
 */
export const ABANDONED_WRITE_GRACE_MS = 3000;

/** One input field an upstream tool now requires that its descriptor does not. */
export interface DriftFinding {
  /** The tool id, `<connector>.<operation>`. */
  tool: string;
  field: string;
}

export interface Connector {
  readonly name: string;
  readonly type: ConnectorType;
  /** The canary probe, if the connector has one. */
  readonly probe: ProbeConfig | null;
  /** Upper bound on one call, ms. */
  readonly timeoutMs: number;
  /** Opens connections, spawns servers, discovers tools. Throws ConnectorSetupError for config faults. */
  start(): Promise<void>;
  /** The tools the connector currently exposes. */
  tools(): ConnectorTool[];
  /**
   * Every scope a call touches (interface 4.2 scope derivation). Throws ScopeRefusal when the
   * arguments point outside what the connector may ever reach (a host off the list, a path
   * outside the root).
   */
  deriveScopes(operation: string, args: Record<string, unknown>): Promise<string[]>;
  /**
   * Other literals a remit may grant in place of `scope`, each only by naming it exactly
   * (interface 5.3 step 6 names `<connector>:*` where its 4.2 table names `mcp:<server>:*`).
   */
  scopeAlternatives?(scope: string): string[];
  /** Executes the operation. Throws UpstreamError or DeterministicFailure on failure. */
  call(operation: string, args: Record<string, unknown>, ctx: CallContext): Promise<unknown>;
  /** MCP drift: input fields the upstream now requires that our descriptors do not. */
  drift?(signal: AbortSignal): Promise<DriftFinding[]>;
  close(): Promise<void>;
}

/** The upstream failed in a way a retry may fix: 502 `upstream_error`, counts for the breaker. */
export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'UpstreamError';
  }
}

/**
 * A 502 from svc's own check before the upstream was asked (a sqlite schema that changed
 * under the call's scopes): a retry may pass, and the breaker does not count it (decisions
 * §9: only upstream errors count).
 */
export class NotAttempted extends UpstreamError {
  constructor(message: string) {
    super(message, {});
    this.name = 'NotAttempted';
  }
}

/** The upstream answered and the answer is final: 422 `deterministic_failure`. */
export class DeterministicFailure extends Error {
  constructor(
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DeterministicFailure';
  }
}

/**
 * A final 422 `deterministic_failure` svc gives before asking the upstream (an MCP tool svc
 * cannot drive, a statement or operation the connector does not have): the upstream said
 * nothing, so the breaker neither counts it nor takes it as the answer a half-open trial
 * waits for (decisions §9).
 */
export class RefusedBeforeAsking extends DeterministicFailure {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super(message, details);
    this.name = 'RefusedBeforeAsking';
  }
}

/** The call reaches outside the connector's reach: a 403 `scope_not_granted` refusal. */
export class ScopeRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScopeRefusal';
  }
}

/** The arguments cannot be used even though they pass the schema: 422 `args_invalid`. */
export class ArgsInvalid extends Error {
  constructor(
    message: string,
    readonly path = '/',
  ) {
    super(message);
    this.name = 'ArgsInvalid';
  }
}

/**
 * A connector's config cannot be set up. Each problem is `/pointer: message`, the pointer
 * within the connector's own config; the gateway puts `/connectors/<index>` before it, so a
 * problem reads like the config loader's own.
 */
export class ConnectorSetupError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
    this.name = 'ConnectorSetupError';
  }
}

/** Rejects when `signal` aborts; used to bound calls that cannot take a signal themselves. */
export function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new UpstreamError(abortMessage(signal)));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new UpstreamError(abortMessage(signal)));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

export function abortMessage(signal: AbortSignal): string {
  const r = signal.reason as { message?: string } | undefined;
  return r?.message ?? 'the call was aborted';
}

/** Builds a descriptor with the gateway's defaults filled in (every member svc-gateway(5) lists is present). */
export function descriptor(d: Omit<ToolDescriptor, 'contract' | 'description'> & Partial<Pick<ToolDescriptor, 'contract' | 'description'>>): ToolDescriptor {
  return { description: '', contract: { required: {} }, data_classes: {}, ...d };
}
