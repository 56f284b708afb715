/**
 * The kernel endpoints a worker uses (interface 4.1): leases, heartbeats, complete, fail,
 * action proposals and external events. A 410 on any lease call is a LeaseLostError.
 *
 * Calls made under a lease (complete, fail, proposals, events) ride out a kernel that cannot
 * be reached or answers 503 (a restart, a drain) while the lease is still the worker's: given
 * `until` (the lease's expiry, ms), they retry with backoff until just before it. Repeating a
 * call that did reach the kernel before the connection broke is harmless: a second complete or
 * fail of the lease is a 410, a repeated proposal has the same action id, a repeated
 * `model.called` the same call index.
 *
 * Every request is bounded on the client's side (`requestTimeoutMs`; a lease's long poll by its
 * `wait_seconds` plus `leaseMarginMs`; a call under a lease also by what is left of the lease,
 * at least LEASE_CALL_MIN_WAIT_MS): a kernel that takes the connection and never answers is
 * then a kernel that cannot be reached, logged and asked again like one that refuses it, not a
 * wait of minutes for the HTTP client's own limits.
 */
import { Backoff } from './backoff.js';
import { LeaseLostError, StepError } from './errors.js';
import { errorOf, requestJson, type JsonResponse, type PeerOptions } from './http.js';
import { chargeableUsage } from './providers/usage.js';
import type { Lease, PriorEvent, Usage } from './types.js';

export interface LeaseRequest {
  worker_id: string;
  kinds: string[];
  ttl_seconds: number;
  /** Long-poll: the kernel holds the request up to this long for work (max 30). */
  wait_seconds: number;
}

export interface ProposalResult {
  action_id: string;
  decision: 'allow' | 'deny' | 'approval_required';
  rule: string;
  approval_id: string | null;
}

/** External event kinds a worker posts (decisions §7). */
export type WorkerEventKind = 'note' | 'model.called' | 'tool.called';

/** Options of a call made under a lease. */
export interface LeaseCallOptions {
  signal?: AbortSignal;
  /** Epoch ms until which an unreachable kernel is retried (the lease's expiry); none: no retry. */
  until?: () => number;
}

/** First and longest wait between retries of a lease call, ms. */
export const LEASE_RETRY_MS = { first: 250, max: 2000 } as const;

/** How long a request to the kernel other than a lease's long poll may take, ms. */
export const KERNEL_REQUEST_TIMEOUT_MS = 30_000;

/** How long past its `wait_seconds` a lease's long poll may take, ms. */
export const LEASE_POLL_MARGIN_MS = 10_000;

/**
 * The least a call under a lease may wait for its answer, ms, however little of the lease is
 * left: a report sent at the expiry's edge still gets a moment to land.
 */
export const LEASE_CALL_MIN_WAIT_MS = 1_000;

export interface KernelClientOptions {
  /** Longest wait for a kernel's answer to any request but a lease's long poll, ms. (Default: 30000) */
  requestTimeoutMs?: number;
  /** Longest wait for the answer to a lease's long poll past its `wait_seconds`, ms. (Default: 10000) */
  leaseMarginMs?: number;
}

export class KernelClient {
  private readonly requestTimeoutMs: number;
  private readonly leaseMarginMs: number;

  constructor(
    readonly peer: PeerOptions,
    opts: KernelClientOptions = {},
  ) {
    this.requestTimeoutMs = opts.requestTimeoutMs ?? KERNEL_REQUEST_TIMEOUT_MS;
    this.leaseMarginMs = opts.leaseMarginMs ?? LEASE_POLL_MARGIN_MS;
  }

  private request(method: string, path: string, body: unknown, opts: { headers?: Record<string, string>; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<JsonResponse> {
    return requestJson(this.peer, method, path, body, { timeoutMs: this.requestTimeoutMs, ...opts });
  }

  private async leaseRequest(method: string, path: string, body: unknown, opts: LeaseCallOptions & { headers?: Record<string, string> }): Promise<JsonResponse> {
    const backoff = new Backoff(LEASE_RETRY_MS);
    for (;;) {
      let unreachable: StepError;
      try {
        // A call under a lease waits no longer than the lease (and LEASE_CALL_MIN_WAIT_MS): a
        // kernel that stopped answering held a report 30 s, the step 20 s past its expiry.
        const left = opts.until === undefined ? Infinity : opts.until() - Date.now();
        const timeoutMs = Math.min(this.requestTimeoutMs, Math.max(LEASE_CALL_MIN_WAIT_MS, left));
        const res = await this.request(method, path, body, { headers: opts.headers, signal: opts.signal, timeoutMs });
        if (res.status !== 503 || opts.until === undefined) return res;
        unreachable = kernelError(`${method} ${path}`, res);
      } catch (err) {
        if (!(err instanceof StepError && err.code === 'network_error')) throw err;
        unreachable = err;
      }
      if (opts.until === undefined) throw unreachable;
      await backoff.next(unreachable, opts.until(), opts.signal);
    }
  }

  /** Asks for a step; null when the kernel had nothing within `wait_seconds` (204). */
  async lease(req: LeaseRequest, signal?: AbortSignal): Promise<Lease | null> {
    const res = await this.request('POST', '/leases', req, { signal, timeoutMs: Math.max(0, Number(req.wait_seconds) || 0) * 1000 + this.leaseMarginMs });
    if (res.status === 204) return null;
    if (res.status === 200 && res.body && typeof res.body === 'object' && typeof res.body.lease_id === 'string') return res.body as Lease;
    throw kernelError('lease', res);
  }

  /** A page of a run's events from `fromSeq` on (GET /runs/{id}/events), retried like a lease call. */
  async events(runId: string, fromSeq: number, limit: number, opts: LeaseCallOptions = {}): Promise<{ events: PriorEvent[]; next_seq: number }> {
    const res = await this.leaseRequest('GET', `/runs/${encodeURIComponent(runId)}/events?from_seq=${fromSeq}&limit=${limit}`, undefined, opts);
    if (res.status === 200 && res.body && Array.isArray(res.body.events)) return res.body as { events: PriorEvent[]; next_seq: number };
    throw kernelError('events', res);
  }

  /** Extends the lease; LeaseLostError on 410 (the run was parked or the lease ended). */
  async heartbeat(leaseId: string, signal?: AbortSignal): Promise<{ expires_at: string }> {
    const res = await this.request('POST', `/leases/${encodeURIComponent(leaseId)}/heartbeat`, {}, { signal });
    if (res.status === 200) return res.body as { expires_at: string };
    throw leaseError(leaseId, 'heartbeat', res);
  }

  /**
   * Completes the step; a 422 `output_invalid` becomes a deterministic StepError. `usage` is
   * sent as the kernel takes it (chargeableUsage): a count it would refuse charges nothing.
   */
  async complete(leaseId: string, output: unknown, usage: Usage, opts: LeaseCallOptions = {}): Promise<{ run_state: string; next_step: string | null }> {
    const res = await this.leaseRequest('POST', `/leases/${encodeURIComponent(leaseId)}/complete`, { output: output ?? null, usage: chargeableUsage(usage) }, opts);
    if (res.status === 200) return res.body as { run_state: string; next_step: string | null };
    const e = errorOf(res.body);
    if (res.status === 422 && e?.code === 'output_invalid') throw new StepError('output_invalid', e.message || 'step output fails output_schema', true);
    throw leaseError(leaseId, 'complete', res);
  }

  /**
   * Fails the step with the error and whether a retry could help. `outcome` is the step's
   * (interface 3: retry_scheduled or quarantined); `run_state` says what became of the run
   * (`failed` when the usage reported ran over the budget, say). `usage` as in complete.
   */
  async fail(leaseId: string, error: { code: string; message: string }, deterministic: boolean, usage: Usage, opts: LeaseCallOptions = {}): Promise<{ outcome: string; delay_ms: number; run_state?: string }> {
    const res = await this.leaseRequest('POST', `/leases/${encodeURIComponent(leaseId)}/fail`, { error, deterministic, usage: chargeableUsage(usage) }, opts);
    if (res.status === 200) return res.body as { outcome: string; delay_ms: number; run_state?: string };
    throw leaseError(leaseId, 'fail', res);
  }

  /**
   * Proposes an action. A deny comes back as a result with decision `deny` (the kernel's 403
   * `action_denied`), so callers decide how to fail.
   */
  async propose(leaseId: string, action: { tool: string; args: Record<string, unknown>; summary: string }, opts: LeaseCallOptions = {}): Promise<ProposalResult> {
    const res = await this.leaseRequest('POST', `/leases/${encodeURIComponent(leaseId)}/actions`, { action }, opts);
    if (res.status === 200 || res.status === 201) return res.body as ProposalResult;
    const e = errorOf(res.body);
    if (res.status === 403 && e?.code === 'action_denied') {
      const d = (e.details ?? {}) as { action_id?: string; rule?: string; approval_id?: string | null };
      return { action_id: d.action_id ?? '', decision: 'deny', rule: d.rule ?? '', approval_id: d.approval_id ?? null };
    }
    throw leaseError(leaseId, 'propose', res);
  }

  /** Appends an external event to the run under the lease. */
  async postEvent(runId: string, leaseId: string, kind: WorkerEventKind, payload: Record<string, unknown>, actor: unknown, opts: LeaseCallOptions = {}): Promise<{ seq: number; hash: string }> {
    const res = await this.leaseRequest('POST', `/runs/${encodeURIComponent(runId)}/events`, { kind, payload, actor }, { ...opts, headers: { 'x-svc-lease': leaseId } });
    if (res.status === 201 || res.status === 200) return res.body as { seq: number; hash: string };
    throw leaseError(leaseId, `post ${kind} event`, res);
  }
}

function kernelError(what: string, res: JsonResponse): StepError {
  const e = errorOf(res.body);
  const msg = `kernel ${what}: HTTP ${res.status}${e ? ` ${e.code}: ${e.message}` : ''}`;
  // A 5xx or an auth problem is not the step's fault: retryable. A 4xx on our request is a bug
  // in the request the worker built, which a retry will not fix.
  if (res.status >= 500 || res.status === 401 || res.status === 403 || res.status === 429) return new StepError('network_error', msg, false);
  return new StepError(e?.code ?? 'internal', msg, res.status >= 400 && res.status < 500);
}

function leaseError(leaseId: string, what: string, res: JsonResponse): Error {
  if (res.status === 410) return new LeaseLostError(leaseId);
  return kernelError(what, res);
}
