/**
 * Tool calls through the gateway (interface 4.2, 7.2; decisions §9), with every non-200 answer
 * turned into a StepError whose `deterministic` flag says whether a retry could help.
 */
import type { ToolDescriptor } from '../types.js';
import { delayUnlessAborted, StepError } from './errors.js';
import { Backoff } from './backoff.js';
import { errorOf, parseRetryAfter, requestJson, UnreachableError, type JsonResponse, type PeerOptions } from './http.js';

export interface ToolCallRequest {
  remit_token: string;
  run_id: string;
  step: string;
  lease_id: string;
  tool: string;
  args: Record<string, unknown>;
  idempotency_key: string;
  scope: string | null;
}

export interface ToolCallResult {
  result: unknown;
  scope: string | null;
  scopes: string[];
  replayed: boolean;
  latency_ms: number;
}

/** Gateway error codes a retry cannot fix (interface 7.2, decisions §9). */
const DETERMINISTIC_GATEWAY_CODES = new Set([
  'tool_not_found',
  'args_invalid',
  'deterministic_failure',
  'idempotency_conflict',
  'idempotency_outcome_unknown',
  'request_invalid',
  // The call's body is over the gateway's limit (D §10): the same arguments will be again.
  'payload_too_large',
]);

/** First and longest wait between tries of a gateway that cannot be reached, ms. */
export const UNREACHABLE_RETRY_MS = { first: 250, max: 5000 } as const;

/** One spell of a gateway out of reach: its budget runs from its first failure; an answer ends it. */
class Outage {
  private since: number | null = null;
  // Monotonic: a budget counted in this process, which a wall clock stepped back would stretch by the step.
  private readonly backoff = new Backoff(UNREACHABLE_RETRY_MS, () => performance.now());

  constructor(
    private readonly budgetMs: number,
    /** Told once, at the outage's first failure (the worker logs it: otherwise a minute of silence). */
    private readonly onStart: ((e: { error: string; retry_for_ms: number }) => void) | null = null,
  ) {}

  /** Waits before the next try, or throws `failure` once the wait would pass the budget. */
  async waitOrThrow(failure: StepError, signal?: AbortSignal): Promise<void> {
    if (this.since === null) {
      this.since = performance.now();
      this.onStart?.({ error: failure.message, retry_for_ms: this.budgetMs });
    }
    await this.backoff.next(failure, this.since + this.budgetMs, signal);
  }

  end(): void {
    this.since = null;
    this.backoff.reset();
  }
}

/** A spell of a gateway out of reach: for a tool call, the step it holds up. */
export interface GatewayOutage {
  error: string;
  retry_for_ms: number;
  run_id?: string | null;
  step?: string | null;
  lease_id?: string | null;
  tool?: string;
}

/**
 * How long one POST /v1/tools/call may go unanswered before it counts as a gateway out of
 * reach, ms. Node's fetch gives up on an answer's headers at 300 s (undici's headersTimeout)
 * whatever is asked for, so the bound is that, made explicit: the failure then names the
 * gateway and is handled as an outage. A connector allowed longer (`timeout_ms` up to 600 s,
 * svc-gateway(5)) runs on in the gateway; asked again under its key, it answers 409 in
 * flight, waited on for `inFlightWaitMs` more, then the attempt fails retryably and a later
 * one meets the stored result.
 */
export const GATEWAY_CALL_TIMEOUT_MS = 300_000;
/** The same for GET /v1/tools, which reads config only, ms. */
export const GATEWAY_TOOLS_TIMEOUT_MS = 30_000;
/** How long the worker's probe of a gateway out of reach waits for an answer, ms. */
const PROBE_TIMEOUT_MS = 5_000;

export class GatewayClient {
  private cache: { at: number; tools: ToolDescriptor[] } | null = null;
  /** Called at the start of each spell of a gateway out of reach (the worker emits `gateway:unreachable`). */
  onOutage: ((e: GatewayOutage) => void) | null = null;
  /**
   * Set when a request gave up on a gateway out of reach (its whole wait spent), cleared by
   * any answer: the worker then takes no new step until `probe` reaches the gateway, since
   * every step needs it and each one leased would spend an attempt on the outage.
   */
  outOfReach: string | null = null;
  /** Called when `outOfReach` is set (the worker stops its long polls then). */
  onOutOfReach: (() => void) | null = null;

  constructor(
    readonly peer: PeerOptions,
    /** How long GET /v1/tools is cached, ms. (Default: 30000) */
    private readonly cacheMs = 30_000,
    /** How long a call waits for the same call in flight elsewhere, or for an open circuit, ms. (Default: 60000) */
    private readonly inFlightWaitMs = 60_000,
    /** How long a call keeps trying a gateway it cannot reach, ms. (Default: 60000) */
    private readonly unreachableWaitMs = 60_000,
    /** How long one request may go unanswered, ms; then it counts as unreachable, above. */
    private readonly requestTimeoutMs: { call: number; tools: number } = { call: GATEWAY_CALL_TIMEOUT_MS, tools: GATEWAY_TOOLS_TIMEOUT_MS },
  ) {}

  /**
   * Calls a tool; returns the 200 body or throws a StepError mapped from the answer.
   *
   * A 409 `idempotency_in_flight` means the same call (same key) is still executing: a step
   * re-leased after its worker died while the first call runs on. The worker waits as
   * `Retry-After` says and asks again, so it gets that execution's stored result instead of
   * failing an attempt; after `inFlightWaitMs` (or when the step is aborted) it gives up.
   *
   * A gateway that cannot be reached (restarting, say), one that leaves a request unanswered
   * past `requestTimeoutMs.call` (hung), or one that answers 503 `unavailable`
   * (draining, or without the kernel's keys yet), is asked again with a growing wait for up to
   * `unreachableWaitMs` from the first such failure, while the lease's heartbeats go on:
   * failing at once would spend the step's attempts in a second and quarantine every run a
   * short outage touched. Asking again is safe because every call carries its idempotency
   * key: an execution whose answer was lost is answered from the store (or as in flight,
   * above), never run twice. A port fetch refuses outright is not asked again. `beforeRetry`
   * runs before each such retry (the worker confirms its lease there).
   */
  async call(req: ToolCallRequest, signal?: AbortSignal, opts: { beforeRetry?: () => Promise<void> } = {}): Promise<ToolCallResult> {
    // Counted from the first "in flight" answer, not from the call's start: a call asked again
    // after a request the gateway left unanswered still gets its full wait.
    let giveUpAt: number | null = null;
    let inFlightWait = 0;
    // Which step is waiting, so an operator running several at once can tell.
    const about = { run_id: req.run_id ?? null, step: req.step ?? null, lease_id: req.lease_id ?? null, tool: req.tool };
    const outage = new Outage(this.unreachableWaitMs, this.onOutage && ((e) => this.onOutage!({ ...e, ...about })));
    for (;;) {
      let res: JsonResponse;
      try {
        res = await requestJson(this.peer, 'POST', '/tools/call', req, { signal, timeoutMs: this.requestTimeoutMs.call });
      } catch (err) {
        if (!mayAskAgain(err)) throw err;
        await this.waitOut(outage, err, signal);
        await opts.beforeRetry?.(); // throws when the lease has ended meanwhile
        continue;
      }
      this.outOfReach = null;
      const body = res.body as Record<string, any> | null;
      if (res.status === 200 && body?.ok === true) {
        return { result: body.result, scope: body.scope ?? null, scopes: body.scopes ?? (body.scope ? [body.scope] : []), replayed: Boolean(body.replayed), latency_ms: Number(body.latency_ms) || 0 };
      }
      const failure = gatewayFailure(req.tool, res.status, body);
      if (res.status === 503 && failure.code !== 'connector_quarantined') {
        await this.waitOut(outage, failure, signal);
        await opts.beforeRetry?.();
        continue;
      }
      outage.end();
      const asked = ranNothingYet(failure, body) ? retryAfterMs(res.headers.get('retry-after')) : null;
      if (asked === null) throw failure;
      giveUpAt ??= performance.now() + this.inFlightWaitMs; // monotonic, as the outage's budget
      // Retry-After is the least to wait: each ask is a tool.called event on the run, so the
      // wait doubles (to IN_FLIGHT_MAX_WAIT_MS) rather than asking every second for a minute
      // (up to 60 events a write; network sweep). No ask when less than Retry-After is left.
      inFlightWait = Math.max(asked, Math.min(inFlightWait * 2, IN_FLIGHT_MAX_WAIT_MS));
      const left = giveUpAt - performance.now();
      if (left < asked) throw failure;
      await delayUnlessAborted(Math.min(inFlightWait, left), signal);
    }
  }

  /**
   * The tool descriptors the gateway serves, cached for `cacheMs`. They carry the data classes
   * the data boundary redacts by (interface 5.5), so without them a model step would see
   * classified fields in clear: this fails closed. A gateway out of reach (or answering 503) is
   * asked again as `call` does, for up to `unreachableWaitMs`. When the list cannot be had, the
   * last list had is used if there is one (a gateway's tools change only with its config, on a
   * restart); otherwise the step fails, retryably, before anything reaches a model. With
   * `required: false` (a caller with a safe default, such as a tool step taking an undescribed
   * tool for a write) one try is made and [] stands for no list.
   */
  async tools(signal?: AbortSignal, opts: { required?: boolean; about?: Pick<GatewayOutage, 'run_id' | 'step' | 'lease_id'> } = {}): Promise<ToolDescriptor[]> {
    if (this.cache && performance.now() - this.cache.at < this.cacheMs) return this.cache.tools;
    // Which step is waiting, as for a call (the outage line names the run, step and lease).
    const about = opts.about;
    const outage = new Outage(this.unreachableWaitMs, this.onOutage && ((e) => this.onOutage!({ ...e, ...about })));
    for (;;) {
      const { failure, mayWait } = await this.fetchTools(signal);
      if (failure === null) return this.cache!.tools;
      if (this.cache) return this.cache.tools;
      if (opts.required === false) return []; // the caller has a safe default for a tool it cannot describe
      if (mayWait) {
        try {
          await this.waitOut(outage, failure, signal);
          continue;
        } catch (e) {
          if (e !== failure) throw e; // aborted
        }
      }
      throw new StepError(failure.code, `${failure.message}; without the gateway's tool descriptors the step cannot tell which fields to redact before a model sees them (interface 5.5)`, failure.deterministic);
    }
  }

  /** The outage's next wait; a request that spent it all on a gateway it could not reach marks it out of reach. */
  private async waitOut(outage: Outage, failure: StepError, signal?: AbortSignal): Promise<void> {
    try {
      await outage.waitOrThrow(failure, signal);
    } catch (err) {
      // Only a gateway that could not be reached: one that answers 503 (draining, or without
      // the kernel's keys) answers the /v1/health probe too, which would end the pause at once.
      if (err === failure && failure.code === 'network_error') this.markOutOfReach(failure.message);
      throw err;
    }
  }

  private markOutOfReach(why: string): void {
    const was = this.outOfReach;
    this.outOfReach = why;
    if (was === null) this.onOutOfReach?.();
  }

  /**
   * One GET /v1/health: whether the gateway answers (any answer but a 5xx). An answer clears
   * `outOfReach`; so does any call's.
   */
  async probe(signal?: AbortSignal): Promise<boolean> {
    try {
      const res = await requestJson(this.peer, 'GET', '/health', undefined, { signal, timeoutMs: PROBE_TIMEOUT_MS });
      if (res.status >= 500) return false;
      this.outOfReach = null;
      return true;
    } catch (err) {
      if (signal?.aborted) throw err;
      return false;
    }
  }

  /**
   * One GET /v1/health at the worker's start: a gateway that cannot be reached at all then
   * marks `outOfReach`, so the worker starts paused instead of spending an attempt of each
   * step it would lease on the outage (a worker started before its gateway, say). Any answer,
   * even a 503, leaves it unmarked, as a call's would.
   */
  async reachAtStart(signal?: AbortSignal): Promise<void> {
    try {
      await requestJson(this.peer, 'GET', '/health', undefined, { signal, timeoutMs: PROBE_TIMEOUT_MS });
    } catch (err) {
      // Not a port fetch refuses outright (a configuration mistake no probe cures: the calls
      // fail on it and say so, rather than the worker waiting for good).
      if (!signal?.aborted && mayAskAgain(err)) this.markOutOfReach(err.message);
    }
  }

  /** One GET /v1/tools; `failure` is null when the cache now holds the list. */
  private async fetchTools(signal?: AbortSignal): Promise<{ failure: StepError | null; mayWait: boolean }> {
    try {
      const res = await requestJson(this.peer, 'GET', '/tools', undefined, { signal, timeoutMs: this.requestTimeoutMs.tools });
      if (res.status !== 503) this.outOfReach = null;
      const list = Array.isArray(res.body) ? res.body : Array.isArray(res.body?.tools) ? res.body.tools : null;
      if (res.status === 200 && list) {
        this.cache = { at: performance.now(), tools: list as ToolDescriptor[] }; // monotonic: a clock stepped back must not keep a stale list
        return { failure: null, mayWait: false };
      }
      const e = errorOf(res.body);
      const failure = new StepError('gateway_error', `gateway tool list: ${e?.code || `HTTP ${res.status}`}${e?.message ? `: ${e.message}` : ''}`, false);
      return { failure, mayWait: res.status === 503 };
    } catch (err) {
      if (signal?.aborted || !(err instanceof StepError) || err.code !== 'network_error') throw err;
      return { failure: err, mayWait: mayAskAgain(err) };
    }
  }
}

/**
 * Whether a request that got no answer may be sent again: the gateway was unreachable, or its
 * answer broke off (a drain's cut); not a port fetch refuses outright.
 */
function mayAskAgain(err: unknown): err is StepError {
  return err instanceof StepError && err.code === 'network_error' && !(err instanceof UnreachableError && !err.mayRecover);
}

/**
 * Whether a failed call ran nothing and may succeed if asked again shortly, so the call waits
 * it out (Retry-After, doubling) instead of failing its attempt: the same call in flight
 * elsewhere (409 idempotency_in_flight); an open circuit (502 with `circuit: open`: a
 * compensation spent its three attempts in 0.6 s against a circuit other calls had opened,
 * and the charge stayed; saga sweep); a remit not valid yet by a gateway's clock a moment
 * behind the kernel's (nbf is whole seconds; clock sweep).
 */
function ranNothingYet(failure: StepError, body: Record<string, any> | null): boolean {
  if (failure.code === 'idempotency_in_flight') return true;
  if (failure.code === 'upstream_error') return (body?.error as { circuit?: unknown } | undefined)?.circuit === 'open';
  if (failure.code === 'tool_refused') return (body?.refusal as { reason?: unknown } | undefined)?.reason === 'remit_not_yet_valid';
  return false;
}

/** The longest wait between two asks of a call in flight elsewhere, ms. */
export const IN_FLIGHT_MAX_WAIT_MS = 8_000;

/** `Retry-After` (decisions §9) as ms: 1 s when absent, unreadable or zero, at most 30 s. */
export function retryAfterMs(header: string | null): number {
  const ms = parseRetryAfter(header);
  return ms !== null && ms > 0 ? Math.min(30_000, ms) : 1000;
}

/** Maps a gateway error answer to the step failure the worker reports. */
export function gatewayFailure(tool: string, status: number, body: Record<string, any> | null): StepError {
  const refusal = body?.refusal as { reason?: string; detail?: string } | undefined;
  if (status === 403 && refusal) {
    // remit_not_yet_valid is the one refusal time cures: a remit minted a moment ago, met by a
    // gateway whose clock is behind the kernel's (nbf is whole seconds, so even a few ms behind
    // at a second's turn will do; no leeway unless SVC_CLOCK_SKEW_SECONDS). Quarantining the run
    // for it parked runs started right after their remit was minted: retried with backoff.
    return new StepError('tool_refused', `gateway refused ${tool}: ${refusal.reason ?? 'refused'}${refusal.detail ? ` (${refusal.detail})` : ''}`, refusal.reason !== 'remit_not_yet_valid');
  }
  const e = errorOf(body);
  const code = e?.code ?? '';
  const message = `gateway ${tool}: ${code || `HTTP ${status}`}${e?.message ? `: ${e.message}` : ''}`;
  if (code === 'connector_quarantined') return new StepError('connector_quarantined', message, false);
  // Any other 503 (draining, the kernel's keys not yet had, its store failing) says nothing of the connector.
  if (status === 503) return new StepError('gateway_error', message, false);
  if (code === 'upstream_error' || status === 502) {
    // A write cut off with no answer (decisions §9): its key will answer every retry 409, so
    // say at once what a human must check, instead of spending the step's attempts on it.
    if ((e?.details as { outcome?: unknown } | undefined)?.outcome === 'unknown') {
      return new StepError('idempotency_outcome_unknown', `gateway ${tool}: idempotency_outcome_unknown (${code || `HTTP ${status}`}${e?.message ? `: ${e.message}` : ''})`, true);
    }
    const circuit = (body?.error as { circuit?: string } | undefined)?.circuit;
    return new StepError('upstream_error', circuit === 'open' ? `${message} (circuit open)` : message, false);
  }
  if (code === 'idempotency_in_flight') return new StepError('idempotency_in_flight', message, false);
  if (DETERMINISTIC_GATEWAY_CODES.has(code)) return new StepError(code === 'request_invalid' ? 'args_invalid' : code, message, true);
  if (status === 404) return new StepError('tool_not_found', message, true);
  if (status === 422) return new StepError('deterministic_failure', message, true);
  return new StepError('gateway_error', message, false);
}
