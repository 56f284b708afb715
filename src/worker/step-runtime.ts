/**
 * Everything one leased step can do, bound to its lease: gateway calls with the run's remit
 * token and deterministic idempotency keys, action proposals, external events, and the usage
 * it accumulates. Executors receive one StepRuntime; the Worker reports what they return.
 */
import { sha256Hex } from '../encoding/canonical-json.js';
import type { LeaseKind, ToolDescriptor } from '../types.js';
import { throwIfAborted } from './errors.js';
import type { GatewayClient, ToolCallResult } from './gateway-client.js';
import type { KernelClient, ProposalResult, WorkerEventKind } from './kernel-client.js';
import type { Provider } from './providers/provider.js';
import { StepHistory } from './step-history.js';
import { addSpend, roundUsd } from '../spend.js';
import { ZERO_USAGE, type Lease, type Usage } from './types.js';

/** Something a step did that the Worker re-emits as a typed event. */
export type StepActivity =
  | { type: 'tool'; tool: string; index: number | null; replayed: boolean; latency_ms: number }
  | { type: 'model'; index: number; replayed: boolean; usage: Usage }
  | { type: 'proposal'; tool: string; action_id: string; decision: string; rule: string; approval_id: string | null }
  | { type: 'redaction'; class: string; path: string; count: number };

export interface StepRuntimeDeps {
  kernel: KernelClient;
  gateway: GatewayClient;
  provider: Provider;
  workerId: string;
  /** Most provider answers in one model step. (Default: 16) */
  maxTurns?: number;
  onActivity?: (a: StepActivity) => void;
  /** The lease's expiry as the heartbeats keep it (epoch ms): kernel calls retry until then. */
  leaseExpiresAt?: () => number;
  /**
   * Asks the kernel now whether the lease still holds, and aborts the step if not (410). A
   * gateway call calls it before each retry of a gateway it could not reach: a run abandoned
   * during the outage must not get its write when the gateway comes back, which it would
   * between two heartbeats (a third of the ttl apart).
   */
  confirmLease?: () => Promise<void>;
}

/** sha256 hex of the parts joined by `/`: the idempotency key of one call. */
export function idempotencyKey(...parts: Array<string | number>): string {
  return sha256Hex(parts.join('/'));
}

/** The kind of a lease: the kernel's `kind` when given, else the step definition's. */
export function leaseKind(lease: Lease): LeaseKind | string {
  return lease.kind ?? (typeof lease.step_def?.kind === 'string' ? lease.step_def.kind : 'unknown');
}

export class StepRuntime {
  private historyRead: StepHistory | null = null;
  readonly actor: { id: string; role: string };
  private used: Usage = { ...ZERO_USAGE };

  constructor(
    readonly lease: Lease,
    readonly signal: AbortSignal,
    readonly deps: StepRuntimeDeps,
  ) {
    this.actor = { id: deps.workerId, role: 'worker' };
  }

  /** What earlier leases of the step did, read when first asked: after the worker has made the prior events whole (prior-events.ts). */
  get history(): StepHistory {
    return (this.historyRead ??= StepHistory.from(this.lease.context?.prior_events, this.lease.step));
  }

  get kind(): string {
    return leaseKind(this.lease);
  }

  /** Usage to report with complete or fail. */
  get usage(): Usage {
    return this.used;
  }

  addUsage(u: Partial<Usage> | undefined): void {
    this.used = addSpend(this.used, u);
  }

  /**
   * Why this step may spend no more, or null: the run's usage when leased plus this step's
   * exceeds the lease's budget (decisions §8: `budget − reserved`, the line the kernel fails
   * the run at). Checked after every model call, so a step overshoots by one call at most
   * instead of looping on after the budget is gone.
   */
  overBudget(): string | null {
    const b = this.lease.context?.budget;
    if (!b) return null;
    const tokens = b.used_tokens + this.used.tokens;
    const usd = roundUsd(b.used_usd + this.used.usd);
    if (tokens > b.tokens) return `the run has used ${tokens} tokens of its ${b.tokens}; no further model call is made`;
    if (usd > b.usd) return `the run has spent ${usd} USD of its ${b.usd}; no further model call is made`;
    return null;
  }

  /**
   * sha256(run/step/parts…), with `/r<segment>` appended for a segment after a quarantine: the
   * keys of one call, one per segment of the step.
   */
  private segmentKey(parts: Array<string | number>, segment: number): string {
    const { run_id, step } = this.lease;
    return segment === 0 ? idempotencyKey(run_id, step, ...parts) : idempotencyKey(run_id, step, ...parts, `r${segment}`);
  }

  /**
   * The key of the call at `index` in this step: sha256(run/step/index), with the segment
   * appended after a quarantine so a resumed step's calls are new calls.
   */
  callKey(index: number): string {
    return this.segmentKey([index], this.history.segment);
  }

  /**
   * The key of an approved action: bound to the action id, so it executes once per step, also
   * across a quarantine and resume (`keptAcrossResumes`).
   */
  actionKey(actionId: string): string {
    return this.keptAcrossResumes(['action', actionId]);
  }

  /**
   * The key of a tool step's call of a tool that writes: like an action's, kept across a
   * quarantine and resume, so a write that ran (and the step then failed for another reason,
   * such as its output schema) is answered from the gateway's store instead of running again.
   * A read's key moves with each resume (`callKey`): a resumed read sees the data as it is now.
   */
  writeKey(index: number): string {
    return this.keptAcrossResumes([index]);
  }

  /**
   * A write's key across resumes: the first segment's, moved to a later segment's (`/r<n>`)
   * only when the gateway's answer under it was a stored deterministic failure (provably not
   * executed, and what quarantined the step), so an operator who fixed the cause and resumed
   * gets a fresh execution instead of the same stored failure. Any other outcome keeps it: an
   * executed write is answered from the store, an `unknown` one stays refused until a human
   * settles it.
   */
  private keptAcrossResumes(parts: Array<string | number>): string {
    let key = this.segmentKey(parts, 0);
    for (let segment = 1; segment <= this.history.segment; segment++) {
      if (this.history.toolOutcome(key) === 'deterministic_failure') key = this.segmentKey(parts, segment);
    }
    return key;
  }

  /**
   * The key of this step's compensation: sha256(run/step/compensate), so a retried attempt is
   * answered from the gateway's store once it ran. After an operator's retry of the given-up
   * compensation (`compensation.retry_requested`), `/retry<n>` is added for the n-th retry only
   * when the gateway's answer under the key so far was a stored deterministic failure (nothing
   * ran, and replaying it would make the retry useless); any other outcome keeps the key (an
   * upstream error released its claim; an `unknown` one stays refused until a human settles it).
   */
  compensationKey(): string {
    const { run_id, step } = this.lease;
    let key = idempotencyKey(run_id, step, 'compensate');
    for (let n = 1; n <= this.history.compensationRetries; n++) {
      if (this.history.toolOutcome(key) === 'deterministic_failure') key = idempotencyKey(run_id, step, 'compensate', `retry${n}`);
    }
    return key;
  }

  /** Calls a tool through the gateway under the run's remit. */
  async callTool(tool: string, args: Record<string, unknown>, key: string, index: number | null): Promise<ToolCallResult> {
    throwIfAborted(this.signal);
    const { lease } = this;
    const res = await this.deps.gateway.call(
      { remit_token: lease.context.remit_token, run_id: lease.run_id, step: lease.step, lease_id: lease.lease_id, tool, args, idempotency_key: key, scope: null },
      this.signal,
      { beforeRetry: this.deps.confirmLease },
    );
    this.deps.onActivity?.({ type: 'tool', tool, index, replayed: res.replayed, latency_ms: res.latency_ms });
    return res;
  }

  /** Proposes an action to the kernel (allow, deny, or approval_required). */
  async propose(action: { tool: string; args: Record<string, unknown>; summary: string }): Promise<ProposalResult> {
    throwIfAborted(this.signal);
    const r = await this.deps.kernel.propose(this.lease.lease_id, action, { signal: this.signal, until: this.deps.leaseExpiresAt });
    this.deps.onActivity?.({ type: 'proposal', tool: action.tool, action_id: r.action_id, decision: r.decision, rule: r.rule, approval_id: r.approval_id ?? null });
    return r;
  }

  /** Appends an external event to the run under this lease. */
  async postEvent(kind: WorkerEventKind, payload: Record<string, unknown>): Promise<void> {
    throwIfAborted(this.signal);
    await this.deps.kernel.postEvent(this.lease.run_id, this.lease.lease_id, kind, payload, this.actor, { signal: this.signal, until: this.deps.leaseExpiresAt });
  }

  /**
   * Descriptors of the tools this step may touch: the lease context's, completed by the
   * gateway's. Required by default (the data boundary fails closed without them: GatewayClient.tools).
   */
  async descriptors(opts: { required?: boolean } = {}): Promise<Map<string, Partial<ToolDescriptor>>> {
    const out = new Map<string, Partial<ToolDescriptor>>();
    const about = { run_id: this.lease.run_id, step: this.lease.step, lease_id: this.lease.lease_id };
    for (const d of await this.deps.gateway.tools(this.signal, { ...opts, about })) if (d && typeof d.id === 'string') out.set(d.id, d);
    const ctxTools = this.lease.context?.tools;
    const entries: Array<[string, Partial<ToolDescriptor>]> = Array.isArray(ctxTools)
      ? ctxTools.filter((d) => d && typeof d.id === 'string').map((d) => [d.id as string, d])
      : Object.entries(ctxTools ?? {}).filter(([, d]) => d && typeof d === 'object');
    for (const [id, d] of entries) {
      const prev = out.get(id) ?? {};
      const merged: Partial<ToolDescriptor> = { ...prev, ...d, id, data_classes: { ...(prev.data_classes ?? {}), ...(d.data_classes ?? {}) } };
      // Routing a call as a proposal is the safe side: either source saying "writes" wins.
      if (prev.writes !== undefined || d.writes !== undefined) merged.writes = Boolean(prev.writes) || Boolean(d.writes);
      out.set(id, merged);
    }
    return out;
  }
}
