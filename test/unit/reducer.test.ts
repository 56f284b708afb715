/**
 * The reducer (decisions §6, §7; interface 3): one table row per transition, each giving the
 * events before, the event applied, and what must follow (a state, or a refusal). The live
 * path and replay both fold with this function, so these rows pin both.
 */
import { describe, expect, it } from 'vitest';
import { runCreatedPayload } from '../helpers/run-fixtures.js';
import { compensationsFor, foldEvents, initialModel, publicState, reduce, TransitionError, workItem, type RunModel } from '../../src/kernel/reducer.js';

type Ev = { kind: string; payload: Record<string, unknown> };

const AT = (n: number) => new Date(Date.UTC(2026, 10, 22, 10, 0, n)).toISOString();

const created: Ev = {
  kind: 'run.created',
  payload: runCreatedPayload(),
};

const E = {
  leased: (step: string, attempt: number, lease = `l-${step}-${attempt}`, kind = step === 'a' ? 'model' : step === 'b' ? 'action' : 'tool'): Ev => ({
    kind: 'step.leased',
    payload: { step, kind, attempt, lease_id: lease, worker_id: 'w', expires_at: AT(59) },
  }),
  completed: (step: string, attempt: number, output: unknown = { ok: step }, usage = { tokens: 10, usd: 0.1 }, lease = `l-${step}-${attempt}`): Ev => ({
    kind: 'step.completed',
    payload: { step, attempt, lease_id: lease, output, usage },
  }),
  failed: (step: string, attempt: number, deterministic = false, lease: string | null = `l-${step}-${attempt}`, kind = 'model', code = 'boom'): Ev => ({
    kind: 'step.failed',
    payload: { step, kind, attempt, lease_id: lease, error: { code, message: 'it broke' }, deterministic, usage: { tokens: 1, usd: 0.01 } },
  }),
  retry: (step: string, attempt: number, kind = 'model'): Ev => ({ kind: 'step.retry_scheduled', payload: { step, kind, attempt, delay_ms: 1000, ready_at: AT(50) } }),
  quarantined: (step: string, attempt: number): Ev => ({ kind: 'step.quarantined', payload: { step, attempt, reason: 'deterministic' } }),
  parked: (reason: string, step: string, approval_id: string | null = null): Ev => ({ kind: 'run.parked', payload: { reason, step, approval_id } }),
  resumed: (reason: string, step: string, via = 'resume'): Ev => ({ kind: 'run.resumed', payload: { reason, step, via } }),
  expired: (step: string, attempt: number, next: number | null, kind = 'model', lease = `l-${step}-${attempt}`): Ev => ({
    kind: 'lease.expired',
    payload: { lease_id: lease, step, kind, attempt, next_attempt: next },
  }),
  decided: (step: string): Ev => ({ kind: 'action.decided', payload: { step, lease_id: 'x', action_id: 'act_1', decision: 'allow', rule: 'default/allow' } }),
  approvalRequested: (): Ev => ({ kind: 'approval.requested', payload: { approval_id: 'apr_1', step: 'b', action_id: 'act_1', rule: 'r', approver: 'role:finance' } }),
  approvalDecided: (decision: string): Ev => ({ kind: 'approval.decided', payload: { approval_id: 'apr_1', step: 'b', action_id: 'act_1', decision, reason: 'ok' } }),
  runCompleted: (output: unknown): Ev => ({ kind: 'run.completed', payload: { output } }),
  runFailed: (code = 'budget_exhausted', step: string | null = 'a'): Ev => ({ kind: 'run.failed', payload: { error: { code, message: 'over' }, step } }),
  budget: (): Ev => ({ kind: 'budget.exceeded', payload: { step: 'a', usage: { tokens: 2000, usd: 0 }, budget: { tokens: 1000, usd: 1 }, reserved: { tokens: 0, usd: 0 } } }),
  abandon: (compensations: string[], from = 'running'): Ev => ({
    kind: 'run.abandon_requested',
    payload: { reason: 'customer withdrew', from_state: from, compensations, released_lease_id: null, cancelled_approval_ids: [] },
  }),
  compLeased: (step: string, attempt: number): Ev => E.leased(step, attempt, `c-${step}-${attempt}`, 'compensation'),
  compCompleted: (step: string, attempt: number): Ev => ({ kind: 'compensation.completed', payload: { step, attempt, lease_id: `c-${step}-${attempt}`, output: { voided: true }, usage: { tokens: 0, usd: 0 } } }),
  compFailed: (step: string, attempt: number): Ev => ({ kind: 'compensation.failed', payload: { step, attempt, lease_id: `c-${step}-${attempt}`, error: { code: 'nope', message: 'no' } } }),
  compRetry: (steps: string[], from = 'abandoned'): Ev => ({ kind: 'compensation.retry_requested', payload: { reason: 'upstream repaired', steps, from_state: from } }),
  abandoned: (compensated: string[], failed: string[] = []): Ev => ({ kind: 'run.abandoned', payload: { reason: 'customer withdrew', compensated, failed } }),
  note: (): Ev => ({ kind: 'note', payload: { text: 'redacted 1 email' } }),
};

function fold(evs: Ev[]): RunModel {
  return foldEvents([created, ...evs].map((e, i) => ({ seq: i + 1, kind: e.kind, payload: e.payload, at: AT(i) })));
}

function apply(before: Ev[], ev: Ev): RunModel {
  const m = fold(before);
  return reduce(m, { seq: before.length + 2, kind: ev.kind, payload: ev.payload, at: AT(before.length + 1) });
}

const A_DONE = [E.leased('a', 1), E.completed('a', 1)];
const B_DONE = [...A_DONE, E.leased('b', 1), E.completed('b', 1, { id: 'rf-1' })];
const ALL_DONE = [...B_DONE, E.leased('c', 1), E.completed('c', 1)];

interface Row {
  name: string;
  before: Ev[];
  event: Ev;
  expect?: (m: RunModel) => void;
  refuses?: RegExp;
}

const rows: Row[] = [
  // run.created
  {
    name: 'run.created starts running with the first step pending at attempt 1',
    before: [],
    event: E.note(),
    expect: (m) => {
      expect(m.state).toBe('running');
      expect(m.current_step).toBe('a');
      expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 1, ready_at: AT(0) });
      expect(m.steps.b).toMatchObject({ state: 'pending', attempt: 0, ready_at: null });
      expect(workItem(m)).toEqual({ step: 'a', kind: 'model', ready_at: AT(0) });
      // D §6: the run state carries the bundle, parent, budget and pinned policies run.created named.
      expect(m).toMatchObject({ bundle: { name: 'refunds', version: '1.0.0' }, budget: { tokens: 1000, usd: 1 }, parent_run_id: null, policies: [{ name: 'refunds', version: '1' }] });
    },
  },
  {
    name: 'run.created of a derived run keeps its parent run',
    before: [],
    event: E.note(),
    expect: (m) => expect(initialModel({ seq: 1, kind: 'run.created', payload: { ...created.payload, parent_run_id: 'run_0' }, at: AT(0) }).parent_run_id).toBe('run_0'),
  },
  { name: 'run.created is refused after the first event', before: [], event: created, refuses: /first event/ },
  // step.leased
  {
    name: 'step.leased: pending → leased, started_at and first_lease_seq set, no work item',
    before: [],
    event: E.leased('a', 1),
    expect: (m) => {
      expect(m.steps.a).toMatchObject({ state: 'leased', attempt: 1, lease_id: 'l-a-1', started_at: AT(1), first_lease_seq: 2, ready_at: null });
      expect(workItem(m)).toBeNull();
    },
  },
  { name: 'step.leased of a step that is not current is refused', before: [], event: E.leased('b', 1), refuses: /not the current step/ },
  { name: 'step.leased twice is refused', before: [E.leased('a', 1)], event: E.leased('a', 1, 'other'), refuses: /already leased/ },
  { name: 'step.leased of a current step that failed (no retry scheduled) is refused', before: [E.leased('a', 1), E.failed('a', 1)], event: E.leased('a', 2), refuses: /is failed, not ready/ },
  { name: 'step.leased for a compensation of a running run is refused', before: A_DONE, event: E.compLeased('a', 1), refuses: /no compensation waiting/ },
  { name: 'step.leased of a parked run is refused', before: [E.leased('a', 1), E.failed('a', 1, true), E.quarantined('a', 1), E.parked('quarantine', 'a')], event: E.leased('a', 1), refuses: /running/ },
  // step.completed
  {
    name: 'step.completed: output kept, usage added, next step pending at attempt 1',
    before: [E.leased('a', 1)],
    event: E.completed('a', 1, { amount: 5 }),
    expect: (m) => {
      expect(m.steps.a).toMatchObject({ state: 'completed', output: { amount: 5 }, ended_at: AT(2), lease_id: null });
      expect(m.usage).toEqual({ tokens: 10, usd: 0.1 });
      expect(m.current_step).toBe('b');
      expect(m.steps.b).toMatchObject({ state: 'pending', attempt: 1, ready_at: AT(2) });
    },
  },
  {
    name: 'step.completed of the last step leaves no current step',
    before: [...B_DONE, E.leased('c', 1)],
    event: E.completed('c', 1),
    expect: (m) => {
      expect(m.current_step).toBeNull();
      expect(m.state).toBe('running');
      expect(workItem(m)).toBeNull();
    },
  },
  { name: 'step.completed of a compensation (its own event is compensation.completed) is refused', before: [...ALL_DONE, E.abandon(['c']), E.compLeased('c', 1)], event: E.completed('c', 1, {}, undefined, 'c-c-1'), refuses: /not leased by/ },
  { name: 'step.completed with another lease is refused', before: [E.leased('a', 1)], event: E.completed('a', 1, {}, undefined, 'l-other'), refuses: /not leased by/ },
  // run.completed
  { name: 'run.completed after the last step', before: ALL_DONE, event: E.runCompleted({ ok: 'c' }), expect: (m) => expect(m).toMatchObject({ state: 'completed', output: { ok: 'c' } }) },
  { name: 'run.completed with steps left is refused', before: A_DONE, event: E.runCompleted(null), refuses: /steps all completed/ },
  // step.failed and what follows
  {
    name: 'step.failed records the error and usage and ends the lease',
    before: [E.leased('a', 1)],
    event: E.failed('a', 1),
    expect: (m) => {
      expect(m.steps.a).toMatchObject({ state: 'failed', error: { code: 'boom', message: 'it broke' }, lease_id: null });
      expect(m.usage).toEqual({ tokens: 1, usd: 0.01 });
    },
  },
  { name: 'step.failed with another lease is refused', before: [E.leased('a', 1)], event: E.failed('a', 1, false, 'l-other'), refuses: /not leased by l-other/ },
  { name: 'step.failed without a lease of a leased step is refused', before: [E.leased('a', 1)], event: E.failed('a', 1, true, null), refuses: /is leased/ },
  { name: 'step.failed of a step that is not current is refused', before: A_DONE, event: E.failed('a', 1, true, null), refuses: /not the current step/ },
  { name: 'step.failed of a compensation of a step that is not compensating is refused', before: [E.leased('a', 1)], event: E.failed('a', 1, false, 'l-a-1', 'compensation'), refuses: /not compensating/ },
  {
    name: 'step.retry_scheduled: failed → retry_wait with the next attempt, ready at ready_at',
    before: [E.leased('a', 1), E.failed('a', 1)],
    event: E.retry('a', 2),
    expect: (m) => {
      expect(m.steps.a).toMatchObject({ state: 'retry_wait', attempt: 2, ready_at: AT(50) });
      expect(workItem(m)).toEqual({ step: 'a', kind: 'model', ready_at: AT(50) });
    },
  },
  { name: 'a retry_wait step is leased with its new attempt', before: [E.leased('a', 1), E.failed('a', 1), E.retry('a', 2)], event: E.leased('a', 2), expect: (m) => expect(m.steps.a).toMatchObject({ state: 'leased', attempt: 2, started_at: AT(1), first_lease_seq: 2 }) },
  { name: 'step.retry_scheduled of a step that did not fail is refused', before: [E.leased('a', 1)], event: E.retry('a', 2), refuses: /not failed/ },
  { name: 'step.quarantined of a step that has not failed is refused', before: [], event: E.quarantined('a', 1), refuses: /is pending/ },
  { name: 'step.quarantined after a deterministic failure', before: [E.leased('a', 1), E.failed('a', 1, true)], event: E.quarantined('a', 1), expect: (m) => expect(m.steps.a.state).toBe('quarantined') },
  {
    name: 'run.parked quarantine: the run waits, no work item',
    before: [E.leased('a', 1), E.failed('a', 1, true), E.quarantined('a', 1)],
    event: E.parked('quarantine', 'a'),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
      expect(workItem(m)).toBeNull();
    },
  },
  { name: 'run.parked quarantine of a step that is not quarantined is refused', before: [E.leased('a', 1), E.failed('a', 1)], event: E.parked('quarantine', 'a'), refuses: /not quarantined/ },
  {
    name: 'run.parked connector_quarantined: the step is pending again with the same attempt (none spent)',
    before: [E.leased('a', 1), E.failed('a', 1, false, 'l-a-1', 'model', 'connector_quarantined')],
    event: E.parked('connector_quarantined', 'a'),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'parked', parked_reason: 'connector_quarantined' });
      expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 1, ended_at: null });
      expect(workItem(m)).toBeNull(); // a parked run hands out no work, ready step or not
    },
  },
  // Found by test/unit/reducer-properties.test.ts: parking another step left step a's lease live in a parked run.
  { name: 'run.parked naming a step that is not the current one is refused (the current step\'s lease would stay live)', before: [E.leased('a', 1)], event: E.parked('human', 'c'), refuses: /not the current step/ },
  { name: 'run.parked of a parked run is refused', before: [E.leased('a', 1), E.failed('a', 1, true), E.quarantined('a', 1), E.parked('quarantine', 'a')], event: E.parked('quarantine', 'a'), refuses: /parked run cannot be parked/ },
  // Replay folds rows edited in the database (D §7): a step the run does not have is refused, never
  // looked up on Object.prototype (a `__proto__` step once wrote `state` and `lease_id` onto every object).
  ...['__proto__', 'constructor', 'toString'].map((step) => ({ name: `run.parked naming the step "${step}", which the run does not have, is refused`, before: [], event: E.parked('human', step), refuses: /unknown step/ })),
  {
    name: 'step.failed without a lease (a template that does not render) on a pending step',
    before: A_DONE,
    event: E.failed('b', 1, true, null, 'action'),
    expect: (m) => {
      expect(m.steps.b).toMatchObject({ state: 'failed', error: { code: 'boom' } });
      expect(workItem(m)).toBeNull(); // failed is not ready, whatever ready_at it had
    },
  },
  {
    name: 'step.failed without a lease on a step waiting for its retry (the template fails again)',
    before: [E.leased('a', 1), E.failed('a', 1), E.retry('a', 2)],
    event: E.failed('a', 2, true, null),
    expect: (m) => expect(m.steps.a).toMatchObject({ state: 'failed', attempt: 2 }),
  },
  { name: 'step.quarantined of a step still leased is refused', before: [E.leased('a', 1)], event: E.quarantined('a', 1), refuses: /is leased/ },
  { name: 'a compensation lease for a step that is not compensating is refused', before: [...ALL_DONE, E.abandon(['c', 'b'])], event: E.compLeased('a', 1), refuses: /no compensation waiting/ },
  { name: 'a compensation retry for a step that is not compensating is refused', before: [...ALL_DONE, E.abandon(['c'])], event: E.retry('b', 2, 'compensation'), refuses: /not failed/ },
  {
    name: 'lease.expired of a compensation on its last attempt: nothing to lease until the kernel decides',
    before: [...ALL_DONE, E.abandon(['c']), E.compLeased('c', 1)],
    event: E.expired('c', 1, null, 'compensation', 'c-c-1'),
    expect: (m) => {
      expect(m.steps.c).toMatchObject({ state: 'compensating', compensation_attempt: 1, lease_id: null, ready_at: null });
      expect(workItem(m)).toBeNull();
    },
  },
  {
    name: 'run.resumed after a human decision keeps the attempt the step was in (only quarantine starts afresh, D §6)',
    before: [E.leased('a', 1), E.failed('a', 1), E.retry('a', 2), E.leased('a', 2), E.parked('human', 'a', 'apr_1')],
    event: E.resumed('human', 'a', 'approval'),
    expect: (m) => expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 2 }),
  },
  { name: 'run.failed after the last step completed (no current step)', before: ALL_DONE, event: E.runFailed('budget_exhausted', null), expect: (m) => expect(m).toMatchObject({ state: 'failed', current_step: null }) },
  { name: 'compensation.completed without a lease for a step not at the head of the queue is refused', before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)], event: { kind: 'compensation.completed', payload: { ...E.compCompleted('b', 1).payload, lease_id: null } }, refuses: /not leased by/ },
  // lease.expired
  {
    name: 'lease.expired: the step is ready again with attempt + 1',
    before: [E.leased('a', 1)],
    event: E.expired('a', 1, 2),
    expect: (m) => {
      expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 2, lease_id: null, ready_at: AT(2) });
      expect(workItem(m)?.step).toBe('a');
    },
  },
  { name: 'lease.expired on the last attempt leaves the step for quarantine', before: [E.leased('a', 1)], event: E.expired('a', 1, null), expect: (m) => expect(m.steps.a).toMatchObject({ lease_id: null, error: { code: 'lease_expired' } }) },
  { name: 'step.quarantined after the last attempt expired', before: [E.leased('a', 1), E.expired('a', 1, null)], event: E.quarantined('a', 1), expect: (m) => expect(m.steps.a.state).toBe('quarantined') },
  {
    name: 'lease.expired of a compensation: the compensation is ready again with its next attempt',
    before: [...ALL_DONE, E.abandon(['c']), E.compLeased('c', 1)],
    event: E.expired('c', 1, 2, 'compensation', 'c-c-1'),
    expect: (m) => {
      expect(m.steps.c).toMatchObject({ state: 'compensating', compensation_attempt: 2, lease_id: null, ready_at: AT(9) });
      expect(workItem(m)).toEqual({ step: 'c', kind: 'compensation', ready_at: AT(9) });
    },
  },
  { name: 'lease.expired of another lease is refused', before: [E.leased('a', 1)], event: E.expired('a', 1, 2, 'model', 'l-zzz'), refuses: /not the step's lease/ },
  // resume
  {
    name: 'run.resumed from quarantine: running, the step pending with a fresh attempt count',
    before: [E.leased('a', 1), E.failed('a', 1), E.retry('a', 2), E.leased('a', 2), E.failed('a', 2, true), E.quarantined('a', 2), E.parked('quarantine', 'a')],
    event: E.resumed('quarantine', 'a'),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'running', parked_reason: null });
      expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 1, ready_at: AT(8) });
    },
  },
  {
    name: 'run.resumed from connector_quarantined keeps the attempt',
    before: [E.leased('a', 1), E.failed('a', 1, false, 'l-a-1', 'model', 'connector_quarantined'), E.parked('connector_quarantined', 'a')],
    event: E.resumed('connector_quarantined', 'a'),
    expect: (m) => expect(m.steps.a).toMatchObject({ state: 'pending', attempt: 1 }),
  },
  { name: 'run.resumed of a running run is refused', before: [], event: E.resumed('human', 'a'), refuses: /cannot be resumed/ },
  // actions and approvals
  { name: 'action.decided changes nothing but updated_at', before: [E.leased('a', 1)], event: E.decided('a'), expect: (m) => expect(publicState(m)).toEqual({ ...publicState(fold([E.leased('a', 1)])), updated_at: AT(2) }) },
  { name: 'action.decided for an unknown step is refused', before: [E.leased('a', 1)], event: E.decided('zz'), refuses: /unknown step/ },
  {
    name: 'run.parked human: pending approval, lease released, step pending again',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested()],
    event: E.parked('human', 'b', 'apr_1'),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'parked', parked_reason: 'human', pending_approval_id: 'apr_1' });
      expect(m.steps.b).toMatchObject({ state: 'pending', attempt: 1, lease_id: null });
    },
  },
  {
    name: 'approval.decided approved: the action id joins approved_actions, nothing pending',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_1')],
    event: E.approvalDecided('approved'),
    expect: (m) => {
      expect(m.steps.b.approved_actions).toEqual(['act_1']);
      expect(m.pending_approval_id).toBeNull();
      expect(m.state).toBe('parked');
    },
  },
  {
    name: 'approval.decided of another approval leaves the pending one pending',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_2')],
    event: E.approvalDecided('approved'),
    expect: (m) => expect(m.pending_approval_id).toBe('apr_2'),
  },
  {
    name: 'approval.decided rejected: no approved action',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_1')],
    event: E.approvalDecided('rejected'),
    expect: (m) => expect(m.steps.b.approved_actions).toEqual([]),
  },
  {
    name: 'run.resumed after a decision: running, the step leasable again',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_1'), E.approvalDecided('approved')],
    event: E.resumed('human', 'b', 'approval'),
    expect: (m) => {
      expect(m.state).toBe('running');
      expect(workItem(m)).toMatchObject({ step: 'b', kind: 'action' });
    },
  },
  // budget
  { name: 'budget.exceeded changes nothing but updated_at', before: [E.leased('a', 1)], event: E.budget(), expect: (m) => expect(m.state).toBe('running') },
  {
    name: 'run.failed: failed with the error, the leased step failed',
    before: [E.leased('a', 1)],
    event: E.runFailed(),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted', message: 'over' } });
      expect(m.steps.a).toMatchObject({ state: 'failed', lease_id: null });
      expect(workItem(m)).toBeNull();
    },
  },
  {
    name: 'run.failed of a parked run: failed, the pending approval cancelled with it, the unleased step left as it was',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_1')],
    event: { kind: 'run.failed', payload: { error: { code: 'budget_exhausted', message: 'over' }, step: 'b', cancelled_approval_ids: ['apr_1'] } },
    expect: (m) => {
      expect(m).toMatchObject({ state: 'failed', parked_reason: null, pending_approval_id: null });
      expect(m.steps.b).toMatchObject({ state: 'pending', ended_at: null, lease_id: null });
    },
  },
  {
    name: 'run.failed without cancelled approvals (a log written before runs cancelled them) keeps the pending id it stored',
    before: [...A_DONE, E.leased('b', 1), E.decided('b'), E.approvalRequested(), E.parked('human', 'b', 'apr_1')],
    event: E.runFailed('budget_exhausted', 'b'),
    expect: (m) => expect(m.pending_approval_id).toBe('apr_1'),
  },
  { name: 'run.failed of a completed run is refused', before: [...ALL_DONE, E.runCompleted(null)], event: E.runFailed(), refuses: /cannot fail/ },
  // abandon
  {
    name: 'run.abandon_requested: abandoning, the lease revoked, compensations last first',
    before: [...ALL_DONE.slice(0, 4), E.leased('c', 1)],
    event: E.abandon(['b']),
    expect: (m) => {
      expect(m.state).toBe('abandoning');
      expect(m.steps.c).toMatchObject({ state: 'pending', lease_id: null });
      expect(m.steps.b).toMatchObject({ state: 'compensating', compensation_attempt: 1 });
      expect(workItem(m)).toEqual({ step: 'b', kind: 'compensation', ready_at: AT(6) });
    },
  },
  { name: 'compensationsFor lists completed steps with compensate, last first', before: ALL_DONE, event: E.note(), expect: (m) => expect(compensationsFor(m)).toEqual(['c', 'b']) },
  { name: 'compensationsFor leaves out a step that has not completed, compensate or not (D §6)', before: [...A_DONE, E.leased('b', 1)], event: E.note(), expect: (m) => expect(compensationsFor(m)).toEqual([]) },
  { name: 'run.abandon_requested naming a step with nothing to compensate is refused', before: A_DONE, event: E.abandon(['a']), refuses: /nothing to compensate/ },
  { name: 'run.abandon_requested naming a step that has not completed is refused', before: A_DONE, event: E.abandon(['c']), refuses: /nothing to compensate/ },
  { name: 'run.abandon_requested of an abandoning run is refused', before: [...A_DONE, E.abandon([])], event: E.abandon([], 'abandoning'), refuses: /abandoning run cannot be abandoned/ },
  { name: 'run.abandon_requested of a completed run is refused', before: [...ALL_DONE, E.runCompleted(null)], event: E.abandon([]), refuses: /cannot be abandoned/ },
  { name: 'run.abandon_requested from failed is allowed', before: [E.leased('a', 1), E.runFailed()], event: E.abandon([], 'failed'), expect: (m) => expect(m.state).toBe('abandoning') },
  { name: 'run.abandon_requested from parked clears the park', before: [E.leased('a', 1), E.failed('a', 1, true), E.quarantined('a', 1), E.parked('quarantine', 'a')], event: E.abandon([], 'parked'), expect: (m) => expect(m).toMatchObject({ state: 'abandoning', parked_reason: null }) },
  { name: 'a compensation is leased', before: [...ALL_DONE, E.abandon(['c', 'b'])], event: E.compLeased('c', 1), expect: (m) => expect(m.steps.c).toMatchObject({ state: 'compensating', lease_id: 'c-c-1' }) },
  {
    name: 'compensation.completed: compensated, the next compensation waits',
    before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)],
    event: E.compCompleted('c', 1),
    expect: (m) => {
      expect(m.steps.c.state).toBe('compensated');
      expect(m.compensated).toEqual(['c']);
      expect(m.compensations).toEqual(['b']);
      expect(workItem(m)).toMatchObject({ step: 'b', kind: 'compensation' });
    },
  },
  {
    name: 'a failed compensation retries with the next attempt',
    before: [...ALL_DONE, E.abandon(['c']), E.compLeased('c', 1), E.failed('c', 1, false, 'c-c-1', 'compensation')],
    event: E.retry('c', 2, 'compensation'),
    expect: (m) => expect(m.steps.c).toMatchObject({ state: 'compensating', compensation_attempt: 2, ready_at: AT(50) }),
  },
  { name: 'compensation.completed of a step that is not the head of the queue is refused', before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)], event: E.compCompleted('b', 1), refuses: /not leased by/ },
  { name: 'compensation.completed with another lease is refused', before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)], event: { kind: 'compensation.completed', payload: { ...E.compCompleted('c', 1).payload, lease_id: 'c-other' } }, refuses: /not leased by c-other/ },
  { name: 'compensation.failed of a step that is not the head of the queue is refused', before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)], event: E.compFailed('b', 1), refuses: /not being compensated/ },
  { name: 'a compensation retry while the compensation is still leased is refused', before: [...ALL_DONE, E.abandon(['c']), E.compLeased('c', 1)], event: E.retry('c', 2, 'compensation'), refuses: /not failed/ },
  {
    name: 'compensation.failed: the step failed, the queue moves on',
    before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1)],
    event: E.compFailed('c', 1),
    expect: (m) => {
      expect(m.steps.c).toMatchObject({ state: 'failed', error: { code: 'nope' } });
      expect(m.compensation_failures).toEqual(['c']);
      expect(m.current_step).toBe('b');
    },
  },
  { name: 'run.abandoned after the last compensation', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compCompleted('b', 1)], event: E.abandoned(['b']), expect: (m) => expect(m).toMatchObject({ state: 'abandoned', current_step: null, error: null }) },
  { name: 'run.abandoned with failed compensations carries compensation_failed', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compFailed('b', 1)], event: E.abandoned([], ['b']), expect: (m) => expect(m.error).toEqual({ code: 'compensation_failed', message: 'compensation failed for step(s) b' }) },
  // compensation.retry_requested (docs/design.md "Retrying compensations"; svc-events(7))
  {
    name: 'compensation.retry_requested: an abandoned run is abandoning again, the given-up compensation waits from attempt 1',
    before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 2), E.compFailed('b', 2), E.abandoned([], ['b'])],
    event: E.compRetry(['b']),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'abandoning', current_step: 'b', error: null, compensations: ['b'], compensation_failures: [] });
      expect(m.steps.b).toMatchObject({ state: 'compensating', compensation_attempt: 1, ready_at: m.updated_at }); // ready at once
      expect(workItem(m)).toMatchObject({ step: 'b', kind: 'compensation' });
    },
  },
  {
    name: 'compensation.retry_requested while others run: the step joins the end of the queue',
    before: [...ALL_DONE, E.abandon(['c', 'b']), E.compLeased('c', 1), E.compFailed('c', 1)],
    event: E.compRetry(['c'], 'abandoning'),
    expect: (m) => {
      expect(m).toMatchObject({ state: 'abandoning', current_step: 'b', compensations: ['b', 'c'], compensation_failures: [] });
      expect(m.steps.c.state).toBe('failed');
    },
  },
  {
    name: 'the retried compensation completes and a second run.abandoned closes the round clean',
    before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compFailed('b', 1), E.abandoned([], ['b']), E.compRetry(['b']), E.compLeased('b', 1), E.compCompleted('b', 1)],
    event: E.abandoned(['b']),
    expect: (m) => expect(m).toMatchObject({ state: 'abandoned', error: null, compensated: ['b'], compensation_failures: [] }),
  },
  { name: 'compensation.retry_requested naming a step whose compensation did not fail is refused', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compCompleted('b', 1), E.abandoned(['b'])], event: E.compRetry(['b']), refuses: /has not failed for good/ },
  { name: 'compensation.retry_requested of a run not abandoned is refused', before: B_DONE, event: E.compRetry(['b'], 'running'), refuses: /has no compensation to retry/ },
  { name: 'compensation.retry_requested with a from_state other than the run\'s is refused', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compFailed('b', 1), E.abandoned([], ['b'])], event: E.compRetry(['b'], 'abandoning'), refuses: /not abandoning/ },
  { name: 'compensation.retry_requested naming no step is refused', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compFailed('b', 1), E.abandoned([], ['b'])], event: E.compRetry([]), refuses: /no step/ },
  { name: 'compensation.retry_requested naming a step twice is refused', before: [...B_DONE, E.abandon(['b']), E.compLeased('b', 1), E.compFailed('b', 1), E.abandoned([], ['b'])], event: E.compRetry(['b', 'b']), refuses: /twice/ },
  { name: 'run.abandoned of a run that was never abandoning is refused', before: ALL_DONE, event: E.abandoned([]), refuses: /still running/ },
  { name: 'run.abandoned while compensations run is refused', before: [...B_DONE, E.abandon(['b'])], event: E.abandoned([]), refuses: /still running/ },
  { name: 'run.abandoned at once when nothing needs compensating', before: [...A_DONE, E.abandon([])], event: E.abandoned([]), expect: (m) => expect(m.state).toBe('abandoned') },
  // external kinds and unknowns
  ...['note', 'tool.called', 'tool.refused', 'model.called'].map((kind) => ({
    name: `${kind} only moves updated_at`,
    before: [E.leased('a', 1)],
    event: { kind, payload: {} },
    expect: (m: RunModel) => expect(publicState(m)).toEqual({ ...publicState(fold([E.leased('a', 1)])), updated_at: AT(2) }),
  })),
  { name: 'an unknown kind is refused', before: [], event: { kind: 'run.teleported', payload: {} }, refuses: /unknown event kind/ },
];

describe('reducer transitions (D §6, §7; I 3)', () => {
  it.each(rows.map((r) => [r.name, r] as const))('%s', (_name, row) => {
    if (row.refuses) {
      expect(() => apply(row.before, row.event)).toThrow(TransitionError);
      expect(() => apply(row.before, row.event)).toThrow(row.refuses);
    } else {
      row.expect!(apply(row.before, row.event));
    }
  });

  it('never mutates the state it is given', () => {
    const m = fold([E.leased('a', 1)]);
    const copy = structuredClone(m);
    reduce(m, { seq: 3, kind: 'step.completed', payload: E.completed('a', 1).payload, at: AT(3) });
    expect(m).toEqual(copy);
  });

  it('a log must start with run.created at seq 1', () => {
    expect(() => initialModel({ seq: 1, kind: 'note', payload: {}, at: AT(0) })).toThrow(/starts with run.created/);
    expect(() => initialModel({ seq: 2, kind: 'run.created', payload: created.payload, at: AT(0) })).toThrow(/seq 1/);
    expect(() => foldEvents([])).toThrow(/empty/);
  });

  it('refuses a run.created whose step ids are not each a step of its own (a row edited by hand)', () => {
    const steps = created.payload.steps as Array<Record<string, unknown>>;
    for (const bad of [[{ ...steps[0], id: '__proto__' }, ...steps.slice(1)], [steps[0], steps[0]], [{ ...steps[0], id: 7 }]]) {
      expect(() => initialModel({ seq: 1, kind: 'run.created', payload: { ...created.payload, steps: bad }, at: AT(0) })).toThrow(/not a step id of its own/);
    }
    expect(Object.getPrototypeOf(initialModel({ seq: 1, kind: 'run.created', payload: created.payload, at: AT(0) }).steps)).toBe(Object.prototype);
  });

  it('publicState is exactly the D §6 members (head fields are added from the store)', () => {
    const s = publicState(fold(A_DONE));
    expect(Object.keys(s).sort()).toEqual(
      ['budget', 'bundle', 'bundle_id', 'created_at', 'current_step', 'department', 'error', 'input', 'output', 'parent_run_id', 'parked_reason', 'pending_approval_id', 'policies', 'remit_id', 'requested_by', 'run_id', 'state', 'steps', 'updated_at', 'usage', 'workflow'].sort(),
    );
    expect(Object.keys(s.steps.a!).sort()).toEqual(['attempt', 'ended_at', 'error', 'output', 'started_at', 'state']);
  });
});

describe('RunWriter folds its events in place on its own copy (bench/README.md item 17)', () => {
  it('keeps `before` as the state it started from, and ends where the pure fold ends', async () => {
    const { RunWriter } = await import('../../src/kernel/run-store.js');
    const { globalRedactor } = await import('../../src/log/logger.js');
    const start = fold([E.leased('a', 1)]);
    const row = { run_id: 'run_1', model: JSON.stringify(start), last_seq: 2, head_hash: 'h2', state: start.state, work_kind: null, work_step: null, work_ready_at: null };
    const writes: unknown[] = [];
    const tx = { run: async (_sql: string, params: unknown[]) => void writes.push(params) };
    let t = 0;
    const deps = { clock: { now: () => Date.parse(AT(10 + t++)) }, keys: { keyId: 'k', sign: () => new Uint8Array(64) }, redactor: globalRedactor };
    const w = new RunWriter(tx as never, row as never, deps as never);
    const held = w.model; // before the first append: the starting state itself
    expect(held).toBe(w.before);
    await w.append({ kind: 'step.completed', payload: E.completed('a', 1).payload as never, actor: 'w' }, { kind: 'note', payload: { text: 'n' }, actor: 'w' });
    await w.append({ kind: 'step.leased', payload: E.leased('b', 1).payload as never, actor: 'w' });
    expect(w.before).toEqual(start); // never changed, nor what was held of it
    expect(held).toEqual(start);
    expect(w.model).not.toBe(w.before);
    let pure = start;
    for (const ev of w.appended) pure = reduce(pure, ev);
    expect(w.model).toEqual(pure);
    expect(pure.current_step).toBe('b');
    expect(writes).toHaveLength(3);
  });

  it('starts from the model its caller read when the row still holds that text, and never changes it', async () => {
    const { RunWriter } = await import('../../src/kernel/run-store.js');
    const { globalRedactor } = await import('../../src/log/logger.js');
    const start = fold([E.leased('a', 1)]);
    const text = JSON.stringify(start);
    const row = { run_id: 'run_1', model: text, last_seq: 2, head_hash: 'h2', state: start.state, work_kind: null, work_step: null, work_ready_at: null };
    const tx = { run: async () => undefined };
    const deps = { clock: { now: () => Date.parse(AT(10)) }, keys: { keyId: 'k', sign: () => new Uint8Array(64) }, redactor: globalRedactor };
    const read = { text, model: JSON.parse(text) };
    const w = new RunWriter(tx as never, row as never, deps as never, read);
    expect(w.before).toBe(read.model); // no second parse
    await w.append({ kind: 'step.completed', payload: E.completed('a', 1).payload as never, actor: 'w' });
    expect(read.model).toEqual(start); // the caller's copy is untouched by the append
    // A row that moved on since the read: the writer parses the row, not the stale read.
    const moved = fold([E.leased('a', 1), E.completed('a', 1)]);
    const stale = new RunWriter(tx as never, { ...row, model: JSON.stringify(moved) } as never, deps as never, read);
    expect(stale.before).not.toBe(read.model);
    expect(stale.before).toEqual(moved);
  });
});
