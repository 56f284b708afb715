/**
 * The run reducer (D §6, §7, §8; I 3) under random event sequences. Each sequence is drawn from
 * a small vocabulary so most events fit the state they meet; the ones the reducer refuses
 * (TransitionError) are left out of the log, as the kernel never writes them. Then:
 * replaying the log (foldEvents, in pages or whole) gives the state the live path built;
 * `reduce` never changes the state it is given; the run state moves only along the state
 * machine; a run's usage is the sum of the usage its events carry (D §8).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Fold, foldEvents, initialModel, reduce, TransitionError, workItem, type ReducibleEvent, type RunModel } from '../../src/kernel/reducer.js';
import type { RunState } from '../../src/types.js';
import { runCreatedPayload, TEST_STEPS } from '../helpers/run-fixtures.js';

const AT = (n: number) => new Date(Date.UTC(2026, 10, 22, 10, 0, 0) + n * 1000).toISOString();
const STEPS: string[] = [...TEST_STEPS];

const created = (compensate: boolean[]): ReducibleEvent => ({
  seq: 1,
  kind: 'run.created',
  at: AT(0),
  payload: runCreatedPayload(compensate),
});

const step = fc.constantFrom(...STEPS);
const lease = fc.constantFrom('l1', 'l2');
const attempt = fc.integer({ min: 1, max: 3 });
const leaseKind = fc.constantFrom('step', 'compensation');
/** Usage in whole nano-dollars, as the worker reports it (src/spend.ts usdNanos). */
const usage = fc.record({ tokens: fc.nat(1000), usd: fc.nat(2_000_000).map((n) => n / 1e9) });
const error = fc.record({ code: fc.constantFrom('boom', 'connector_quarantined'), message: fc.constant('it broke') });

/** Payloads by kind, with fields drawn so that they often fit the run they meet. */
const event: fc.Arbitrary<{ kind: string; payload: Record<string, unknown> }> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('step.leased'), payload: fc.record({ step, kind: leaseKind, attempt, lease_id: lease, worker_id: fc.constant('w'), expires_at: fc.constant(AT(60)) }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('step.completed'), payload: fc.record({ step, attempt, lease_id: lease, output: fc.jsonValue({ maxDepth: 1 }), usage }) }) },
  fc.record({ kind: fc.constant('step.failed'), payload: fc.record({ step, kind: leaseKind, attempt, lease_id: fc.option(lease), error, deterministic: fc.boolean(), usage }) }),
  fc.record({ kind: fc.constant('step.retry_scheduled'), payload: fc.record({ step, kind: leaseKind, attempt, delay_ms: fc.constant(1000), ready_at: fc.constant(AT(30)) }) }),
  fc.record({ kind: fc.constant('step.quarantined'), payload: fc.record({ step, attempt, reason: fc.constantFrom('deterministic', 'max_attempts') }) }),
  fc.record({ kind: fc.constant('lease.expired'), payload: fc.record({ lease_id: lease, step, kind: leaseKind, attempt, next_attempt: fc.option(attempt) }) }),
  fc.record({ kind: fc.constant('action.decided'), payload: fc.record({ step, lease_id: lease, action_id: fc.constantFrom('act_1', 'act_2'), decision: fc.constantFrom('allow', 'deny', 'approval_required'), rule: fc.constant('r') }) }),
  fc.record({ kind: fc.constant('approval.requested'), payload: fc.record({ approval_id: fc.constant('apr_1'), step, action_id: fc.constant('act_1'), rule: fc.constant('r'), approver: fc.constant('role:finance') }) }),
  fc.record({ kind: fc.constant('approval.decided'), payload: fc.record({ approval_id: fc.constantFrom('apr_1', 'apr_2'), step, action_id: fc.constantFrom('act_1', 'act_2'), decision: fc.constantFrom('approved', 'rejected'), reason: fc.constant(null) }) }),
  fc.record({ kind: fc.constant('run.parked'), payload: fc.record({ reason: fc.constantFrom('human', 'quarantine', 'connector_quarantined'), step, approval_id: fc.option(fc.constant('apr_1')), lease_id: fc.option(lease) }) }),
  fc.record({ kind: fc.constant('run.resumed'), payload: fc.record({ reason: fc.constantFrom('human', 'quarantine'), step: fc.option(step), via: fc.constantFrom('resume', 'approval'), approval_id: fc.constant(null) }) }),
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('run.completed'), payload: fc.record({ output: fc.jsonValue({ maxDepth: 1 }) }) }) },
  fc.record({ kind: fc.constant('run.failed'), payload: fc.record({ error, step: fc.option(step) }) }),
  fc.record({ kind: fc.constant('budget.exceeded'), payload: fc.record({ step: fc.option(step), usage, budget: usage, reserved: usage }) }),
  fc.record({
    kind: fc.constant('run.abandon_requested'),
    payload: fc.record({ reason: fc.constant('stop'), from_state: fc.constant('running'), compensations: fc.subarray([...STEPS].reverse()), released_lease_id: fc.constant(null), cancelled_approval_ids: fc.constant([]), unreported_usage: usage }),
  }),
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('compensation.completed'), payload: fc.record({ step, attempt, lease_id: lease, usage }) }) },
  fc.record({ kind: fc.constant('compensation.failed'), payload: fc.record({ step, attempt, lease_id: lease, error }) }),
  fc.record({ kind: fc.constant('run.abandoned'), payload: fc.record({ failed: fc.subarray(STEPS) }) }),
  fc.record({ kind: fc.constantFrom('note', 'tool.called', 'model.called', 'tool.refused'), payload: fc.constant({ text: 'x' }) }),
);

/** I 3 and D §6: the run state changes only along these edges. */
const EDGES = new Set(['running>parked', 'running>completed', 'running>failed', 'running>abandoning', 'parked>running', 'parked>failed', 'parked>abandoning', 'failed>abandoning', 'abandoning>abandoned']);

/** Which events carry usage into the run, and where (D §8). */
function carried(ev: ReducibleEvent): { tokens: number; usd: number } {
  const p = ev.payload as { usage?: { tokens: number; usd: number }; unreported_usage?: { tokens: number; usd: number } };
  if (ev.kind === 'step.completed' || ev.kind === 'step.failed' || ev.kind === 'compensation.completed') return p.usage!;
  if (ev.kind === 'run.abandon_requested') return p.unreported_usage ?? { tokens: 0, usd: 0 };
  return { tokens: 0, usd: 0 };
}

/**
 * The payload with its step, lease, attempt and lease kind taken from the run as it is, so that
 * random sequences reach deep states (completed, abandoned) rather than being refused early.
 */
function guide(m: RunModel, p: Record<string, unknown>): Record<string, unknown> {
  const id = m.state === 'abandoning' ? (m.compensations[0] ?? m.current_step) : m.current_step;
  const s = id ? m.steps[id] : undefined;
  if (!s) return p;
  const out: Record<string, unknown> = { ...p, step: s.id };
  const kind = m.state === 'abandoning' ? 'compensation' : 'step';
  const attempt = kind === 'compensation' ? s.compensation_attempt : s.attempt;
  if ('kind' in p) out.kind = kind;
  if ('lease_id' in p && s.lease_id !== null) out.lease_id = s.lease_id;
  if ('attempt' in p) out.attempt = p.kind === 'step' || p.kind === 'compensation' || !('next_attempt' in p) ? attempt + (s.lease_id === null && !('lease_id' in p) ? 1 : 0) : attempt;
  if ('next_attempt' in p && p.next_attempt !== null) out.next_attempt = attempt + 1;
  return out;
}

interface Lived {
  log: ReducibleEvent[];
  states: RunModel[];
}

/** The live path: each event reduced onto the last state, refused ones left out of the log. */
function live(compensate: boolean[], candidates: Array<{ kind: string; payload: Record<string, unknown>; guided: boolean }>): Lived {
  const first = created(compensate);
  const log = [first];
  let m = initialModel(first);
  const states = [m];
  for (const c of candidates) {
    const ev: ReducibleEvent = { seq: log.length + 1, kind: c.kind, payload: c.guided ? guide(m, c.payload) : c.payload, at: AT(log.length) };
    const before = JSON.stringify(m);
    try {
      m = reduce(m, ev);
    } catch (err) {
      expect(err).toBeInstanceOf(TransitionError);
      // A refused event leaves the state as it was: reduce never changes its argument.
      expect(JSON.stringify(states[states.length - 1])).toBe(before);
      continue;
    }
    expect(JSON.stringify(states[states.length - 1])).toBe(before);
    log.push(ev);
    states.push(m);
  }
  return { log, states };
}

const guidedEvent = fc.tuple(event, fc.nat(9)).map(([e, n]) => ({ ...e, guided: n < 8 }));
const program = fc.tuple(fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }), fc.array(guidedEvent, { maxLength: 60, size: 'max' }));

describe('the run reducer under random event sequences (D §6, §7; I 3)', () => {
  it('replay folds the log to the state the live path built, whole or a page at a time (D §7)', () => {
    fc.assert(
      fc.property(program, fc.array(fc.nat(40), { maxLength: 4 }), ([compensate, candidates], breaks) => {
        const { log, states } = live(compensate, candidates);
        const last = states[states.length - 1]!;
        expect(foldEvents(log)).toEqual(last);
        const f = new Fold();
        let at = 0;
        for (const cut of [...[...new Set(breaks.map((b) => b % (log.length + 1)))].sort((a, b) => a - b), log.length]) {
          f.push(log.slice(at, cut));
          at = cut;
        }
        expect(f.result()).toEqual(last);
      }),
      { numRuns: 250 },
    );
  });

  it('the run state moves only along the state machine, and nothing moves a completed or abandoned run (I 3, D §6)', () => {
    fc.assert(
      fc.property(program, ([compensate, candidates]) => {
        const { states } = live(compensate, candidates);
        for (let i = 1; i < states.length; i++) {
          const from: RunState = states[i - 1]!.state;
          const to: RunState = states[i]!.state;
          if (from !== to) expect(EDGES.has(`${from}>${to}`), `${from} → ${to}`).toBe(true);
          if (from === 'completed' || from === 'abandoned') expect(to).toBe(from);
        }
      }),
      { numRuns: 250 },
    );
  });

  it('a run\'s usage is exactly the sum of the usage its events carry, to the nano-dollar (D §8)', () => {
    fc.assert(
      fc.property(program, ([compensate, candidates]) => {
        const { log, states } = live(compensate, candidates);
        const last = states[states.length - 1]!;
        let tokens = 0;
        let nanos = 0;
        for (const ev of log) {
          const u = carried(ev);
          tokens += u.tokens;
          nanos += Math.round(u.usd * 1e9);
        }
        expect(last.usage.tokens).toBe(tokens);
        expect(Math.round(last.usage.usd * 1e9)).toBe(nanos);
      }),
      { numRuns: 250 },
    );
  });

  it('at most one step holds a lease, only the current step of a running or abandoning run; an ended run has nothing left to lease (D §6)', () => {
    fc.assert(
      fc.property(program, ([compensate, candidates]) => {
        const { states } = live(compensate, candidates);
        for (const m of states) {
          const leased = Object.values(m.steps).filter((s) => s.lease_id !== null);
          expect(leased.length).toBeLessThanOrEqual(1);
          for (const s of leased) {
            expect(['running', 'abandoning']).toContain(m.state);
            expect(m.current_step).toBe(s.id);
          }
          // Nothing is left to lease from a run that is not running or abandoning; an ended
          // run has no current step, and a completed one completed every step.
          if (m.state !== 'running' && m.state !== 'abandoning') expect(workItem(m)).toBeNull();
          if (m.state === 'completed') expect(Object.values(m.steps).map((s) => s.state)).toEqual(STEPS.map(() => 'completed'));
          if (m.state === 'completed' || m.state === 'abandoned') expect([m.current_step, m.compensations]).toEqual([null, []]);
        }
      }),
      { numRuns: 250 },
    );
  });
});
