/**
 * svc gateway probe and release as the on-call reads them (svc(1) Gateway; svc-gateway(5)
 * CANARIES): a quarantined connector whose probe passed is said to wait for a release, not to
 * have failed its probe; a release that ends a quarantine says the runs it parked stay
 * parked until resumed.
 */
import { describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';
import { testSigner } from '../helpers/remit-token.js';
import { startGateway } from '../gateway/helpers.js';

describe('svc gateway probe / release after a quarantine (svc(1), svc-gateway(5) CANARIES)', () => {
  it('a passing probe of a quarantined connector points at the release; the release points at the parked runs', async () => {
    await using g = await startGateway({ keys: testSigner(), env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_QUARANTINE_AFTER: '1' } });
    const env = { SVC_GATEWAY_URL: g.url, SVC_TOKEN: '' };
    await g.req('POST', '/test/shape', { shape: { ok: 'yes' } });
    const broken = await runSvc(['gateway', 'probe', 'test'], env);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain('test: quarantined (1 consecutive failure)');
    expect(broken.stderr).toBe('svc: the probe of test did not pass: quarantined\n');

    // Repaired: the probe passes, the connector waits for the operator's release.
    await g.req('POST', '/test/shape', { shape: { ok: true } });
    const repaired = await runSvc(['gateway', 'probe', 'test'], env);
    expect(repaired.code).toBe(1); // not healthy yet: scripts see the same exit status
    expect(repaired.stdout).toContain('test: quarantined (0 consecutive failures)');
    expect(repaired.stderr).toBe('svc: the probe of test passed, but test stays quarantined until it is released: svc gateway release test\n');

    const released = await runSvc(['gateway', 'release', 'test'], env);
    expect(released.code).toBe(0);
    expect(released.stdout).toContain('test: healthy');
    expect(released.stderr).toContain('svc: test released; runs parked while it was quarantined stay parked: resume each with svc run resume RUN_ID');
    // Released again: nothing was quarantined, so no note; --json never has one.
    expect((await runSvc(['gateway', 'release', 'test'], env)).stderr).toBe('');
    await g.req('POST', '/test/shape', { shape: {} });
    await runSvc(['gateway', 'probe', 'test'], env);
    const asJson = await runSvc(['gateway', 'release', 'test', '--json'], env);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ connector: 'test', status: 'healthy' });
    expect(asJson.stderr).toBe('');
  });
});
