/**
 * What earlier leases of the same step already did, read from the lease's `prior_events`
 * (decisions §6). After a park (an approval, a lost lease, a retried failure) the model loop
 * replays the `model.called` answers it recorded instead of asking the provider again, so the
 * loop takes the same path, proposes the same actions (same action ids, so an approval
 * applies) and reuses the same idempotency keys (so the gateway answers tool calls from its
 * store instead of running them twice).
 *
 * - A `step.quarantined` event for the step starts a new segment: after an operator resumes a
 *   quarantined step it runs afresh (replaying the answers that led to the quarantine would
 *   only repeat it), with idempotency keys of its own.
 * - The gateway's `tool.called` events give each idempotency key's last outcome, so an action
 *   whose stored deterministic failure is what quarantined the step can run afresh after the
 *   resume while one that executed keeps its key (`StepRuntime.actionKey`).
 * - The actions allowed before a quarantine (`earlierActions`): a resumed model step tells the
 *   model which of them ran, since it is asked afresh and would otherwise propose them again.
 * - An operator's retry of a compensation that failed for good (`compensation.retry_requested`
 *   naming the step) counts in `compensationRetries`, so a compensation whose stored
 *   deterministic failure is what gave it up runs afresh (`StepRuntime.compensationKey`).
 * - Usage: the answers recorded since the step's last `step.failed` were never reported to the
 *   kernel (their lease ended by a park or expired); the lease that finally completes or fails
 *   the step reports them. Those of a segment a quarantine ended (a lease that expired on the
 *   last attempt reports nothing) are not replayed, but still reported (`carried`), as abandon
 *   would charge them (src/kernel/unreported-usage.ts).
 */
import type { Usage } from './types.js';
import { addSpend } from '../spend.js';
import type { PriorEvent } from './types.js';
import type { ProviderResponse } from './providers/provider.js';
import { isRecord } from '../util/is-record.js';

/** Marks events the worker posts, so they are told apart from the gateway's. */
export const WORKER_EVENT_SOURCE = 'worker';

export interface RecordedModelCall {
  seq: number;
  response: ProviderResponse;
  usage: Usage;
  /** True when a complete or fail after it already reported its usage. */
  reported: boolean;
}

function asResponse(v: unknown): ProviderResponse | null {
  if (!isRecord(v) || !Array.isArray(v.calls)) return null;
  const calls = v.calls.filter((c): c is ProviderResponse['calls'][number] => isRecord(c) && typeof c.tool === 'string' && typeof c.id === 'string');
  const usage = isRecord(v.usage) ? { tokens: Number(v.usage.tokens) || 0, usd: Number(v.usage.usd) || 0 } : { tokens: 0, usd: 0 };
  const out: ProviderResponse = { content: typeof v.content === 'string' ? v.content : null, calls: calls.map((c) => ({ ...c, args: isRecord(c.args) ? c.args : {} })), usage };
  if ('output' in v) out.output = v.output;
  if (typeof v.model === 'string') out.model = v.model;
  return out;
}

/** An action the kernel allowed in an earlier segment of the step (before a quarantine). */
export interface EarlierAction {
  action_id: string;
  tool: string;
  summary: string;
}

export class StepHistory {
  private constructor(
    /** How many times the step was quarantined before this lease (0 normally). */
    readonly segment: number,
    private readonly calls: Map<number, RecordedModelCall>,
    private readonly toolOutcomes: Map<string, string> = new Map(),
    /** Actions allowed before the last quarantine, oldest first, each once. */
    readonly earlierActions: readonly EarlierAction[] = [],
    /** Usage of earlier segments' answers that no lease reported: this lease reports it. */
    readonly carried: Usage = { tokens: 0, usd: 0 },
    /** How often an operator asked for the step's given-up compensation to run again. */
    readonly compensationRetries = 0,
  ) {}

  static empty(): StepHistory {
    return new StepHistory(0, new Map());
  }

  /** Reads the history of `step` from a lease's prior events. */
  static from(events: readonly PriorEvent[] | undefined, step: string): StepHistory {
    let segment = 0;
    let calls = new Map<number, RecordedModelCall>();
    let carried: Usage = { tokens: 0, usd: 0 };
    const toolOutcomes = new Map<string, string>();
    // Allowed actions by id: those of the current segment are dropped at each quarantine's
    // turn into `earlier`, so what is left in `earlier` at the end came before the resume.
    let current = new Map<string, EarlierAction>();
    const earlier = new Map<string, EarlierAction>();
    const sorted = [...(Array.isArray(events) ? events : [])].filter((e) => isRecord(e) && typeof e.kind === 'string').sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    let compensationRetries = 0;
    for (const e of sorted) {
      const p = isRecord(e.payload) ? e.payload : {};
      // Names its steps in a list (svc-events(7)).
      if (e.kind === 'compensation.retry_requested' && Array.isArray(p.steps) && p.steps.includes(step)) compensationRetries += 1;
      if (p.step !== step) continue;
      if (e.kind === 'step.quarantined') {
        segment += 1;
        for (const c of calls.values()) if (!c.reported) carried = addSpend(carried, c.usage);
        calls = new Map();
        for (const [id, a] of current) if (!earlier.has(id)) earlier.set(id, a);
        current = new Map();
      } else if (e.kind === 'action.decided' && p.decision === 'allow' && typeof p.action_id === 'string' && isRecord(p.action) && typeof p.action.tool === 'string') {
        const summary = typeof p.action.summary === 'string' ? p.action.summary : p.action.tool;
        current.set(p.action_id, { action_id: p.action_id, tool: p.action.tool, summary });
      } else if (e.kind === 'tool.called' && typeof p.idempotency_key === 'string' && typeof p.outcome === 'string') {
        toolOutcomes.set(p.idempotency_key, p.outcome);
      } else if (e.kind === 'step.failed' && p.kind !== 'compensation') {
        for (const c of calls.values()) c.reported = true;
        carried = { tokens: 0, usd: 0 };
      } else if (e.kind === 'model.called' && p.source === WORKER_EVENT_SOURCE && Number.isInteger(p.call_index)) {
        const response = asResponse(p.response);
        if (!response) continue;
        const segOf = Number.isInteger(p.segment) ? (p.segment as number) : 0;
        if (segOf !== segment) continue;
        calls.set(p.call_index as number, { seq: e.seq, response, usage: response.usage, reported: false });
      }
    }
    return new StepHistory(segment, calls, toolOutcomes, [...earlier.values()], carried, compensationRetries);
  }

  /** The outcome the gateway last recorded for a call of this step under `key`, if any. */
  toolOutcome(key: string): string | undefined {
    return this.toolOutcomes.get(key);
  }

  /** The recorded answer of the model call at `index`, when an earlier lease made it. */
  modelCall(index: number): RecordedModelCall | undefined {
    return this.calls.get(index);
  }

  get size(): number {
    return this.calls.size;
  }
}
