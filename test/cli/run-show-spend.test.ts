// svc(1) `svc run show` ("usage against budget"), decisions §8: the dollars shown are the ones
// the kernel compared — usage to the nano-dollar — not rounded to four decimals, which showed
// a run failed budget_exhausted at 0.300000001 of 0.3 as "0.3000 of 0.3000 USD".
import { describe, expect, it } from 'vitest';
import { showHuman } from '../../cli/commands/run.js';

const run = (usage: { tokens: number; usd: number }, budget: { tokens: number; usd: number }) =>
  ({
    run_id: 'run_X',
    state: 'failed',
    bundle: { name: 'b', version: '1' },
    bundle_id: 'bnd_x',
    workflow: 'w',
    department: 'support',
    requested_by: { id: 'ana', role: 'agent', manager: 'm' },
    remit_id: 'remit_x',
    policies: [],
    current_step: null,
    pending_approval_id: null,
    usage,
    budget,
    error: { code: 'budget_exhausted', message: 'over' },
    last_seq: 9,
    head_hash: 'ab'.repeat(32),
    steps: {},
    output: null,
  }) as unknown as Parameters<typeof showHuman>[0];

describe('svc run show: usd (D §8)', () => {
  it('shows usage and budget as the kernel counts them', () => {
    expect(showHuman(run({ tokens: 0, usd: 0.300000001 }, { tokens: 10, usd: 0.3 }))).toMatch(/^usd\s+0\.300000001 of 0\.3 USD \(100%\)$/m);
    expect(showHuman(run({ tokens: 123, usd: 0.00001845 }, { tokens: 1000, usd: 1 }))).toMatch(/^usd\s+0\.00001845 of 1 USD \(0%\)$/m);
    expect(showHuman(run({ tokens: 0, usd: 0 }, { tokens: 0, usd: 1e9 }))).toMatch(/^usd\s+0 of 1000000000 USD \(0%\)$/m);
  });
});
