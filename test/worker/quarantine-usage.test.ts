// Decisions §8 (usage from complete and fail is added to the run), docs/design.md "Resuming
// after a park" and "Resuming after a quarantine": a lease that expired on the step's last
// attempt reported nothing of the model calls it made; after the operator's resume the step is
// asked afresh, and the lease that completes it reports those calls' usage too, as abandon
// would have charged them (src/kernel/unreported-usage.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { MockProvider } from '../../src/worker/providers/mock.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeGateway, FakeKernel, makeLease, until } from './fakes.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setup() {
  const kernel = await new FakeKernel().start();
  const gateway = await new FakeGateway().start();
  const worker = new Worker({ kernelUrl: kernel.url, gatewayUrl: gateway.url, provider: new MockProvider(), waitSeconds: 1, workerId: 'w-test' });
  let ended = 0;
  worker.on('step:done', () => ended++);
  worker.on('step:error', () => ended++);
  cleanups.push(async () => {
    await worker.stop({ graceMs: 0 });
    await kernel.close();
    await gateway.close();
  });
  worker.start();
  return { kernel, ended: () => ended };
}

const answer = (step: string, call_index: number, usage: { tokens: number; usd: number }) => ({
  step,
  call_index,
  segment: 0,
  source: 'worker',
  usage,
  response: { content: null, calls: [{ id: `c${call_index}`, tool: 'billing.lookup_invoice', args: {} }], usage },
});

describe('usage of a segment a quarantine ended (D §8)', () => {
  for (const reported of [false, true]) {
    it(reported ? 'is not reported twice when a failure already reported it' : 'is reported by the lease that completes the resumed step', async () => {
      const { kernel, ended } = await setup();
      const runId = reported ? 'run_Q2' : 'run_Q1';
      kernel.append(runId, 'step.leased', { step: 'triage', attempt: 3, lease_id: 'lease_old' });
      kernel.append(runId, 'model.called', answer('triage', 0, { tokens: 100, usd: 0.02 }));
      kernel.append(runId, 'model.called', answer('triage', 1, { tokens: 50, usd: 0.01 }));
      if (reported) kernel.append(runId, 'step.failed', { step: 'triage', kind: 'model', attempt: 3, lease_id: 'lease_old', deterministic: true, usage: { tokens: 150, usd: 0.03 } });
      else kernel.append(runId, 'lease.expired', { step: 'triage', kind: 'model', attempt: 3, lease_id: 'lease_old', next_attempt: null, reason: 'ttl' });
      kernel.append(runId, 'step.quarantined', { step: 'triage', attempt: 3, reason: reported ? 'deterministic' : 'max_attempts' });
      kernel.append(runId, 'run.parked', { reason: 'quarantine', step: 'triage' });
      kernel.append(runId, 'run.resumed', { step: 'triage' });
      const lease = makeLease(
        { run_id: runId, step: 'triage', attempt: 1, step_def: { id: 'triage', kind: 'model', prompt: 'triage' } },
        { prompts: { triage: 'go' }, mock: { triage: { output: { amount: 1 }, usage: { tokens: 7, usd: 0.001 } } }, prior_events: kernel.eventsOf(runId) },
      );
      kernel.offer(lease);
      await until(() => ended() > 0, 5000, 'the step to end');
      const complete = kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!;
      expect(complete.body.usage).toEqual(reported ? { tokens: 7, usd: 0.001 } : { tokens: 157, usd: 0.031 });
    });
  }
});
