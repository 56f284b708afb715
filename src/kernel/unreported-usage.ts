/**
 * Model usage a worker recorded but no lease ever reported. A worker reports a step's usage
 * when it completes or fails the step (decisions §8); the usage of model calls made by a lease
 * that ended in a park or an expiry is reported by the step's next lease, which replays the
 * recorded answers (docs/design.md, "Resuming after a park"). A run abandoned in between has
 * no next lease: its `model.called` events are the only record of what those calls cost, and
 * abandon charges them to the run so that the spend the run shows is the spend it caused.
 *
 * This mirrors the worker's own rule (src/worker/step-history.ts): a step's calls recorded
 * since its last `step.failed` or `step.completed` are unreported; a call index recorded
 * twice in one segment is counted once.
 */
import { MAX_USAGE_TOKENS, MAX_USAGE_USD, usdNanos } from '../spend.js';
import type { Spend } from '../types.js';
import { isRecord } from '../util/is-record.js';

interface UsageEvent {
  kind: string;
  payload: unknown;
}

/**
 * A usage object a worker posted, when it is one: non-negative numbers, each capped at what a
 * lease's report may say (src/spend.ts). The event is the worker's word, not checked when it
 * was posted: a larger figure is charged as the maximum, as the worker itself charges an
 * answer it cannot read (src/worker/providers/usage.ts), never summed into Infinity.
 */
function usageOf(v: unknown): Spend | null {
  if (!isRecord(v)) return null;
  const tokens = v.tokens ?? 0;
  const usd = v.usd ?? 0;
  if (typeof tokens !== 'number' || Number.isNaN(tokens) || tokens < 0) return null;
  if (typeof usd !== 'number' || Number.isNaN(usd) || usd < 0) return null;
  return { tokens: Math.min(MAX_USAGE_TOKENS, Math.ceil(tokens)), usd: Math.min(MAX_USAGE_USD, usd) };
}

/** The unreported usage of every step, summed, from a run's events in seq order. */
export function unreportedUsage(events: readonly UsageEvent[]): Spend {
  const perStep = new Map<string, Map<string, Spend>>();
  for (const e of events) {
    if (!isRecord(e.payload) || typeof e.payload.step !== 'string') continue;
    const step = e.payload.step;
    if ((e.kind === 'step.failed' && e.payload.kind !== 'compensation') || e.kind === 'step.completed') {
      perStep.delete(step);
    } else if (e.kind === 'model.called' && e.payload.source === 'worker' && Number.isInteger(e.payload.call_index)) {
      const usage = usageOf(e.payload.usage);
      if (!usage) continue;
      const segment = Number.isInteger(e.payload.segment) ? (e.payload.segment as number) : 0;
      let calls = perStep.get(step);
      if (!calls) perStep.set(step, (calls = new Map()));
      calls.set(`${segment}/${e.payload.call_index as number}`, usage);
    }
  }
  // Whole nano-dollars, as a lease's report is added (src/spend.ts): micro-dollars here charged
  // a call of $0.00001845 as $0.000018 and one under half a micro-dollar as nothing.
  let tokens = 0;
  let nanos = 0;
  for (const calls of perStep.values()) {
    for (const u of calls.values()) {
      tokens = Math.min(MAX_USAGE_TOKENS, tokens + u.tokens);
      nanos = Math.min(usdNanos(MAX_USAGE_USD), nanos + usdNanos(u.usd));
    }
  }
  return { tokens, usd: nanos / 1e9 };
}
