/**
 * Crash safety (decisions §6, §7, §11): svcd killed with SIGKILL while leases are out. After a
 * restart on the same data dir no completed step is lost, every chain replays valid, and the
 * leases that were out expire and are handed out again with attempt + 1.
 * Runs the built daemon (dist/): `npx tsc -p tsconfig.json` first (npm test builds).
 */
import { describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { callJson, spawnSvcd, tempDir } from '../helpers/daemon.js';
import { REQUESTER, refundsBundle, sleep } from './run-fixtures.js';

const call = callJson;

describe('svcd killed while leases are out (D §6, §7)', () => {
  it('loses no completed step, keeps every chain valid, and hands the expired leases out again', { timeout: 60_000 }, async () => {
    const dataDir = tempDir();
    const pub = generatePublisherKey();
    const args = ['--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', `${pub.key_id}:${pub.public_key}`];
    const first = await spawnSvcd(args);
    const k = first.kernelUrl!;
    const bundle = refundsBundle();
    const bundleId = (await call(k, '/bundles', { bundle, signature: signBundle(bundle, pub) })).body.bundle_id;
    const runs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const remit = (await call(k, '/remits', { tools: ['billing.*'], scopes: [], spend: { tokens: 10_000, usd: 10 }, autonomy: 'autonomous', requested_by: REQUESTER })).body;
      runs.push((await call(k, '/runs', { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: `inv-${i}` }, remit_id: remit.remit_id })).body.run_id);
    }
    // run 0: two steps completed
    for (const [kind, output] of [['model', { amount: 7 }], ['tool', { rows: ['inv-0'] }]] as const) {
      const l = (await call(k, '/leases', { worker_id: 'w', kinds: [kind], ttl_seconds: 2 })).body;
      expect(l.run_id).toBe(runs[0]);
      expect((await call(k, `/leases/${l.lease_id}/complete`, { output, usage: { tokens: 5, usd: 0.01 } })).status).toBe(200);
    }
    // runs 1 and 2: their first steps leased and left out
    const out = [];
    for (let i = 0; i < 2; i++) out.push((await call(k, '/leases', { worker_id: 'w', kinds: ['model'], ttl_seconds: 2 })).body);
    expect(out.map((l) => l.run_id).sort()).toEqual([runs[1], runs[2]].sort());
    const before = await Promise.all(runs.map(async (r) => (await call(k, `/runs/${r}`)).body));

    first.child.kill('SIGKILL');
    await first.stop('SIGKILL');

    await using second = await spawnSvcd(args);
    const k2 = second.kernelUrl!;
    const a = (await call(k2, `/runs/${runs[0]}`)).body;
    expect(a.steps.triage).toMatchObject({ state: 'completed', output: { amount: 7 } });
    expect(a.steps.lookup).toMatchObject({ state: 'completed', output: { rows: ['inv-0'] } });
    expect(a.usage).toEqual({ tokens: 10, usd: 0.02 });
    expect(a.last_seq).toBe(before[0].last_seq);
    expect(a.head_hash).toBe(before[0].head_hash);
    for (const r of runs) {
      const rep = (await call(k2, `/runs/${r}/replay`, {})).body;
      expect(rep, r).toMatchObject({ chain_valid: true, state_matches: true, chain_errors: [] });
    }

    // the leases that were out expire (ttl 2 s) and their steps are handed out again, attempt 2
    await sleep(2100);
    const again = [];
    for (let i = 0; i < 2; i++) again.push((await call(k2, '/leases', { worker_id: 'w2', kinds: ['model'], wait_seconds: 3 })).body);
    expect(again.map((l) => [l.run_id, l.step, l.attempt]).sort()).toEqual(
      [
        [runs[1], 'triage', 2],
        [runs[2], 'triage', 2],
      ].sort(),
    );
    for (const l of out) expect((await call(k2, `/leases/${l.lease_id}/heartbeat`, {})).status).toBe(410);
    const next = (await call(k2, '/leases', { worker_id: 'w2', kinds: ['action'] })).body;
    expect(next.run_id).toBe(runs[0]);
    expect(next.context.steps).toEqual({ triage: { output: { amount: 7 } }, lookup: { output: { rows: ['inv-0'] } } });
    for (const r of runs) expect((await call(k2, `/runs/${r}/replay`, {})).body.chain_valid).toBe(true);
  });
});
