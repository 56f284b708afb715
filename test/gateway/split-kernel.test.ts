/**
 * Interface 5.3 / 6.2: every refusal is a `tool.refused` event on the run — also when the
 * gateway runs in its own svcd (`--no-kernel`) against a kernel without a token, where no
 * bearer stands in for a credential (interface 5.2). The gateway posts with the run's remit
 * when the token verified, else with the call's lease (decisions §7).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { allEvents, lease, pushBundle, REQUESTER, startRunDaemon, type RunDaemon } from '../integration/run-fixtures.js';

let d: RunDaemon;
let gw: SpawnedSvcd;

beforeAll(async () => {
  d = await startRunDaemon();
  const dir = tempDir();
  const cfg = join(dir, 'gateway.yaml');
  writeFileSync(cfg, `kernel_url: ${d.kernelUrl}\nconnectors: []\n`);
  gw = await spawnSvcd(['--no-kernel', '--gateway-config', cfg, '--gateway-listen', '127.0.0.1:0'], {
    SVC_GATEWAY_DATA: join(dir, 'gw'),
    SVC_TOKEN: '',
    SVC_GATEWAY_TEST_TOOLS: '1',
  });
}, 30_000);

afterAll(async () => {
  await gw?.stop();
  await d?.[Symbol.asyncDispose]();
});

async function call(body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.gatewayUrl}/v1/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

describe('gateway apart from a kernel without a token (interface 5.3, decisions §7)', () => {
  it('records refusals of a bad token (through the lease) and of a verified one (through the remit)', async () => {
    const bundleId = await pushBundle(d);
    const remit = await d.kernel_('/remits', {
      body: { tools: ['test.echo', 'billing.*'], scopes: ['sql:table:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
    });
    const run = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: remit.body.remit_id, requested_by: REQUESTER } });
    const run_id = run.body.run_id as string;
    const l = await lease(d, ['model']);
    expect(l.status).toBe(200);
    const common = { run_id, step: l.body.step, lease_id: l.body.lease_id };

    const malformed = await call({ ...common, remit_token: 'krt1.x', tool: 'test.echo', args: {} });
    expect(malformed.body.refusal.reason).toBe('token_malformed');
    const scope = await call({ ...common, remit_token: l.body.context.remit_token, tool: 'test.echo', args: {} });
    expect(scope.body.refusal.reason).toBe('scope_not_granted');
    const tool = await call({ ...common, lease_id: null, remit_token: l.body.context.remit_token, tool: 'test.write', args: {} });
    expect(tool.body.refusal.reason).toBe('tool_not_in_remit');

    const refused = (await allEvents(d, run_id)).filter((e) => e.kind === 'tool.refused');
    expect(refused.map((e) => e.payload.reason)).toEqual(['token_malformed', 'scope_not_granted', 'tool_not_in_remit']);
    expect(refused[0]).toMatchObject({ actor: { id: 'gateway' }, payload: { tool: 'test.echo', lease_id: l.body.lease_id, run_id } });
    expect(gw.stderr()).not.toContain('cannot append gateway event');
  }, 30_000);
});
