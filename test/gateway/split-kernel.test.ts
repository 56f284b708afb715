/**
 * Interface 5.3 / 6.2: every refusal is a `tool.refused` event on the run — also when the
 * gateway runs in its own svcd (`--no-kernel`) against a kernel without a token, where no
 * bearer stands in for a credential (interface 5.2). The gateway posts with the run's remit
 * when the token verified, else with the call's lease (decisions §7). While the kernel does
 * not answer, the events wait in the gateway's outbox and reach the run once it does.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSvcd, tempDir, waitOutput, type SpawnedSvcd } from '../helpers/daemon.js';
import { allEvents, lease, pushBundle, REQUESTER, startRunDaemon, type RunDaemon } from '../integration/run-fixtures.js';

let d: RunDaemon;
let gw: SpawnedSvcd;

/** svcd with the gateway alone (test tools on, no token), talking to the kernel at `kernelUrl`. */
function spawnGatewayOnly(kernelUrl: string): Promise<SpawnedSvcd> {
  const dir = tempDir();
  const cfg = join(dir, 'gateway.yaml');
  writeFileSync(cfg, `kernel_url: ${kernelUrl}\nconnectors: []\n`);
  return spawnSvcd(['--no-kernel', '--gateway-config', cfg, '--gateway-listen', '127.0.0.1:0'], {
    SVC_GATEWAY_DATA: join(dir, 'gw'),
    SVC_TOKEN: '',
    SVC_GATEWAY_TEST_TOOLS: '1',
  });
}

/** A run of the refunds bundle on a remit for test.echo with `scopes`, its first step leased. */
async function leasedRun(scopes: string[]): Promise<{ run_id: string; l: { status: number; body: any } }> {
  const bundleId = await pushBundle(d);
  const remit = await d.kernel_('/remits', {
    body: { tools: ['test.echo', 'billing.*'], scopes, grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
  });
  const run = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: remit.body.remit_id, requested_by: REQUESTER } });
  return { run_id: run.body.run_id as string, l: await lease(d, ['model']) };
}

beforeAll(async () => {
  d = await startRunDaemon();
  gw = await spawnGatewayOnly(d.kernelUrl!);
}, 30_000);

afterAll(async () => {
  await gw?.stop();
  await d?.[Symbol.asyncDispose]();
});

async function call(body: Record<string, unknown>, gateway: SpawnedSvcd = gw): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gateway.gatewayUrl}/v1/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

describe('gateway apart from a kernel without a token (interface 5.3, decisions §7)', () => {
  it('records refusals of a bad token (through the lease) and of a verified one (through the remit)', async () => {
    const { run_id, l } = await leasedRun(['sql:table:*']);
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
    expect(gw.stderr()).not.toContain('a gateway event was not recorded');
    expect(gw.stderr()).not.toContain('cannot reach the kernel with a gateway event');
  }, 30_000);
});

/** A real HTTP hop to the kernel that can be cut: while `down`, every connection is reset. */
async function cuttableProxy(target: string): Promise<{ url: string; setDown(down: boolean): void; close(): Promise<void> }> {
  let down = false;
  const server: Server = createServer((req, res) => {
    if (down) return void req.socket.destroy();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'content-length' && k !== 'connection')) as Record<string, string>;
      fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined })
        .then(async (up) => {
          res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await up.arrayBuffer()));
        })
        .catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    setDown: (v) => void (down = v),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('gateway apart from a kernel that stops answering (interface 5.3, decisions §7)', () => {
  it('tool.called events of calls made meanwhile wait in the outbox and reach the run, in order, once the kernel answers', async () => {
    const proxy = await cuttableProxy(d.kernelUrl!);
    const gw2 = await spawnGatewayOnly(proxy.url);
    try {
      const { run_id, l } = await leasedRun(['test:*']);
      const body = (n: number) => ({ run_id, step: l.body.step, lease_id: l.body.lease_id, remit_token: l.body.context.remit_token, tool: 'test.echo', args: { n } });
      const called = async () => (await allEvents(d, run_id)).filter((e) => e.kind === 'tool.called');

      expect((await call(body(1), gw2)).status).toBe(200); // the keys are fetched and cached
      expect(await called()).toHaveLength(1);

      proxy.setDown(true);
      for (const n of [2, 3]) {
        const res = await call(body(n), gw2);
        expect(res.status).toBe(200); // an event that cannot be posted never fails the call
      }
      const metrics = await (await fetch(`${gw2.gatewayUrl}/v1/metrics`)).text();
      expect(metrics).toMatch(/^svc_gateway_event_outbox_depth 2$/m);
      expect(metrics).toMatch(/^svc_gateway_events_dropped_total\{reason="refused"\} 0$/m); // there from the start, 0 until a drop
      expect(await called()).toHaveLength(1);

      proxy.setDown(false);
      await expect.poll(async () => (await called()).length, { timeout: 20_000, interval: 250 }).toBe(3);
      const events = await called();
      expect(events.map((e) => e.payload.args_hash)).toEqual([...new Set(events.map((e) => e.payload.args_hash))]); // three calls, three events
      expect(events[0].payload.queued_at).toBeUndefined();
      for (const e of events.slice(1)) expect(Date.parse(e.payload.queued_at)).toBeLessThanOrEqual(Date.parse(e.at));
      expect(Date.parse(events[1].payload.queued_at)).toBeLessThanOrEqual(Date.parse(events[2].payload.queued_at));
      expect(gw2.stderr()).toContain('cannot reach the kernel with a gateway event; it is queued');
      expect(await waitOutput(gw2.stderr, 'the kernel takes gateway events again')).toContain('the kernel takes gateway events again');
      expect(gw2.stderr()).not.toContain('a gateway event was not recorded');
    } finally {
      await gw2.stop();
      await proxy.close();
    }
  }, 60_000);
});

describe('gateway apart from a kernel whose keys it cannot fetch (svc-gateway(5) AUTHENTICATION)', () => {
  it('says so in its log once per outage, and again when the keys are fetched, while the calls are 503', async () => {
    const proxy = await cuttableProxy(d.kernelUrl!);
    proxy.setDown(true); // down before the gateway ever fetched the keys
    const gw3 = await spawnGatewayOnly(proxy.url);
    try {
      const { run_id, l } = await leasedRun(['test:*']);
      const body = { run_id, step: l.body.step, lease_id: l.body.lease_id, remit_token: l.body.context.remit_token, tool: 'test.echo', args: {} };
      for (let i = 0; i < 5; i++) {
        const res = await call(body, gw3);
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('unavailable');
        await new Promise((r) => setTimeout(r, 250)); // past the 1 s refresh hold-back, some of them
      }
      const warned = () => gw3.stderr().split('\n').filter((line) => line.includes("cannot fetch the kernel's keys"));
      expect(warned()).toHaveLength(1); // one line per outage, not one per call
      expect(JSON.parse(warned()[0]!)).toMatchObject({ level: 'warn', kernel_url: proxy.url, err: expect.any(String) });

      proxy.setDown(false);
      await new Promise((r) => setTimeout(r, 1000)); // the hold-back after the last failed refresh
      expect((await call(body, gw3)).status).toBe(200);
      expect(await waitOutput(gw3.stderr, "the kernel's keys are fetched again")).toContain('fetched again');
      expect(warned()).toHaveLength(1);
    } finally {
      await gw3.stop();
      await proxy.close();
    }
  }, 60_000);
});
