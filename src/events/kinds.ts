/**
 * Every run event kind (decisions §7) with a one-line meaning. The payload of each kind is
 * documented in man/svc-events.7; `test/unit/events-chain.test.ts` checks that page names
 * every kind listed here.
 */

/** Kinds only the kernel appends. */
export const KERNEL_EVENT_KINDS = {
  'run.created': 'the run exists: bundle, workflow, input, requester, remit, pinned policies, budget, steps',
  'step.leased': 'a step (or its compensation) was handed to a worker',
  'step.completed': 'a leased step finished with an output',
  'step.failed': 'a leased step (or compensation) failed; the next event says what follows',
  'step.retry_scheduled': 'the failed step will be ready again after delay_ms',
  'step.quarantined': 'the step failed deterministically or ran out of attempts',
  'lease.expired': 'a lease ran out before the worker ended it',
  'action.decided': 'a proposed action was decided, with everything replay needs',
  'approval.requested': 'an approval was created for a proposed action',
  'approval.decided': 'an approver approved or rejected an action',
  'run.parked': 'the run waits for a human, a quarantined step or a quarantined connector',
  'run.resumed': 'a parked run runs again',
  'run.completed': 'the last step completed; the run has its output',
  'run.failed': 'the run failed (budget_exhausted)',
  'run.abandon_requested': 'someone abandoned the run; compensations are scheduled',
  'compensation.completed': 'the compensation of a step finished',
  'compensation.failed': 'the compensation of a step failed for good',
  'compensation.retry_requested': 'an operator asked for compensations that failed for good to run again',
  'run.abandoned': 'every compensation ended; the run is abandoned',
  'budget.exceeded': 'usage went over the remit spend',
} as const;

/** Kinds callers may post with X-Svc-Lease or X-Svc-Remit (decisions §7). */
export const EXTERNAL_EVENT_KINDS = {
  note: 'free-form remark, e.g. a redaction by the data boundary',
  'tool.called': 'a worker or the gateway executed a tool call',
  'tool.refused': 'the gateway refused a tool call (interface 5.3)',
  'model.called': 'a worker called a model provider',
} as const;

export type KernelEventKind = keyof typeof KERNEL_EVENT_KINDS;
export type ExternalEventKind = keyof typeof EXTERNAL_EVENT_KINDS;
export type EventKind = KernelEventKind | ExternalEventKind;

export function isExternalKind(kind: string): kind is ExternalEventKind {
  return Object.hasOwn(EXTERNAL_EVENT_KINDS, kind);
}

export const ALL_EVENT_KINDS: readonly EventKind[] = [
  ...(Object.keys(KERNEL_EVENT_KINDS) as KernelEventKind[]),
  ...(Object.keys(EXTERNAL_EVENT_KINDS) as ExternalEventKind[]),
];
