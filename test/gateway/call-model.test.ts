/**
 * The gateway's call rules against a model (interface 4.2 call rules 1–2, decisions §9
 * idempotency and circuit): fast-check draws sequences of `test.*` calls, with or without an
 * idempotency key, with the same or other arguments, and steps of the clock; a small model
 * of the idempotency store and the breaker says what each answer must be, and the real
 * gateway over HTTP must answer exactly that:
 * - a key seen with a success answers its stored result with `replayed: true`, before the
 *   circuit is looked at; other arguments under it are 409 `idempotency_conflict`;
 * - upstream errors keep nothing, so a retry under the same key runs;
 * - 5 consecutive upstream errors open the circuit (the fifth already says `circuit: "open"`);
 *   while it is open, calls are 502 with `circuit: "open"` and nothing runs; after the wait,
 *   one trial runs: success closes it, failure re-opens it with a doubled wait (10 s, 20 s,
 *   40 s … with the jitter pinned to its middle);
 * - `svc_gateway_circuit_open{connector="test"}` says whether it is open.
 * Failures shrink to the shortest sequence that breaks a rule.
 *
 * SVC_FUZZ_RUNS raises the number of sequences (default 25).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { metricValue, startGateway } from './helpers.js';

const SEQUENCES = Number(process.env.SVC_FUZZ_RUNS ?? 25);

type Tool = 'echo' | 'write' | 'fail' | 'flaky';
type Call = { op: 'call'; tool: Tool; key: string | null; variant: number };
type ClockStep = { op: 'tick'; ms: number } | { op: 'wait'; edge: 'before' | 'after' };
type Op = Call | ClockStep | { op: 'burst' } | { op: 'trialFail' };

const ops: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      op: fc.constant('call' as const),
      tool: fc.constantFrom<Tool>('echo', 'write', 'fail', 'fail', 'flaky'),
      key: fc.constantFrom(null, 'k1', 'k2', 'k3'),
      variant: fc.nat({ max: 1 }),
    }),
    weight: 6,
  },
  { arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.constantFrom(4_000, 11_000, 25_000) }), weight: 1 },
  // To the edge of the open period the model expects: 1 ms before its end, or at its end.
  { arbitrary: fc.record({ op: fc.constant('wait' as const), edge: fc.constantFrom('before' as const, 'after' as const) }), weight: 2 },
  // Five upstream errors in a row: enough to open a closed circuit.
  { arbitrary: fc.constant({ op: 'burst' as const }), weight: 1 },
  // The end of the open period and a failing trial: the next wait doubles, up to the 5 min cap.
  { arbitrary: fc.constant({ op: 'trialFail' as const }), weight: 1 },
);

const FAIL: Call = { op: 'call', tool: 'fail', key: null, variant: 0 };

/** Bursts and failing trials as the calls and clock steps they stand for. */
function expand(o: Op): Array<Call | ClockStep> {
  if (o.op === 'burst') return [FAIL, FAIL, FAIL, FAIL, FAIL];
  if (o.op === 'trialFail') return [{ op: 'wait', edge: 'after' }, FAIL];
  return [o];
}

function argsOf(tool: Tool, variant: number): Record<string, unknown> {
  return tool === 'flaky' ? { key: `f${variant}`, fail_times: 2 } : { v: variant };
}

/** The expected answer: status, and for 200 the result and whether it was replayed; for 502 whether it says the circuit is open. */
type Expected = { status: 200; result: unknown; replayed: boolean } | { status: 409; code: 'idempotency_conflict' } | { status: 502; circuit: boolean };

/** The rules of decisions §9 for one connector, in memory. */
class Model {
  private stored = new Map<string, { args: string; result: unknown }>();
  private flakySeen = new Map<string, number>();
  private failures = 0;
  private openings = 0;
  open = false;
  openUntil = 0;

  constructor(private readonly clock: ManualClock) {}

  call(tool: Tool, key: string | null, args: Record<string, unknown>): Expected {
    const id = `test.${tool}\u0000${key}`;
    const stored = key === null ? undefined : this.stored.get(id);
    if (stored) return stored.args === canonicalJson(args) ? { status: 200, result: stored.result, replayed: true } : { status: 409, code: 'idempotency_conflict' };
    let trial = false;
    if (this.open) {
      if (this.clock.now() < this.openUntil) return { status: 502, circuit: true };
      trial = true; // half-open: this call is the one trial
    }
    if (!this.upstreamAnswers(tool, args)) {
      if (trial) this.reopen();
      else if (++this.failures >= 5) this.reopen();
      return { status: 502, circuit: this.open };
    }
    this.failures = 0;
    this.openings = 0;
    this.open = false;
    const result = tool === 'echo' ? { echo: args } : tool === 'write' ? { written: args } : { ok: true };
    if (key !== null) this.stored.set(id, { args: canonicalJson(args), result });
    return { status: 200, result, replayed: false };
  }

  private upstreamAnswers(tool: Tool, args: Record<string, unknown>): boolean {
    if (tool === 'fail') return false;
    if (tool !== 'flaky') return true;
    const seen = this.flakySeen.get(args.key as string) ?? 0;
    this.flakySeen.set(args.key as string, seen + 1);
    return seen >= (args.fail_times as number);
  }

  private reopen(): void {
    this.openings++;
    this.openUntil = this.clock.now() + Math.min(10_000 * 2 ** (this.openings - 1), 300_000);
    this.failures = 0;
    this.open = true;
  }
}

async function runSequence(sequence: Op[]): Promise<void> {
  const signer = testSigner();
  const clock = new ManualClock(Date.now());
  await using gw = await startGateway({ keys: signer, clock, env: { SVC_GATEWAY_TEST_TOOLS: '1' }, random: () => 0.5 });
  // Valid for a day: waits of up to 5 min each never outlive it.
  const nowS = Math.floor(clock.now() / 1000);
  const token = mintToken(signer, remitPayload(signer, { exp: nowS + 86_400 }, nowS));
  const model = new Model(clock);
  const calls = sequence.flatMap(expand);
  for (const [i, o] of calls.entries()) {
    if (o.op === 'tick') {
      clock.advance(o.ms);
      continue;
    }
    if (o.op === 'wait') {
      // Never backwards: a clock that went past the edge already stays where it is.
      if (model.open) clock.set(Math.max(clock.now(), model.openUntil - (o.edge === 'before' ? 1 : 0)));
      continue;
    }
    const args = argsOf(o.tool, o.variant);
    const want = model.call(o.tool, o.key, args);
    const res = await gw.call({ remit_token: token, run_id: 'run_MODEL', step: 's', lease_id: 'lse_m', tool: `test.${o.tool}`, args, idempotency_key: o.key, scope: null });
    const say = `#${i} test.${o.tool} key ${o.key} ${JSON.stringify(args)}: ${res.status} ${JSON.stringify(res.body)}`;
    expect(res.status, say).toBe(want.status);
    if (want.status === 200) {
      expect(res.body, say).toMatchObject({ ok: true, replayed: want.replayed });
      expect(res.body.result, say).toEqual(want.result);
    }
    else if (want.status === 409) expect(res.body.error.code, say).toBe(want.code);
    else {
      expect(res.body.error.code, say).toBe('upstream_error');
      expect(res.body.error.circuit, say).toBe(want.circuit ? 'open' : undefined);
    }
    expect(metricValue(await gw.metrics(), 'svc_gateway_circuit_open', { connector: 'test' }), `${say}: svc_gateway_circuit_open`).toBe(model.open ? 1 : 0);
  }
}

describe('the gateway answers as the model of its call rules says (I 4.2, D §9)', () => {
  it('idempotent replays and conflicts, upstream errors that keep nothing, the circuit opening, its trial and doubled waits', async () => {
    // Drawn sequences rarely fail six trials in a row: one example always walks the waits up to the cap.
    const toTheCap: Op[] = [{ op: 'burst' }, ...Array.from({ length: 7 }, (): Op => ({ op: 'trialFail' })), { op: 'wait', edge: 'before' }, { op: 'call', tool: 'echo', key: null, variant: 0 }, { op: 'wait', edge: 'after' }, { op: 'call', tool: 'echo', key: null, variant: 0 }];
    await fc.assert(fc.asyncProperty(fc.array(ops, { minLength: 5, maxLength: 40, size: 'max' }), runSequence), { numRuns: SEQUENCES, examples: [[toTheCap]] });
  }, 300_000);
});
