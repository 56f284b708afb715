/**
 * Contract canaries (interface 3 connector rows, 4.2, 8; decisions §9), driven through the
 * test connector's shape: failure, quarantine with its repair request file, 503 calls,
 * operator release, auto release after two passing probes, the loop, and the
 * svc_gateway_canary_status metric (1, 0, -1).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { metricValue, startGateway } from './helpers.js';

const signer = testSigner();
const token = () => mintToken(signer, remitPayload(signer));
const status = (m: string) => metricValue(m, 'svc_gateway_canary_status', { connector: 'test' });

describe('quarantine and the repair request (interface 3, 2.10)', () => {
  it('fails, then quarantines after quarantine_after probes, writes the repair file, answers 503; release restores', async () => {
    await using g = await startGateway({ keys: signer, env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_QUARANTINE_AFTER: '2' } });
    const healthy = await g.req('POST', '/canaries/test/probe');
    expect(healthy.body).toMatchObject({ status: 'healthy', consecutive_failures: 0, last_error: null, last_ok_at: expect.any(String) });
    expect(status(await g.metrics())).toBe(1);

    expect((await g.req('POST', '/test/shape', { shape: { ok: 'yes', extra: [1, 2] } })).body).toEqual({ ok: true, shape: { ok: 'yes', extra: [1, 2] } });
    const first = await g.req('POST', '/canaries/test/probe');
    expect(first.body).toMatchObject({
      status: 'failed',
      consecutive_failures: 1,
      last_error: expect.stringContaining('type mismatch'),
      contract_diff: { missing: [], type_mismatch: [{ field: 'ok', expected: 'bool', actual: 'string' }], unexpected_required: [] },
    });
    expect(status(await g.metrics())).toBe(0);
    expect((await g.req('GET', '/health')).body.connectors.test).toBe('failed');
    // failed is not quarantined: calls still run
    expect((await g.call({ remit_token: token(), tool: 'test.echo', args: {} })).status).toBe(200);
    // nor released: its status is answered (D §9), its failure count kept for the next probe
    const notQuarantined = await g.req('POST', '/canaries/test/release');
    expect(notQuarantined.status).toBe(200);
    expect(notQuarantined.body).toEqual((await g.req('GET', '/canaries')).body.test);
    expect(notQuarantined.body).toMatchObject({ status: 'failed', consecutive_failures: 1 });

    const second = await g.req('POST', '/canaries/test/probe');
    expect(second.body).toMatchObject({ status: 'quarantined', consecutive_failures: 2, quarantined_at: expect.any(String), repair_file: expect.stringContaining(join(g.dataDir, 'repairs', 'test-')) });
    expect(status(await g.metrics())).toBe(-1);
    expect((await g.req('GET', '/health')).body.connectors.test).toBe('quarantined');
    expect((await g.req('GET', '/canaries')).body.test.status).toBe('quarantined');

    const files = readdirSync(join(g.dataDir, 'repairs'));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^test-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z\.json$/);
    const repair = JSON.parse(readFileSync(join(g.dataDir, 'repairs', files[0]!), 'utf8'));
    expect(repair).toMatchObject({
      connector: 'test',
      contract: { tool: 'test.shape', required: { ok: 'bool' } },
      observed_shape: { ok: 'string', extra: ['number'] },
      diff: { type_mismatch: [{ field: 'ok', expected: 'bool', actual: 'string' }] },
      probe: { tool: 'test.shape', args: { shape: { ok: 'yes', extra: [1, 2] } } },
    });

    const blocked = await g.call({ remit_token: token(), tool: 'test.echo', args: {} });
    expect(blocked.status).toBe(503);
    expect(blocked.body.error.code).toBe('connector_quarantined');
    // The message the step's error carries says what the on-call does next (svc-gateway(5) CANARIES).
    expect(blocked.body.error.message).toBe('connector test is quarantined by its canary (svc gateway canaries says why); once it is repaired, svc gateway release test, then svc run resume the runs it parked');

    // Without auto release, passing probes do not release.
    await g.req('POST', '/test/shape', { shape: { ok: true } });
    for (let i = 0; i < 3; i++) expect((await g.req('POST', '/canaries/test/probe')).body.status).toBe('quarantined');

    const released = await g.req('POST', '/canaries/test/release');
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ connector: 'test', status: 'healthy', consecutive_failures: 0, quarantined_at: null });
    // D §9: release returns the status object, unconditionally; I 3 has the transition from
    // quarantined only, so a connector that is not quarantined is answered unchanged.
    const again = await g.req('POST', '/canaries/test/release');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(released.body);
    expect(status(await g.metrics())).toBe(1);
    expect((await g.call({ remit_token: token(), tool: 'test.echo', args: {} })).status).toBe(200);
  });

  it('a missing field is listed in contract_diff.missing (the body may be the shape itself)', async () => {
    await using g = await startGateway({ keys: signer, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    await g.req('POST', '/test/shape', { other: 1 });
    const res = await g.req('POST', '/canaries/test/probe');
    expect(res.body.contract_diff).toEqual({ missing: ['ok'], type_mismatch: [], unexpected_required: [] });
  });

  it('a quarantine survives a restart of the gateway', async () => {
    const dataDir = tempDir('svc-gw-q-');
    const env = { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_QUARANTINE_AFTER: '1' };
    const g1 = await startGateway({ keys: signer, env, dataDir });
    await g1.req('POST', '/test/shape', { shape: {} });
    expect((await g1.req('POST', '/canaries/test/probe')).body.status).toBe('quarantined');
    await g1.close();
    await using g2 = await startGateway({ keys: signer, env, dataDir });
    expect((await g2.req('GET', '/canaries')).body.test).toMatchObject({ status: 'quarantined', repair_file: expect.stringContaining('repairs') });
    // Without auto_release, passing probes release nothing: the note says what does (svc-gateway(5) CANARIES).
    expect((await g2.req('GET', '/canaries')).body.test.last_error).toBe('quarantined before the last restart (its repair request says why); release it once repaired: svc gateway release');
    expect((await g2.call({ remit_token: token(), tool: 'test.echo', args: {} })).status).toBe(503);
    await g2.req('POST', '/canaries/test/release');
    expect((await g2.call({ remit_token: token(), tool: 'test.echo', args: {} })).status).toBe(200);
  });
});

describe('auto release (interface 3, 8: two consecutive passing probes, only when enabled)', () => {
  it('releases after exactly two consecutive passing probes; a failure in between restarts the count', async () => {
    await using g = await startGateway({ keys: signer, env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_AUTO_RELEASE: '1', SVC_CANARY_QUARANTINE_AFTER: '1' } });
    await g.req('POST', '/test/shape', { shape: {} });
    expect((await g.req('POST', '/canaries/test/probe')).body.status).toBe('quarantined');
    await g.req('POST', '/test/shape', { shape: { ok: true } });
    expect((await g.req('POST', '/canaries/test/probe')).body).toMatchObject({ status: 'quarantined', consecutive_passes: 1 });
    await g.req('POST', '/test/shape', { shape: {} });
    expect((await g.req('POST', '/canaries/test/probe')).body).toMatchObject({ status: 'quarantined', consecutive_passes: 0 });
    await g.req('POST', '/test/shape', { shape: { ok: false } });
    expect((await g.req('POST', '/canaries/test/probe')).body.status).toBe('quarantined');
    expect((await g.req('POST', '/canaries/test/probe')).body).toMatchObject({ status: 'healthy', consecutive_failures: 0 });
    expect(status(await g.metrics())).toBe(1);
  });
});

describe('a probe that does not answer (interface 3: a failing probe counts; svc-gateway(5) CANARIES)', () => {
  it("fails at the connector's timeout_ms, counts toward quarantine, and quarantines like any failure", async () => {
    const server = createServer((_req, res) => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), 5000).unref());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    try {
      await using g = await startGateway({
        keys: signer,
        env: { SVC_CANARY_QUARANTINE_AFTER: '2' },
        doc: { connectors: [{ name: 'web', type: 'http', allowed_hosts: ['127.0.0.1'], timeout_ms: 300, probe: { tool: 'web.get', args: { url: `http://127.0.0.1:${port}/slow` } } }] },
      });
      const started = Date.now();
      const first = await g.req('POST', '/canaries/web/probe');
      expect(Date.now() - started).toBeLessThan(3000);
      expect(first.body).toMatchObject({ status: 'failed', consecutive_failures: 1, last_error: 'probe timed out after 300 ms', last_ok_at: null });
      const second = await g.req('POST', '/canaries/web/probe');
      expect(second.body).toMatchObject({ status: 'quarantined', consecutive_failures: 2, last_error: 'probe timed out after 300 ms' });
      const call = await g.call({ remit_token: mintToken(signer, remitPayload(signer, { tools: ['web.*'], scopes: ['http:host:127.0.0.1'] })), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/x` } });
      expect(call.status).toBe(503);
      expect(call.body.error.code).toBe('connector_quarantined');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('the canary loop (interface 4.2 contract canaries rule 2)', () => {
  it('probes every SVC_CANARY_INTERVAL seconds without being asked', async () => {
    await using g = await startGateway({ keys: signer, canaryLoop: true, env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_INTERVAL: '0.05', SVC_CANARY_QUARANTINE_AFTER: '2' } });
    await g.req('POST', '/test/shape', { shape: { ok: 1 } });
    const deadline = Date.now() + 5000;
    let s = '';
    while (Date.now() < deadline && s !== 'quarantined') {
      await new Promise((r) => setTimeout(r, 50));
      s = (await g.req('GET', '/canaries')).body.test.status;
    }
    expect(s).toBe('quarantined');
    expect((await g.req('GET', '/canaries')).body.test.last_probe_at).not.toBeNull();
  });
});
