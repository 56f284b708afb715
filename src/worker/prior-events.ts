/**
 * A lease's `prior_events` made whole before its step runs. The kernel carries the last 1000
 * of a step's events and says where they would start (`prior_events_from_seq`). A step that
 * logged more (a read whose result left a redaction note per value, a loop of many tool calls)
 * would otherwise miss its first recorded model answers, ask the provider again, and propose a
 * write worded afresh: a new action id and idempotency key, and the write runs twice
 * (svc-worker(1): "no call runs twice"). The missing events are read from the run's log.
 */
import type { KernelClient, LeaseCallOptions } from './kernel-client.js';
import { leaseKind } from './step-runtime.js';
import type { Lease, PriorEvent } from './types.js';

/** A page of GET /runs/{id}/events, the most the kernel gives at once. */
const PAGE = 1000;

export async function completePriorEvents(kernel: Pick<KernelClient, 'events'>, lease: Lease, opts: LeaseCallOptions = {}): Promise<void> {
  // A compensation replays nothing of its step's history, whose range runs from the step's
  // first lease through the rest of the run: not read.
  if (leaseKind(lease) === 'compensation') return;
  const ctx = lease.context;
  const from = ctx?.prior_events_from_seq;
  const held = Array.isArray(ctx?.prior_events) ? ctx.prior_events : [];
  if (!ctx || typeof from !== 'number' || held.length === 0) return;
  const firstHeld = held[0]!.seq;
  if (!(firstHeld > from)) return;
  const missing: PriorEvent[] = [];
  for (let seq = from; seq < firstHeld; ) {
    const page = await kernel.events(lease.run_id, seq, Math.min(PAGE, firstHeld - seq), opts);
    missing.push(...page.events.filter((e) => e.seq >= seq && e.seq < firstHeld));
    if (page.events.length === 0 || !(page.next_seq > seq)) break;
    seq = page.next_seq;
  }
  ctx.prior_events = [...missing, ...held];
}
