// svcd's drain with a worker mid-step (decisions §11: SIGTERM drains and exits 0): the
// gateway call in flight finishes, and the worker's keep-alive connections, long polls and
// requests sent during the drain do not hold svcd open until its 15 s deadline.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { signBundle } from '../../src/bundle/sign.js';
import { spawnSvcd } from '../helpers/daemon.js';
import { DEMO_KEY, REQUESTER, events, ok, spawnWorker, startDemoDaemon, waitRun } from './helpers.js';

const SLEEPY = {
  name: 'sleepy',
  version: '1.0.0',
  tools: { 'test.sleep': { writes: false } },
  workflows: { nap: { input_schema: { type: 'object' }, steps: [{ id: 'nap', kind: 'tool', tool: 'test.sleep', args: { ms: 2500 }, timeout_seconds: 60 }] } },
};

describe('e2e: SIGTERM while a worker step is in flight (D §11)', () => {
  it('svcd lets the gateway call finish, then exits 0 well before its drain deadline', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon({ SVC_GATEWAY_TEST_TOOLS: '1' });
    // Two loops: one runs the step, the other keeps a long poll open on the kernel.
    await using worker = spawnWorker(demo, ['--concurrency', '2']);
    const { bundle_id } = await ok(demo.kernelUrl, 'POST', '/bundles', { bundle: SLEEPY, signature: signBundle(SLEEPY, DEMO_KEY) });
    const { remit_id } = await ok(demo.kernelUrl, 'POST', '/remits', {
      tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER,
    });
    const { run_id } = await ok(demo.kernelUrl, 'POST', '/runs', { bundle_id, workflow: 'nap', input: {}, remit_id, requested_by: REQUESTER });
    await waitRun(demo.kernelUrl, run_id, (s) => s.steps?.nap?.state === 'leased' || s.steps?.nap?.state === 'running', 15_000, () => worker.stderr());
    expect((await events(demo.kernelUrl, run_id)).some((e) => e.kind === 'tool.called')).toBe(false);
    await new Promise((r) => setTimeout(r, 700)); // the worker's gateway call is now sleeping

    const t0 = Date.now();
    const code = await demo.svcd.stop('SIGTERM');
    const took = Date.now() - t0;
    expect(code, demo.svcd.stderr().slice(-3000)).toBe(0);
    expect(took).toBeLessThan(10_000);
    expect(demo.svcd.stderr()).not.toContain('drain timed out');
    expect(demo.svcd.stderr()).toContain('"stopped"');

    // The call was drained, not cut: its tool.called event is in the log svcd left behind.
    await using again = await spawnSvcd(['--data-dir', join(demo.dir, 'kernel'), '--kernel-listen', '127.0.0.1:0', '--no-gateway']);
    const log = await events(again.kernelUrl!, run_id);
    expect(log.filter((e) => e.kind === 'tool.called').map((e) => e.payload.tool)).toEqual(['test.sleep']);
  });
});
