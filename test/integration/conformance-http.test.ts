/**
 * Conformance of the kernel listener to interface 5.1, 7.1 and decisions §10 found by a
 * black-box review: every error is the `{error: {code, message, details}}` envelope (also the
 * router's own errors and a drain), an unknown id is 404 not_found whatever the body, the
 * bearer scheme is case-insensitive, and every metric of I 4.1 has samples from the start.
 */
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { connect } from 'node:net';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installCommon, renderKernelError } from '../../daemon/http/common.js';
import { fastifyOptions } from '../../daemon/http/fastify-options.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Redactor, silentLogger } from '../../src/log/logger.js';
import { spawnSvcd, startTestDaemon, tempDir } from '../helpers/daemon.js';
import { pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

function envelope(body: any, code: string): void {
  expect(body).toEqual({ error: { code, message: expect.any(String), details: expect.any(Object) } });
}

/** svcd with the kernel and a gateway without connectors, and a POST that sends its body as given. */
async function startBoth(prefix: string) {
  const dir = tempDir(prefix);
  const config = loadGatewayConfig({ data_dir: join(dir, 'gw') }, { env: {}, redactor: new Redactor() });
  const d = await startTestDaemon({ gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
  const post = (base: string | null, path: string, body: string | Buffer) =>
    fetch(`${base}/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { d, dir, post };
}

describe('D §10 / I 7.1: router errors use the envelope', () => {
  it('a URL that does not decode is 400 request_invalid, not fastify\'s body', async () => {
    await using d = await startTestDaemon();
    const res = await fetch(`${d.kernelUrl}/v1/runs/%ZZ`);
    expect(res.status).toBe(400);
    envelope(await res.json(), 'request_invalid');
  });

  it('a known path with another method is 405 method_not_allowed with Allow; an unknown path stays 404', async () => {
    const dir = tempDir('svc-405-');
    const config = loadGatewayConfig({ data_dir: join(dir, 'gw') }, { env: {}, redactor: new Redactor() });
    await using d = await startTestDaemon({ gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
    const del = await fetch(`${d.kernelUrl}/v1/health`, { method: 'DELETE' });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
    const body = (await del.json()) as any;
    envelope(body, 'method_not_allowed');
    expect(body.error.details).toEqual({ method: 'DELETE', allowed: ['GET', 'HEAD'] });
    const put = await fetch(`${d.kernelUrl}/v1/runs/run_x/events`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, POST');
    // The gateway's listener too, in its own envelope (I 7.2).
    const gw = await fetch(`${d.gatewayUrl}/v1/tools/call`);
    expect(gw.status).toBe(405);
    expect(gw.headers.get('allow')).toBe('POST');
    expect(await gw.json()).toMatchObject({ ok: false, error: { code: 'method_not_allowed' } });
    const nf = await fetch(`${d.kernelUrl}/v1/runs/run_x/nothing`);
    expect(nf.status).toBe(404);
    envelope(await nf.json(), 'not_found');
    // A long unknown path is named, not echoed whole (256 characters and an ellipsis).
    for (const base of [d.kernelUrl, d.gatewayUrl]) {
      const long = await fetch(`${base}/v1/${'z'.repeat(20_000)}`);
      expect(long.status).toBe(404);
      const text = await long.text();
      expect(text.length).toBeLessThan(1200);
      expect(JSON.parse(text).error.details).toEqual({ resource: 'route', id: `/v1/${'z'.repeat(252)}…` });
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('the kernel redacts registered secrets from every answer, as the gateway does (I 2.10)', async () => {
    const { globalRedactor } = await import('../../src/log/logger.js');
    const secret = 's3cr3t-KERNEL-55';
    globalRedactor.add(secret);
    await using d = await startTestDaemon();
    // What the kernel repeats from a request (an unknown id), and what it hands out from the
    // gateway's descriptors, pass the same hook.
    const res = await fetch(`${d.kernelUrl}/v1/runs/run_${secret}`);
    expect(res.status).toBe(404);
    const text = await res.text();
    expect(text).not.toContain(secret);
    expect(JSON.parse(text).error.details).toEqual({ resource: 'run', id: 'run_[REDACTED]' });
  });

  it('a long unknown id is 404 not_found with details.resource and details.id', async () => {
    await using d = await startTestDaemon();
    const id = `run_${'x'.repeat(300)}`;
    const res = await d.kernel_(`/runs/${id}`);
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 'not_found', details: { resource: 'run', id } });
    // However long: the request line is bounded by the header limit, not by the router.
    const hugeId = 'y'.repeat(5000);
    const huge = await fetch(`${d.kernelUrl}/v1/remits/${hugeId}`);
    expect(huge.status).toBe(404);
    expect(((await huge.json()) as { error: unknown }).error).toMatchObject({ code: 'not_found', details: { resource: 'remit', id: hugeId } });
  });

  it('a request that arrives during a drain is 503 in the envelope; every drain response closes its connection', async () => {
    // A bare listener with the common installation and one route that holds its connection.
    const app = Fastify(fastifyOptions());
    installCommon(app, { token: null, render: renderKernelError, logger: silentLogger });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    app.get('/hold', async () => {
      await held;
      return { ok: true };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const open = (first: string) => {
      const sock = connect(port, '127.0.0.1');
      const c = { sock, raw: '', closed: new Promise((r) => sock.once('close', r)) };
      sock.on('data', (b) => (c.raw += b.toString()));
      sock.write(first);
      return c;
    };
    const a = open('GET /hold HTTP/1.1\r\nhost: x\r\n\r\n');
    const b = open('GET /v1/health HTTP/1.1\r\nhost: x\r\n'); // its headers are not finished yet
    await new Promise((r) => setTimeout(r, 100));
    const closed = app.close();
    await new Promise((r) => setTimeout(r, 50));
    b.sock.write('\r\n'); // the request arrives during the drain
    await new Promise((r) => setTimeout(r, 100));
    release();
    await closed;
    await Promise.all([a.closed, b.closed]);
    // The request in flight when the drain began is answered, and its keep-alive connection
    // is closed after it (svcd(8) SIGTERM): Node would otherwise keep it open.
    expect(a.raw).toMatch(/^HTTP\/1\.1 200/);
    expect(a.raw.toLowerCase()).toContain('connection: close');
    expect(b.raw).toMatch(/^HTTP\/1\.1 503/);
    expect(b.raw.toLowerCase()).toContain('connection: close');
    envelope(JSON.parse(b.raw.slice(b.raw.indexOf('\r\n\r\n') + 4)), 'unavailable');
  });
});

describe('D §3, §10: a remit header over 16 KiB is a credential error, not a header-size error', () => {
  it('an X-Svc-Remit of 17,000 characters is 401 credential_invalid (token_malformed)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const res = await fetch(`${d.kernelUrl}/v1/runs/${run_id}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-remit': `krt1.${'a'.repeat(17_000)}` },
      body: JSON.stringify({ kind: 'note', payload: {}, actor: null }),
    });
    expect(res.status).toBe(401);
    const body = (await res.json()) as any;
    envelope(body, 'credential_invalid');
    expect(body.error.details).toMatchObject({ header: 'X-Svc-Remit', reason: 'token_malformed' });
  });
});

describe('D §10: requests Node refuses before fastify sees them use the envelope', () => {
  it('headers over the limit and a garbage request line are 400 request_invalid (one status per code, not 431)', async () => {
    const { d } = await startBoth('svc-431-');
    await using _ = d;
    for (const url of [d.kernelUrl, d.gatewayUrl]) {
      const res = await fetch(`${url}/v1/health?x=${'1'.repeat(70_000)}`);
      expect(res.status).toBe(400);
      const body = (await res.json()) as any; // the gateway's envelope has ok: false beside error
      expect(body.error).toMatchObject({ code: 'request_invalid', details: { path: '/headers' } });
    }
    const res = await fetch(`${d.kernelUrl}/v1/health`, { headers: { 'x-svc-remit': 'a'.repeat(70_000) } });
    expect(res.status).toBe(400);
    envelope(await res.json(), 'request_invalid');
    const { port } = new URL(d.kernelUrl!);
    const raw = await new Promise<string>((resolve) => {
      const sock = connect(Number(port), '127.0.0.1');
      let out = '';
      sock.on('data', (b) => (out += b.toString()));
      sock.on('close', () => resolve(out));
      sock.write('NOT A REQUEST\r\n\r\n');
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    envelope(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)), 'request_invalid');
  });
});

describe('D §10: a body over the limit is a 413 the client reads, even while it is still uploading', () => {
  it('fetch sees 413 payload_too_large every time, for an 8 MiB+ bundle and a 1 MiB+ policy (not EPIPE)', async () => {
    // svcd in its own process, as a client meets it (in-process, the two sides take turns).
    await using d = await spawnSvcd(['--data-dir', tempDir(), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_TOKEN: '' });
    const bodies: Array<[string, string]> = [
      ['/v1/bundles', JSON.stringify({ bundle: { pad: 'z'.repeat(9 * 1024 * 1024) } })],
      ['/v1/policies', JSON.stringify({ name: 'p', version: '1', source: 'q'.repeat(1_500_000) })],
    ];
    for (const [path, body] of bodies) {
      const outcomes: string[] = [];
      for (let i = 0; i < 12; i++) {
        try {
          const res = await fetch(`${d.kernelUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
          outcomes.push(`${res.status} ${((await res.json()) as { error: { code: string } }).error.code}`);
        } catch (err) {
          outcomes.push(`failed: ${String((err as { cause?: unknown }).cause ?? err)}`);
        }
      }
      expect(outcomes, path).toEqual(Array(12).fill('413 payload_too_large'));
    }
    // The kept connection serves the next request once the refused body has been read.
    const { hostname, port } = new URL(d.kernelUrl!);
    const raw = async (head: string, bodyBytes: number): Promise<{ socket: import('node:net').Socket; text: () => string }> => {
      const socket = connect(Number(port), hostname);
      await new Promise<void>((r, j) => socket.once('connect', () => r()).once('error', j));
      socket.on('error', () => {});
      let text = '';
      socket.on('data', (b: Buffer) => (text += b.toString('latin1')));
      socket.write(head);
      if (bodyBytes > 0) socket.write(Buffer.alloc(bodyBytes, 0x20));
      return { socket, text: () => text };
    };
    const until = async (pred: () => boolean) => {
      const end = Date.now() + 10_000;
      while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    };
    const kept = await raw(`POST /v1/policies HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`, 2 * 1024 * 1024);
    await until(() => kept.text().includes('payload_too_large'));
    kept.socket.write('GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => (kept.text().match(/HTTP\/1\.1 /g) ?? []).length === 2);
    expect(kept.text()).toMatch(/HTTP\/1\.1 413 [\s\S]*HTTP\/1\.1 200 /);
    kept.socket.destroy();
    // Requests without a body answered at once (a 404, a 405) keep their connection too.
    const plain = await raw('GET /v1/no-such-route HTTP/1.1\r\nHost: x\r\n\r\nDELETE /v1/health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', 0);
    await until(() => (plain.text().match(/HTTP\/1\.1 /g) ?? []).length === 3);
    expect(plain.text()).toMatch(/HTTP\/1\.1 404 [\s\S]*HTTP\/1\.1 405 [\s\S]*HTTP\/1\.1 200 /);
    expect(plain.text().toLowerCase()).not.toContain('connection: close');
    plain.socket.destroy();
    // A body declared past 64 MiB, or unsized (chunked), is not waited for: the connection closes.
    for (const head of [
      `POST /v1/policies HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${65 * 1024 * 1024}\r\n\r\n`,
      `POST /v1/policies HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n${' '.repeat(0x200000)}\r\n`,
    ]) {
      const cut = await raw(head, 0);
      await until(() => cut.text().includes('\r\n\r\n'));
      expect(cut.text().toLowerCase()).toMatch(/^http\/1\.1 413 [\s\S]*connection: close/);
      cut.socket.destroy();
    }
  }, 60_000);
});

describe('D §10: an unknown id is 404 not_found before the body is judged', () => {
  it('holds on every POST path with an id, for an empty, an array, a wrong and a non-JSON body', async () => {
    await using d = await startTestDaemon();
    const paths: Array<[string, string, string]> = [
      ['/runs/run_nope/events', 'run', 'run_nope'],
      ['/runs/run_nope/abandon', 'run', 'run_nope'],
      ['/runs/run_nope/resume', 'run', 'run_nope'],
      ['/runs/run_nope/replay', 'run', 'run_nope'],
      ['/leases/lse_nope/heartbeat', 'lease', 'lse_nope'],
      ['/leases/lse_nope/complete', 'lease', 'lse_nope'],
      ['/leases/lse_nope/fail', 'lease', 'lse_nope'],
      ['/leases/lse_nope/actions', 'lease', 'lse_nope'],
      ['/approvals/apr_nope', 'approval', 'apr_nope'],
      ['/remits/rmt_nope/derive', 'remit', 'rmt_nope'],
    ];
    for (const [path, resource, id] of paths) {
      for (const body of ['{}', '[]', '{"reason": 5, "error": "x", "action": 1, "decision": "maybe", "tools": "x"}', '{not json']) {
        const res = await d.kernel_(path, { method: 'POST', body });
        expect([path, body, res.status]).toEqual([path, body, 404]);
        expect(res.body.error).toMatchObject({ code: 'not_found', details: { resource, id } });
      }
    }
  });
});

describe('I 5.1: bearer auth', () => {
  it('accepts the scheme in any case and refuses a wrong token with 401 unauthorized', async () => {
    await using d = await startTestDaemon({ token: 'tok-123' });
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const res = await fetch(`${d.kernelUrl}/v1/health`, { headers: { authorization: `${scheme} tok-123` } });
      expect([scheme, res.status]).toEqual([scheme, 200]);
    }
    const bad = await fetch(`${d.kernelUrl}/v1/health`, { headers: { authorization: 'bearer tok-1234' } });
    expect(bad.status).toBe(401);
    envelope(await bad.json(), 'unauthorized');
  });
});

describe('I 4.1 kernel metrics', () => {
  it('exposes all seven metric names with samples before any run (svc_events_total per kind at 0)', async () => {
    await using d = await startTestDaemon();
    const text: string = (await d.kernel_('/metrics')).body;
    for (const name of ['svc_runs', 'svc_steps_leased_total', 'svc_step_latency_seconds', 'svc_usage_usd_total', 'svc_approvals_pending', 'svc_leases_expired_total', 'svc_events_total']) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(text).toMatch(/^svc_runs\{state="running"\} 0$/m);
    expect(text).toMatch(/^svc_events_total\{kind="run.created"\} 0$/m);
    expect(text).toMatch(/^svc_events_total\{kind="note"\} 0$/m);
    expect(text).toMatch(/^svc_step_latency_seconds_count 0$/m);
  });

  it('adds the store\'s group-commit metrics (docs/design.md "Store"): each durable commit\'s wait for its fsync, and the fsyncs', async () => {
    const { startRunDaemon, pushBundle, startRun } = await import('./run-fixtures.js');
    await using d = await startRunDaemon({ synchronous: 'FULL' }); // the default outside tests
    const sample = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await d.kernel_('/metrics')).body)?.[1]);
    const waits = await sample('svc_store_commit_sync_seconds_count');
    const fsyncs = await sample('svc_store_fsyncs_total');
    await startRun(d, await pushBundle(d)); // the bundle and the run: two durable commits at least
    expect(await sample('svc_store_commit_sync_seconds_count')).toBeGreaterThanOrEqual(waits + 2);
    expect(await sample('svc_store_fsyncs_total')).toBeGreaterThan(fsyncs);
    expect(await sample('svc_store_fsync_transactions_total')).toBeGreaterThanOrEqual(await sample('svc_store_fsyncs_total'));
    expect(await sample('svc_store_commit_sync_seconds_sum')).toBeGreaterThan(0);
  });
});

describe('JSON svc cannot carry is a 400 on the kernel too (D §10)', () => {
  it('refuses 1e400 and 5000-deep payloads on events, actions and complete with the path', async () => {
    const { startRunDaemon, pushBundle, startRun, lease } = await import('./run-fixtures.js');
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const h = { 'x-svc-lease': l.body.lease_id, 'content-type': 'application/json' };
    const huge = await d.kernel_(`/runs/${run_id}/events`, { method: 'POST', body: '{"kind":"note","payload":{"x":1e400},"actor":null}', headers: h });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/payload/x' } });
    const deep = '{"output":' + '['.repeat(5000) + ']'.repeat(5000) + ',"usage":{"tokens":0,"usd":0}}';
    const c = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { method: 'POST', body: deep, headers: { 'content-type': 'application/json' } });
    expect(c.status).toBe(400);
    expect(c.body.error.code).toBe('request_invalid');
    const a = await d.kernel_(`/leases/${l.body.lease_id}/actions`, { method: 'POST', body: '{"action":{"tool":"billing.refund","args":{"amount":1e400}}}', headers: { 'content-type': 'application/json' } });
    expect(a.status).toBe(400);
    expect(a.body.error.details.path).toBe('/action/args/amount');
  });
});

describe('D §10, RFC 8259: a body that is not UTF-8 is 400 request_invalid, never stored altered', () => {
  it('refuses invalid bytes and an encoded surrogate on the kernel and the gateway; valid UTF-8 passes as sent', async () => {
    const { d: daemon, dir, post } = await startBoth('svc-utf8-');
    await using d = daemon;
    const policy = (source: Buffer) => Buffer.concat([Buffer.from('{"name":"utf","version":"1","source":"# '), source, Buffer.from('\\nallow a when true"}')]);
    for (const bad of [Buffer.from([0xff, 0xfe]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xc3])]) {
      const res = await post(d.kernelUrl, '/policies', policy(bad));
      expect(res.status, bad.toString('hex')).toBe(400);
      const body = (await res.json()) as any;
      envelope(body, 'request_invalid');
      expect(body.error.message).toMatch(/UTF-8/);
      const gw = await post(d.gatewayUrl, '/tools/call', Buffer.concat([Buffer.from('{"tool":"test.echo","args":{"x":"'), bad, Buffer.from('"}}')]));
      expect(gw.status).toBe(400);
      expect(await gw.json()).toMatchObject({ ok: false, error: { code: 'request_invalid' } });
    }
    expect((await d.kernel_('/policies/utf/1')).status).toBe(404);
    // A byte-order mark is UTF-8 but no JSON text starts with one (RFC 8259), not even an "empty" body.
    for (const bom of [Buffer.from([0xef, 0xbb, 0xbf]), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), policy(Buffer.from('x'))])]) {
      const res = await post(d.kernelUrl, '/policies', bom);
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.message).toContain('byte-order mark');
    }
    const ok = await post(d.kernelUrl, '/policies', policy(Buffer.from('café ✓ 😀', 'utf8')));
    expect(ok.status).toBe(201);
    expect((await d.kernel_('/policies/utf/1')).body.source).toBe('# café ✓ 😀\nallow a when true');
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('D §1, RFC 7493: a body with a repeated member name, a lone surrogate or an integer a double cannot hold is 400 request_invalid', () => {
  it('on a signed bundle (the signer may have read the first "name", JSON.parse keeps the last), on the gateway too', async () => {
    const { d: daemon, dir, post } = await startBoth('svc-ijson-');
    await using d = daemon;
    const dup = await post(d.kernelUrl, '/bundles', '{"bundle":{"name":"evil","version":"1.0.0","name":"refunds"},"signature":{"key_id":"k","signature":"x"}}');
    expect(dup.status).toBe(400);
    const body = (await dup.json()) as any;
    envelope(body, 'request_invalid');
    expect(body.error.details).toEqual({ path: '/bundle/name' });
    expect(body.error.message).toBe('/bundle/name: member "name" appears twice in one object');
    const lone = await post(d.kernelUrl, '/policies', '{"name":"p","version":"1","source":"# \\ud800\\nallow a when true"}');
    expect(lone.status).toBe(400);
    expect(((await lone.json()) as any).error).toMatchObject({ code: 'request_invalid', details: { path: '/source' } });
    const gw = await post(d.gatewayUrl, '/tools/call', '{"tool":"test.echo","args":{"a":1,"a":2}}');
    expect(gw.status).toBe(400);
    expect(await gw.json()).toMatchObject({ ok: false, error: { code: 'request_invalid', details: { path: '/args/a' } } });
    // A pair of escapes that makes one character is fine.
    expect((await post(d.kernelUrl, '/policies', '{"name":"p","version":"1","source":"# \\ud83d\\ude00\\nallow a when true"}')).status).toBe(201);
    // An integer JSON.parse would change (…993 read as …992) is refused, not passed on changed:
    // a tool called with another id than the one sent could read or write another row.
    const big = await post(d.gatewayUrl, '/tools/call', '{"tool":"test.echo","remit_token":"x","args":{"invoice_id":9007199254740993}}');
    expect(big.status).toBe(400);
    expect(await big.json()).toMatchObject({ ok: false, error: { code: 'request_invalid', details: { path: '/args/invoice_id' }, message: expect.stringContaining('where a field takes text it can carry the digits as a string') } });
    // A field that takes only an integer is not told to send a string it would then refuse.
    const spend = await post(d.kernelUrl, '/remits', '{"tools":["t.*"],"scopes":[],"spend":{"tokens":9007199254740993,"usd":1},"autonomy":"autonomous","requested_by":{"id":"a","role":"agent","manager":"m"}}');
    expect(spend.status).toBe(400);
    const spendError = ((await spend.json()) as any).error;
    expect(spendError).toMatchObject({ code: 'request_invalid', details: { path: '/spend/tokens' }, message: expect.stringContaining('integers up to 9007199254740991 are exact') });
    expect(spendError.message).not.toContain('send it as a string');
    const run = await post(d.kernelUrl, '/runs', '{"bundle_id":"bnd_x","workflow":"w","input":{"n":-9007199254740993}}');
    expect(run.status).toBe(400);
    expect(((await run.json()) as any).error).toMatchObject({ code: 'request_invalid', details: { path: '/input/n' } });
    rmSync(dir, { recursive: true, force: true });
  });
});
