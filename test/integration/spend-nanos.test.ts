// Decisions §8 (usage from complete and fail is added to the run), interface 4.1 metrics
// (svc_usage_usd_total), svcd(8) ("sums dollars to the nano-dollar, as a run's usage does"):
// the counter adds what the runs' usage grew by, so it sums exactly what their usage sums, and
// abandon charges recorded calls to the nano-dollar.
import { describe, expect, it } from 'vitest';
import type { Bundle } from '../../src/types.js';
import { allEvents, getRun, lease, mintRemit, pushBundle, refundsBundle, startRun, startRunDaemon } from './run-fixtures.js';

/** A workflow of `n` tool steps. */
const steps = (n: number): Bundle =>
  refundsBundle({
    version: `2.0.${n}`,
    mock: {},
    workflows: { multi: { input_schema: { type: 'object' }, steps: Array.from({ length: n }, (_, i) => ({ id: `s${i}`, kind: 'tool', tool: 'billing.lookup', args: {} })) } },
  } as Partial<Bundle>);

const metricUsd = async (d: { kernel_: (p: string) => Promise<{ body: any }> }) => {
  const line = ((await d.kernel_('/metrics')).body as string).split('\n').find((l) => l.startsWith('svc_usage_usd_total{department="support"}'));
  return Number(line!.split(' ')[1]);
};

describe('usage and svc_usage_usd_total agree to the nano-dollar (D §8)', () => {
  it('the run, its replay and svc_usage_usd_total agree when charges end in half a nano-dollar', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d, steps(6));
    const remit = await mintRemit(d, { spend: { tokens: 100, usd: 1 } });
    const run = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'multi', input: {}, remit_id: remit.remit_id } });
    // 871, 791, 491 and 451 tokens at $0.0375 per million (0.0000326625 …): each ends in half
    // a nano-dollar; the counter added each as sent and showed 0.000097651 beside 0.000097652.
    for (const usd of [0.0000326625, 0.0000296625, 0.0000184125, 0.000016912499999999998, 0.00001845, 0.000002]) {
      const l = await lease(d, ['tool']);
      expect((await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: {}, usage: { tokens: 1, usd } } })).status).toBe(200);
    }
    const state = await getRun(d, run.body.run_id);
    expect(state.state).toBe('completed');
    // The run sums in floats rounded to the nano-dollar (src/spend.ts): 0.000097652 + 0.00001845
    // + 0.000002; the counter shows the same.
    expect(state.usage).toEqual({ tokens: 6, usd: 0.000118102 });
    expect(await metricUsd(d)).toBe(0.000118102);
    const replay = await d.kernel_(`/runs/${run.body.run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true, state: { usage: { tokens: 6, usd: 0.000118102 } } });
  });

  it('abandon charges a recorded call finer than a micro-dollar as it is, not rounded to micro-dollars (D §8)', async () => {
    await using d = await startRunDaemon();
    const { run_id, token } = await startRun(d, await pushBundle(d));
    for (const [call_index, usd] of [[0, 0.00001845], [1, 3e-7]] as const) {
      const posted = await d.kernel_(`/runs/${run_id}/events`, {
        headers: { 'x-svc-remit': token },
        body: { kind: 'model.called', payload: { step: 'triage', source: 'worker', call_index, segment: 0, usage: { tokens: 1, usd } }, actor: { worker_id: 'w-1' } },
      });
      expect(posted.status).toBe(201);
    }
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'stop', actor: { id: 'ops-1', role: 'ops' } } })).status).toBe(202);
    const requested = (await allEvents(d, run_id)).find((e) => e.kind === 'run.abandon_requested');
    expect(requested.payload.unreported_usage).toEqual({ tokens: 2, usd: 0.00001875 });
    expect((await getRun(d, run_id)).usage).toEqual({ tokens: 2, usd: 0.00001875 });
    expect(await metricUsd(d)).toBe(0.00001875);
  });
});
