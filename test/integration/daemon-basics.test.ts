/**
 * svcd basics: interface 4.1 (/health, /keys), 5.1 (auth), 7.1 and decisions §10/§11
 * (error envelope, startup line, SIGTERM drain).
 */
import { request } from 'node:http';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log/logger.js';
import { spawnSvcd, startTestDaemon, tempDir } from '../helpers/daemon.js';

/** A raw request, so that Host and Origin are exactly what a browser would send. */
function rawPost(url: string, path: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1${path}`, { method: 'POST', headers: { 'content-length': String(Buffer.byteLength(body)), ...headers } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('a listener without a token answers local programs, not web pages (I 5.1; docs/design.md "Listeners")', () => {
  it('refuses a request with an Origin (CSRF) or a foreign Host (DNS rebinding); curl-like clients and local names pass', async () => {
    await using d = await startTestDaemon();
    const port = new URL(d.kernelUrl!).port;
    const remit = JSON.stringify({ tools: ['test.*'], scopes: ['*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 60, policy_set: [], requested_by: { id: 'a', role: 'r', manager: 'm' } });
    const page = await rawPost(d.kernelUrl!, '/remits', { 'content-type': 'text/plain', origin: 'https://evil.example', host: `127.0.0.1:${port}` }, remit);
    expect(page.status).toBe(403);
    expect(page.body.error).toMatchObject({ code: 'forbidden', message: expect.stringContaining('a web page (Origin https://evil.example)') });
    const rebound = await rawPost(d.kernelUrl!, '/remits', { 'content-type': 'text/plain', host: `attacker.example:${port}` }, remit);
    expect(rebound.status).toBe(403);
    expect(rebound.body.error.message).toContain('Host attacker.example');
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${hostname()}:${port}`, `127.0.0.1`, 'x', `app.localhost:${port}`]) {
      const ok = await rawPost(d.kernelUrl!, '/remits', { 'content-type': 'application/json', host }, remit);
      expect(ok.status, host).toBe(201);
    }
    expect((await d.kernel_('/remits', { body: JSON.parse(remit) })).status).toBe(201); // Node's fetch, as svc and workers call
  });

  it('with a token the bearer decides, whatever the Origin', async () => {
    await using d = await startTestDaemon({ token: 'tkn-1' });
    const res = await rawPost(d.kernelUrl!, '/remits', { 'content-type': 'application/json', origin: 'https://console.example', authorization: 'Bearer tkn-1' }, '{}');
    expect(res.status).toBe(400); // past auth: the body is what is wrong
  });
});

describe('kernel listener (I 4.1, D §10)', () => {
  it('serves /health and /keys in the documented shapes', async () => {
    await using d = await startTestDaemon();
    const health = await d.kernel_('/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ ok: true, version: expect.any(String), uptime_s: expect.any(Number), runs: { running: 0, parked: 0 } });
    const keys = await d.kernel_('/keys');
    expect(keys.body.key_id).toMatch(/^cp-[A-Za-z0-9_-]{16}$/);
    expect(keys.body.algorithm).toBe('ed25519');
    expect(Buffer.from(keys.body.public_key, 'base64url')).toHaveLength(32);
    expect(keys.body.previous).toEqual([]);
  });

  it('answers unknown routes and bad JSON with the envelope, never a 500', async () => {
    await using d = await startTestDaemon();
    const nf = await d.kernel_('/no/such/route');
    expect(nf.status).toBe(404);
    expect(nf.body.error.code).toBe('not_found');
    const bad = await d.kernel_('/remits', { method: 'POST', body: '{not json' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'request_invalid' });
  });

  it('requires the bearer token when one is set (I 5.1)', async () => {
    await using d = await startTestDaemon({ token: 's3cret-token' });
    const noAuth = await fetch(`${d.kernelUrl}/v1/health`);
    expect(noAuth.status).toBe(401);
    expect(((await noAuth.json()) as any).error.code).toBe('unauthorized');
    const wrong = await fetch(`${d.kernelUrl}/v1/health`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    const ok = await d.kernel_('/health');
    expect(ok.status).toBe(200);
  });

  it('tells the operator about a refused caller once per address and reason, never the token (I 5.1)', async () => {
    const warnings: Array<Record<string, unknown>> = [];
    const logger = { ...silentLogger, warn: (msg: string, fields?: Record<string, unknown>) => void warnings.push({ msg, ...fields }), child: () => logger };
    await using d = await startTestDaemon({ token: 'right-token-42', logger });
    for (let i = 0; i < 3; i++) await fetch(`${d.kernelUrl}/v1/health`, { headers: { authorization: 'Bearer wrong-token-17' } });
    await fetch(`${d.kernelUrl}/v1/runs`);
    const refused = warnings.filter((w) => w.msg === 'request refused');
    expect(refused).toEqual([
      expect.objectContaining({ reason: 'wrong bearer token', remote: expect.any(String), method: 'GET', url: '/v1/health' }),
      expect.objectContaining({ reason: 'no bearer token', url: '/v1/runs' }),
    ]);
    expect(JSON.stringify(warnings)).not.toContain('wrong-token-17');
    expect(JSON.stringify(warnings)).not.toContain('right-token-42');
  });

  it('refuses to start on a non-loopback address without a token, saying why', async () => {
    await expect(startTestDaemon({ kernel: { listen: '0.0.0.0:0' } })).rejects.toThrow(/without a token/);
  });
});

describe('svcd process (D §11)', () => {
  it('prints the JSON startup line, keeps its key across restarts, and drains on SIGTERM with exit 0', async () => {
    const dataDir = tempDir();
    const first = await spawnSvcd(['--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway']);
    expect(first.kernelUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const k1 = (await (await fetch(`${first.kernelUrl}/v1/keys`)).json()) as any;
    expect(await first.stop('SIGTERM')).toBe(0);
    for (const line of first.stderr().trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();

    const second = await spawnSvcd(['--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway']);
    const k2 = (await (await fetch(`${second.kernelUrl}/v1/keys`)).json()) as any;
    expect(k2.key_id).toBe(k1.key_id);
    expect(await second.stop('SIGTERM')).toBe(0);
  });

  it('a log reader that goes away takes nothing with it: svcd keeps serving, and SIGTERM still drains with exit 0', async () => {
    const svcd = await spawnSvcd(['--data-dir', tempDir(), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_LOG_LEVEL: 'debug' });
    // The reader of both streams ends (a `| head`, a log shipper restarting): svcd's next writes get EPIPE.
    svcd.child.stdout!.destroy();
    svcd.child.stderr!.destroy();
    for (let i = 0; i < 5; i++) {
      expect((await fetch(`${svcd.kernelUrl}/v1/health`)).status).toBe(200);
      expect((await fetch(`${svcd.kernelUrl}/v1/no-such-route`)).status).toBe(404); // logged at debug
      expect((await fetch(`${svcd.gatewayUrl}/v1/health`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(svcd.child.exitCode).toBeNull();
    expect(await svcd.stop('SIGTERM')).toBe(0);
  });
});
