/**
 * POST /v1/tools/call, in the order of decisions §9:
 *
 *   token (5.3 steps 1–4) → tool exists (404) → tool pattern (5) → args (422) → scope (6)
 *   → autonomy (7) → idempotency replay → quarantine (503) → circuit (502) → call
 *
 * Every refusal is a 403 `{ok: false, refusal: {reason, detail}}`, a `tool.refused` event on
 * the run and `svc_gateway_refusals_total{reason}`. Every call that passes the remit is
 * audited as a `tool.called` event (tool, scopes, args hash, replayed, latency, outcome).
 * Bodies and events pass through the redactor: a `${VAR}` value cannot leave the gateway.
 */
import { LogThrottle, throttleFor } from '../log/throttle.js';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../clock.js';
import { canonicalHash } from '../encoding/canonical-json.js';
import { depthProblem } from '../encoding/json-limits.js';
import { ERROR_CODES, isSvcError, type ErrorCode } from '../errors.js';
import type { Logger, Redactor } from '../log/logger.js';
import { anyScopeMatches, scopeMatches } from '../remit/patterns.js';
import { decodeToken } from '../remit/token.js';
import { verifyRemit } from '../remit/verify.js';
import type { RefusalReason, RemitCallCheck, RemitPayload, TrustedKeys } from '../types.js';
import type { CircuitBreaker } from './breaker.js';
import type { Canaries } from './canaries.js';
import { argsErrors } from './schema-validator.js';
import { settledWithin } from '../util/settled-within.js';
import { ABANDONED_WRITE_GRACE_MS, abortable, abortMessage, ArgsInvalid, DeterministicFailure, NotAttempted, RefusedBeforeAsking, ScopeRefusal, UpstreamError, type Connector, type ConnectorTool } from './connectors/types.js';
import type { IdempotencyStore } from './idempotency.js';
import type { EventOutbox } from './event-outbox.js';
import type { EventCredential, GatewayEvent, KernelLink } from './kernel-link.js';
import type { GatewayMetrics } from './metrics.js';

/** The body of POST /v1/tools/call (interface 4.2). */
export interface ToolCallRequest {
  remit_token: string;
  run_id?: string | null;
  step?: string | null;
  lease_id?: string | null;
  tool: string;
  args?: Record<string, unknown>;
  idempotency_key?: string | null;
  /** When not null, narrows: every derived scope must match it (decisions §9). */
  scope?: string | null;
}

/** What the HTTP layer sends back. */
export interface CallResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Deepest nesting of a tool's answer that the gateway passes on (decisions §10: never a 500). */
const MAX_RESULT_DEPTH = 256;

/**
 * An upstream value as the gateway keeps it (redacted), or why it cannot be kept: nested
 * deeper than the walks after it allow, or too large for them (a RangeError from building its
 * text). Either is the upstream's answer, so the caller stores it as a deterministic failure:
 * for a write the upstream did act, and the key must hold an outcome rather than stay claimed.
 */
function keepable(redactor: Redactor, value: unknown, what: string): { ok: true; value: unknown } | { ok: false; message: string; details: Record<string, unknown> } {
  const deep = depthProblem(value, MAX_RESULT_DEPTH, what);
  if (deep) return { ok: false, message: deep.message, details: { path: deep.path } };
  try {
    return { ok: true, value: redactor.redactValue(value) };
  } catch (err) {
    return { ok: false, message: `${what} cannot be kept: ${(err as Error).message}`, details: {} };
  }
}

/** The actor of the events the gateway appends. */
export const GATEWAY_ACTOR = { id: 'gateway', role: 'gateway' } as const;

export interface CallDeps {
  link(): KernelLink;
  clock: Clock;
  logger: Logger;
  redactor: Redactor;
  metrics: GatewayMetrics;
  store: IdempotencyStore;
  canaries: Canaries;
  /** Clock leeway for nbf/exp, seconds. */
  skewSeconds: number;
  /** Appends the gateway's events to runs, queueing them while the kernel does not answer. */
  events: Pick<EventOutbox, 'deliver'>;
  findTool(id: string): { connector: Connector; tool: ConnectorTool } | null;
  breaker(connector: string): CircuitBreaker;
}

/** How often a failed idempotency claim is logged, per gateway logger and message. */
const CLAIM_FAULT_LOG_MS = 10_000;
const claimFaultLogs = new WeakMap<object, LogThrottle>();

/** The key id a token names, without verifying anything (used to refresh cached keys). */
export function keyIdOf(token: string): string | undefined {
  const parts = token.split('.');
  return parts.length === 4 ? parts[1] : undefined;
}

/** A gateway error body (decisions §9): `{ok: false, error: {code, message, details}}`. */
export function gatewayError(code: ErrorCode, message: string, details: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): CallResponse {
  return { status: ERROR_CODES[code].status, body: { ok: false, error: { code, message, details, ...extra } } };
}

/** 502 `upstream_error` with `circuit: "open"`, when to retry in the details and as `Retry-After` (whole seconds, at least 1). */
function circuitOpen(message: string, details: Record<string, unknown>, retryAfterMs: number): CallResponse {
  const res = gatewayError('upstream_error', message, { ...details, retry_after_ms: retryAfterMs }, { circuit: 'open' });
  return { ...res, headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) } };
}

/** The answer to a connector that failed while deriving a call's scopes (before any claim or breaker). */
function scopeDerivationFailure(err: unknown): { response: CallResponse; outcome: string } | { refusal: string } {
  if (err instanceof ScopeRefusal) return { refusal: err.message };
  if (err instanceof ArgsInvalid) return { response: gatewayError('args_invalid', err.message, { errors: [{ path: err.path, message: err.message }] }), outcome: 'args_invalid' };
  if (err instanceof DeterministicFailure) return { response: gatewayError('deterministic_failure', err.message, err.details), outcome: 'deterministic_failure' };
  return { response: gatewayError('upstream_error', (err as Error).message), outcome: 'upstream_error' };
}

export async function handleToolCall(d: CallDeps, req: ToolCallRequest): Promise<CallResponse> {
  return new ToolCall(d, req).run();
}

/** A call that passed every remit and argument check: what the rest of the path works on. */
interface Admitted {
  payload: RemitPayload;
  connector: Connector;
  tool: ConnectorTool;
  args: Record<string, unknown>;
  /** Every scope the call touches; grows when a followed redirect enters another (ctx.enterScope). */
  scopes: string[];
  writes: boolean;
  argsHash: string;
  key: string | null;
}

/**
 * One call through its phases: `admit` (the remit and the arguments), `gate` (idempotency,
 * quarantine, circuit), `execute` (the upstream and what is kept of its answer). Each phase
 * either hands the next what it needs or answers the call itself.
 */
class ToolCall {
  private readonly t0 = performance.now();
  private readonly found: { connector: Connector; tool: ConnectorTool } | null;
  private readonly toolLabel: string;
  /** The verified remit; null until the token checked out (or when it is bound to another run). */
  private payload: RemitPayload | null = null;
  /** This call's idempotency claim was released. */
  private released = false;

  constructor(
    private readonly d: CallDeps,
    private readonly req: ToolCallRequest,
  ) {
    this.found = d.findTool(req.tool);
    this.toolLabel = this.found ? req.tool : '_unknown';
  }

  async run(): Promise<CallResponse> {
    const admitted = await this.admit();
    if (!('payload' in admitted)) return admitted;
    const gated = await this.gate(admitted);
    if ('status' in gated) return gated;
    try {
      return await this.execute(admitted, gated.trial);
    } catch (err) {
      // A bug past the claim (answered 500 by the route): a read's key must not stay claimed
      // for good, while a write's stays, since the upstream may have acted, and turns unknown
      // now (not in flight until a restart: nothing runs under it any more).
      if (!admitted.writes) await this.release(admitted);
      else if (!this.released) await this.keepUnknown(admitted);
      throw err;
    }
  }

  // --- phase 1: token (5.3 steps 1–4) → tool exists → tool pattern → args → scope → autonomy

  private async admit(): Promise<Admitted | CallResponse> {
    const { d, req } = this;
    const token = req.remit_token;
    let keys: TrustedKeys;
    try {
      keys = await d.link().trustedKeys(keyIdOf(token));
    } catch (err) {
      // Step 1 needs no keys: a token that is not even well formed is refused as such, kernel or not.
      const decoded = decodeToken(token);
      if (!decoded.ok) return this.refuse('token_malformed', decoded.detail);
      const e = isSvcError(err) ? err : null;
      return this.finish(gatewayError(e?.code ?? 'unavailable', e?.message ?? 'cannot obtain the kernel keys'), e?.code ?? 'unavailable');
    }
    const now = Math.floor(d.clock.now() / 1000);
    const check = (call: RemitCallCheck) => verifyRemit(token, keys, now, call, { skewSeconds: d.skewSeconds });
    const v = check({ run_id: req.run_id ?? null });
    if (!v.ok) {
      // Bound to another run: the token checks out, but not for this run; no remit header there.
      if (v.reason === 'remit_run_mismatch') {
        const bound = check({});
        return this.refuse(v.reason, v.detail, bound.ok ? bound.payload.run : undefined);
      }
      return this.refuse(v.reason, v.detail);
    }
    const payload = v.payload;
    this.payload = payload;

    if (!this.found) return this.finish(gatewayError('tool_not_found', `no tool ${req.tool}`, { tool: req.tool }), 'tool_not_found');
    const { connector, tool } = this.found;

    const v5 = check({ tool: req.tool });
    if (!v5.ok) return this.refuse(v5.reason, v5.detail);

    const args = req.args ?? {};
    if (!tool.validate(args)) {
      // The first problem in the message, as input_invalid and output_invalid say theirs.
      const errors = argsErrors(tool.validate.errors);
      const first = errors[0] ? `: ${errors[0].path} ${errors[0].message}` : '';
      return this.finish(gatewayError('args_invalid', `arguments of ${req.tool} do not match its input schema${first}`, { errors }), 'args_invalid');
    }

    // Step 6: every scope the call touches, narrowed by the request's scope when given.
    let scopes: string[];
    try {
      scopes = await connector.deriveScopes(tool.operation, args);
    } catch (err) {
      const failed = scopeDerivationFailure(err);
      return 'refusal' in failed ? this.refuse('scope_not_granted', failed.refusal) : this.finish(failed.response, failed.outcome);
    }
    const refusal = this.scopeRefusal(connector, payload, scopes);
    if (refusal !== null) return refusal;

    const writes = tool.descriptor.writes;
    const v7 = check({ tool: req.tool, writes });
    if (!v7.ok) return this.refuse(v7.reason, v7.detail);

    return { payload, connector, tool, args, scopes, writes, argsHash: canonicalHash(args), key: req.idempotency_key ?? null };
  }

  /**
   * Step 6 for `scopes`: each inside the request's scope, when one is given, and granted by
   * the remit. A scope may also be granted, or asked for, by one of its alternative literals,
   * and then only by that exact literal: `http:*` is about hosts, never an mcp server `http`.
   */
  private scopeRefusal(connector: Connector, payload: RemitPayload, scopes: string[]): Promise<CallResponse> | null {
    const { req } = this;
    const alternatives = (s: string) => connector.scopeAlternatives?.(s) ?? [];
    if (req.scope !== undefined && req.scope !== null) {
      const outside = scopes.find((s) => !scopeMatches(req.scope!, s) && !alternatives(s).includes(req.scope!));
      if (outside !== undefined) return this.refuse('scope_not_granted', `scope ${outside} is outside the requested scope ${req.scope}`);
    }
    const missing = scopes.find((s) => !anyScopeMatches(payload.scopes, s) && !alternatives(s).some((alt) => payload.scopes.includes(alt)));
    return missing === undefined ? null : this.refuse('scope_not_granted', `scope ${missing} is not granted by remit ${payload.rid}`);
  }

  // --- phase 2: idempotency replay → quarantine (503) → circuit (502); `trial` lets the call run

  private async gate(a: Admitted): Promise<CallResponse | { trial: boolean }> {
    const { d, req } = this;
    const { key } = a;
    if (key !== null) {
      let claim: Awaited<ReturnType<IdempotencyStore['claim']>>;
      try {
        claim = await d.store.claim(req.tool, key, a.argsHash, a.writes);
      } catch (err) {
        return this.failWith(a, this.storeFailed(a, 'claim', err, 'nothing ran'), 'store_failed');
      }
      switch (claim.kind) {
        case 'replay': {
          const stored = claim.body as Record<string, unknown>;
          // The stored answer may come from scopes the call entered on its way (a redirect's
          // host): this remit must grant those too, not just what its arguments derive.
          const entered = Array.isArray(stored.scopes) ? stored.scopes.filter((s): s is string => typeof s === 'string' && !a.scopes.includes(s)) : [];
          const refusal = entered.length > 0 ? this.scopeRefusal(a.connector, a.payload, entered) : null;
          if (refusal !== null) return refusal;
          await this.audit(a, claim.status === 200 ? 'ok' : 'deterministic_failure', true);
          const body = claim.status === 200 ? { ok: true, ...stored, replayed: true, latency_ms: this.elapsedMs() } : { ...stored, replayed: true };
          return this.finish({ status: claim.status, body }, 'replayed');
        }
        case 'conflict':
          return this.failWith(a, gatewayError('idempotency_conflict', `idempotency key ${key} was used for ${req.tool} with other arguments`, { tool: req.tool, idempotency_key: key }), 'idempotency_conflict');
        case 'in_flight': {
          const res = gatewayError('idempotency_in_flight', `a call with idempotency key ${key} is still running`, { tool: req.tool, idempotency_key: key });
          return this.failWith(a, { ...res, headers: { 'retry-after': '1' } }, 'idempotency_in_flight');
        }
        case 'unknown':
          return this.failWith(
            a,
            gatewayError('idempotency_outcome_unknown', `a write with idempotency key ${key} was cut off before its outcome was known (the gateway stopped, or the write was given up with no answer); it will not run again`, { tool: req.tool, idempotency_key: key }),
            'idempotency_outcome_unknown',
          );
        case 'claimed':
          break;
      }
    }

    const { connector } = a;
    try {
      if (d.canaries.isQuarantined(connector.name)) {
        await this.release(a);
        return this.failWith(a, gatewayError('connector_quarantined', `connector ${connector.name} is quarantined by its canary (svc gateway canaries says why); once it is repaired, svc gateway release ${connector.name}, then svc run resume the runs it parked`, { connector: connector.name }), 'connector_quarantined');
      }
      const admission = d.breaker(connector.name).admit();
      if (!admission.ok) {
        await this.release(a);
        return this.failWith(a, circuitOpen(`the circuit of connector ${connector.name} is open`, { connector: connector.name }, admission.retryAfterMs), 'circuit_open');
      }
      return { trial: admission.trial };
    } catch (err) {
      // Nothing ran under the claim: a bug here must not leave the key claimed until a restart.
      await this.release(a);
      throw err;
    }
  }

  // --- phase 3: the upstream call, and what is kept of its answer

  /** `trial`: the breaker admitted this call as its half-open trial. */
  private async execute(a: Admitted, trial: boolean): Promise<CallResponse> {
    const { d, req } = this;
    const { connector, tool, args, scopes, key } = a;
    const breaker = d.breaker(connector.name);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`${req.tool} timed out after ${connector.timeoutMs} ms (timeout_ms of connector ${connector.name})`)), connector.timeoutMs);
    const requestScope = req.scope ?? null;
    const granted = a.payload.scopes;
    let outcomeUnknown = false;
    let work: Promise<unknown> | undefined;
    let result: unknown;
    try {
      const answer = await abortable(
        (work = connector.call(tool.operation, args, {
          signal: controller.signal,
          derivedScopes: [...scopes],
          now: () => d.clock.now(),
          enterScope: (s) => {
            if (!anyScopeMatches(granted, s) || (requestScope !== null && !scopeMatches(requestScope, s))) return false;
            if (!scopes.includes(s)) scopes.push(s);
            return true;
          },
          outcomeUnknown: () => {
            outcomeUnknown = true;
          },
        })),
        controller.signal,
      );
      // An answer nested too deep for the walks after it (redaction, the stored body) is
      // kept as a deterministic failure: for a write the upstream did act, so the key must
      // hold an outcome, never stay claimed or run again.
      const kept = keepable(d.redactor, answer, 'the upstream answer');
      if (!kept.ok) throw new DeterministicFailure(kept.message, kept.details);
      result = kept.value;
    } catch (err) {
      if (err instanceof DeterministicFailure) {
        if (err instanceof RefusedBeforeAsking) breaker.neutral(trial);
        else breaker.success(); // the upstream answered
        return this.deterministicFailure(a, err);
      }
      if (err instanceof ArgsInvalid || err instanceof ScopeRefusal) {
        breaker.neutral(trial);
        return this.refusedByConnector(a, err, outcomeUnknown);
      }
      // A write given up at its timeout: the connector may need a moment to learn whether it
      // had started (a killed sqlite process's last messages), and says so before it settles.
      // One that finishes meanwhile (an fs write cannot be stopped) did run: its answer is
      // the call's, stored under its key like any other, never run a second time.
      const late = controller.signal.aborted && a.writes && work ? await settledWithin(work, ABANDONED_WRITE_GRACE_MS) : null;
      const lateKept = late?.state === 'fulfilled' ? keepable(d.redactor, late.value, 'the upstream answer') : null;
      // A late answer too large or deep to keep still means the write ran: unknown, never run again.
      if (!lateKept?.ok) return this.upstreamFailed(a, err, trial, controller.signal, a.writes && (outcomeUnknown || lateKept !== null));
      result = lateKept.value;
    } finally {
      clearTimeout(timer);
    }

    // The upstream did it. From here a write's claim must never be released: a store that
    // cannot keep the result leaves the key pending, so a repeat waits (409 in flight) and,
    // after a restart, is `unknown` — never executed twice. A read that runs again changes
    // nothing, so its claim is released and a retry runs it.
    breaker.success();
    const stored = { result, scope: scopes[0] ?? null, scopes };
    if (key !== null) {
      try {
        await d.store.complete(req.tool, key, 200, stored);
      } catch (err) {
        if (!a.writes) {
          await this.release(a);
          return this.failWith(a, this.storeFailed(a, 'store the result', err, 'the read ran and its result was not kept; a retry runs it again'), 'store_failed');
        }
        return this.failWith(a, this.storeFailed(a, 'store the result', err, 'the call ran; its key stays claimed so it cannot run again'), 'store_failed');
      }
    }
    await this.audit(a, 'ok', false);
    return this.finish({ status: 200, body: { ok: true, ...stored, replayed: false, latency_ms: this.elapsedMs() } }, 'ok');
  }

  /** The upstream answered with a failure that a retry would repeat: kept under the key. */
  private async deterministicFailure(a: Admitted, err: DeterministicFailure): Promise<CallResponse> {
    const { d, req } = this;
    // The details can carry the upstream's own answer (an MCP error result): bounded the same way.
    const details = keepable(d.redactor, err.details, 'the failure details');
    const res = gatewayError('deterministic_failure', err.message, details.ok ? (details.value as Record<string, unknown> | undefined) : { details_dropped: details.message });
    if (a.key !== null) {
      try {
        await d.store.complete(req.tool, a.key, res.status, d.redactor.redactValue(res.body));
      } catch (storeErr) {
        // A refusal changed nothing, so a read may run again. A write's failure may come
        // after the upstream acted (an answer too large to keep): its key stays claimed.
        if (!a.writes) await this.release(a);
        const then = a.writes ? 'the outcome was not kept; its key stays claimed so the write cannot run again' : 'the upstream refused the call; a retry may run it';
        return this.failWith(a, this.storeFailed(a, 'store a deterministic failure', storeErr, then), 'store_failed');
      }
    }
    return this.failWith(a, res, 'deterministic_failure');
  }

  /**
   * The connector refused before its next request. A write whose earlier request may already
   * have acted (`outcomeUnknown`: an http POST answered by a redirect) keeps its key unknown;
   * anything else is released, so a corrected call can run.
   */
  private async refusedByConnector(a: Admitted, err: ArgsInvalid | ScopeRefusal, outcomeUnknown: boolean): Promise<CallResponse> {
    await (a.writes && outcomeUnknown ? this.keepUnknown(a) : this.release(a));
    if (err instanceof ScopeRefusal) return this.refuse('scope_not_granted', err.message);
    return this.failWith(a, gatewayError('args_invalid', err.message, { errors: [{ path: err.path, message: err.message }] }), 'args_invalid');
  }

  // --- answers, events and the claim

  private elapsedMs(): number {
    return Math.round((performance.now() - this.t0) * 1000) / 1000;
  }

  private runOfCall(): string | null {
    return this.req.run_id ?? this.payload?.run ?? null;
  }

  /** Counts the call and redacts its body: every answer leaves through here. */
  private finish(res: CallResponse, outcome: string): CallResponse {
    this.d.metrics.calls.inc({ tool: this.toolLabel, outcome });
    this.d.metrics.latency.observe(this.elapsedMs() / 1000);
    return { ...res, body: this.d.redactor.redactValue(res.body) };
  }

  /**
   * Appends to the call's run with its remit when the token verified, then the call's lease,
   * then (for a refusal only) the bearer alone, since the token may be the bad one.
   */
  private async emit(ev: GatewayEvent): Promise<void> {
    const runId = this.runOfCall();
    if (!runId) return;
    const creds: EventCredential[] = [];
    if (this.payload) creds.push({ remit: this.req.remit_token });
    if (typeof this.req.lease_id === 'string' && this.req.lease_id !== '') creds.push({ lease: this.req.lease_id });
    if (ev.kind === 'tool.refused') creds.push({ bearer: true });
    await this.d.events.deliver(runId, ev, creds);
  }

  /** `boundRun`: the run a verified token is bound to when it is not the call's (remit_run_mismatch). */
  private async refuse(reason: RefusalReason, detail: string, boundRun?: string): Promise<CallResponse> {
    const { d, req } = this;
    d.metrics.refusals.inc({ reason });
    const ev: GatewayEvent = {
      kind: 'tool.refused',
      payload: { tool: req.tool, reason, detail, step: req.step ?? null, lease_id: req.lease_id ?? null, run_id: req.run_id ?? null },
      actor: GATEWAY_ACTOR,
    };
    // Interface 5.3: the refusal is recorded on the call's run and, for a token bound to
    // another run, on that run too (its owner learns that its remit was presented elsewhere).
    const alsoBound = boundRun !== undefined && boundRun !== this.runOfCall();
    await Promise.all([this.emit(ev), alsoBound ? d.events.deliver(boundRun, ev, [{ remit: req.remit_token }, { bearer: true }]) : Promise.resolve()]);
    return this.finish({ status: 403, body: { ok: false, refusal: { reason, detail } } }, 'refused');
  }

  /** The `tool.called` audit event of a call that passed the remit. */
  private audit(a: Admitted, outcome: string, replayed: boolean): Promise<void> {
    const { req } = this;
    return this.emit({
      kind: 'tool.called',
      payload: {
        tool: req.tool,
        connector: a.connector.name,
        step: req.step ?? null,
        lease_id: req.lease_id ?? null,
        scopes: a.scopes,
        args_hash: a.argsHash,
        idempotency_key: a.key,
        writes: a.writes,
        replayed,
        outcome,
        latency_ms: this.elapsedMs(),
      },
      actor: GATEWAY_ACTOR,
    });
  }

  private async failWith(a: Admitted, res: CallResponse, outcome: string): Promise<CallResponse> {
    await this.audit(a, outcome, false);
    return this.finish(res, outcome);
  }

  /**
   * The idempotency store failed (a disk error, say): logged, and a 503 saying what happened.
   * A claim that failed ran nothing, and on a full disk every call's does: logged once every
   * CLAIM_FAULT_LOG_MS, the next line naming how many were not (health says the fault
   * meanwhile). A failure after the upstream ran is logged every time.
   */
  private storeFailed(a: Admitted, what: string, err: unknown, consequence: string): CallResponse {
    const message = this.d.redactor.redact((err as Error)?.message ?? String(err));
    const unlogged = what === 'claim' ? throttleFor(claimFaultLogs, this.d.logger, CLAIM_FAULT_LOG_MS).pass(message) : 0;
    if (unlogged !== null) this.d.logger.error(`idempotency store: cannot ${what}`, { tool: this.req.tool, err: message, ...(unlogged > 0 ? { not_logged_before: unlogged } : {}) });
    return gatewayError('unavailable', `the idempotency store cannot ${what} (${message}); ${consequence}`, { tool: this.req.tool, idempotency_key: a.key });
  }

  /**
   * The upstream failed (or the call was given up): counted by the breaker, the claim released
   * — or, for a write that may have taken effect (`unknown`), kept so it never runs again —
   * and a 502 that says whether the circuit is now open.
   */
  private async upstreamFailed(a: Admitted, err: unknown, trial: boolean, signal: AbortSignal, unknown: boolean): Promise<CallResponse> {
    const { d, req } = this;
    const breaker = d.breaker(a.connector.name);
    if (err instanceof NotAttempted) breaker.neutral(trial);
    else breaker.failure(trial);
    if (unknown) await this.keepUnknown(a);
    else await this.release(a);
    let message = err instanceof UpstreamError ? err.message : signal.aborted ? abortMessage(signal) : `${req.tool} failed: ${(err as Error).message}`;
    if (!(err instanceof UpstreamError) && !signal.aborted) d.logger.error('connector threw an unexpected error', { tool: req.tool, err: d.redactor.redact((err as Error).stack ?? String(err)) });
    let details = err instanceof UpstreamError ? err.details : {};
    if (unknown) {
      // An operator may have to reconcile this write with the upstream by hand.
      d.logger.warn('a write was stopped mid-run or lost its answer; its outcome is unknown', { tool: req.tool, idempotency_key: a.key, run_id: req.run_id ?? null });
      message += `; the write was cut off with no answer and may have taken effect, so its outcome is unknown${a.key !== null ? ' and a repeat of its idempotency key will not run it again' : ''}`;
      details = { ...details, outcome: 'unknown' };
    }
    const state = breaker.state;
    // Not attempted: the breaker did not count it, so no circuit is to be named.
    if (state === 'closed' || (err instanceof NotAttempted && state !== 'open')) return this.failWith(a, gatewayError('upstream_error', message, details), 'upstream_error');
    // A straggler ending while the circuit is half-open: not open by this call, no wait to name.
    if (state !== 'open') return this.failWith(a, gatewayError('upstream_error', message, details, { circuit: 'open' }), 'upstream_error');
    // This failure opened the circuit: answered like the calls it now turns away, with when to retry.
    return this.failWith(a, circuitOpen(message, details, breaker.retryAfterMs()), 'upstream_error');
  }

  /** Marks a write's claim `unknown`; failing that, the claim stays pending (also never run again). */
  private async keepUnknown(a: Admitted): Promise<void> {
    if (a.key === null) return;
    this.released = true; // the claim is not ours to drop any more
    try {
      await this.d.store.markUnknown(this.req.tool, a.key);
    } catch (err) {
      // Expected while svcd stops (the store closes first): pending turns unknown at the next start.
      this.d.logger.warn('idempotency store: a write of unknown outcome stays pending; the next start marks it unknown', { tool: this.req.tool, err: this.d.redactor.redact((err as Error).message) });
    }
  }

  /**
   * Nothing ran under the claim (or a read did): frees the key so a retry can run. A store
   * that cannot even do that for a write is logged; the pending claim then turns `unknown` at
   * the next start, which errs on the side of never running twice. A read's claim is in
   * memory and always released.
   */
  private async release(a: Admitted): Promise<void> {
    // Once: a second release could drop the claim a concurrent retry has taken since.
    if (a.key === null || this.released) return;
    this.released = true;
    try {
      await this.d.store.release(this.req.tool, a.key);
    } catch (err) {
      this.d.logger.error('idempotency store: cannot release a claim', { tool: this.req.tool, err: this.d.redactor.redact((err as Error).message) });
    }
  }
}
