/**
 * Clients other than Node's fetch (docs/design.md "Listeners", "Foreign clients"): curl with
 * its defaults (a form content type on `--data`, `Expect: 100-continue` over 1 KiB, HTTP/1.0,
 * chunked uploads), Python's urllib and requests, and the raw bytes of requests Node's parser
 * or server answers by itself. Every answer is the listener's envelope with a stable code
 * (I 7.1, I 7.2, D §10), never an empty body, a dropped connection or a 500.
 * curl and python3 are run when present; a test that needs one that is missing says so and is
 * skipped.
 */
import { execFile, spawnSync } from 'node:child_process';
import { connect, type AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { installCommon, renderKernelError } from '../../daemon/http/common.js';
import { fastifyOptions } from '../../daemon/http/fastify-options.js';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Redactor, silentLogger } from '../../src/log/logger.js';
import { startTestDaemon, tempDir } from '../helpers/daemon.js';
import { APPROVER, mintRemit, propose, runToAction, startRunDaemon } from './run-fixtures.js';

function has(bin: string, args: string[]): boolean {
  return spawnSync(bin, args, { stdio: 'ignore' }).status === 0;
}
const HAS_CURL = has('curl', ['--version']);
const HAS_PYTHON = has('python3', ['--version']);
const HAS_REQUESTS = HAS_PYTHON && has('python3', ['-c', 'import requests']);
if (!HAS_CURL) console.warn('foreign-clients: curl is not installed; its tests are skipped');
if (!HAS_PYTHON) console.warn('foreign-clients: python3 is not installed; its tests are skipped');
else if (!HAS_REQUESTS) console.warn('foreign-clients: python3 has no requests module; its test is skipped (urllib still runs)');

function envelope(body: any, code: string): void {
  expect(body).toEqual({ error: { code, message: expect.any(String), details: expect.any(Object) } });
}

/** Runs a program without blocking the event loop (the daemon under test is in this process). */
function run(bin: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(bin, args, { timeout: 20_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

/** One curl exchange: status, headers (lower-case names, the last answer's) and the parsed body. */
async function curl(args: string[]): Promise<{ status: number; headers: Record<string, string>; body: any; text: string }> {
  const r = await run('curl', ['-sS', '-i', '--max-time', '10', ...args]);
  expect(r.stderr).toBe('');
  // Interim answers (100 Continue) come first: the last head is the answer's.
  const heads = r.stdout.split('\r\n\r\n');
  let i = 0;
  while (/^HTTP\/[\d.]+ 1\d\d /.test(heads[i]!)) i++;
  const [statusLine, ...lines] = heads[i]!.split('\r\n');
  const text = heads.slice(i + 1).join('\r\n\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body, text };
}

/** Writes bytes on one connection and reads until the server closes it (or 3 s pass). */
function rawExchange(url: string, bytes: string): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const sock = connect(Number(port), '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(`${out}<open>`);
    }, 3000);
    sock.on('data', (b) => (out += b.toString('utf8')));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    sock.write(bytes);
  });
}

/** The answers in a byte stream of one or more HTTP/1.1 responses with Content-Length. */
function answers(raw: string): Array<{ status: number; headers: Record<string, string>; body: any }> {
  const out: Array<{ status: number; headers: Record<string, string>; body: any }> = [];
  let rest = raw;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length'] ?? 0);
    const text = Buffer.from(rest.slice(end + 4)).subarray(0, length).toString('utf8');
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: text === '' ? null : JSON.parse(text) });
    rest = Buffer.from(rest.slice(end + 4)).subarray(length).toString('utf8');
  }
  return out;
}

async function startBoth(prefix: string) {
  const dir = tempDir(prefix);
  const config = loadGatewayConfig({ data_dir: join(dir, 'gw') }, { env: {}, redactor: new Redactor() });
  return startTestDaemon({ gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
}

describe('D §10: requests Node itself would answer without the envelope (raw bytes)', () => {
  it('a method Node does not know is 405 with Allow on a known path and 404 on an unknown one, on both listeners (docs/design.md "Listeners")', async () => {
    await using d = await startBoth('svc-foreign-method-');
    const foo = answers(await rawExchange(d.kernelUrl!, 'FOO /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(foo).toHaveLength(1);
    expect(foo[0]!.status).toBe(405);
    expect(foo[0]!.headers.allow).toBe('POST, GET, HEAD');
    envelope(foo[0]!.body, 'method_not_allowed');
    expect(foo[0]!.body.error.details).toEqual({ method: 'FOO', allowed: ['POST', 'GET', 'HEAD'] });
    // Methods are case-sensitive (RFC 9110 §9.1): `get` is another method, and the answer names the right one.
    const lower = answers(await rawExchange(d.kernelUrl!, 'get /v1/health/ HTTP/1.1\r\nHost: x\r\n\r\n'))[0]!;
    expect(lower.status).toBe(405);
    expect(lower.body.error.details).toEqual({ method: 'get', allowed: ['GET', 'HEAD'] });
    const unknown = answers(await rawExchange(d.kernelUrl!, 'FOO /v1/nothing-here HTTP/1.1\r\nHost: x\r\n\r\n'))[0]!;
    expect(unknown.status).toBe(404);
    envelope(unknown.body, 'not_found');
    expect(unknown.body.error.details).toEqual({ resource: 'route', id: '/v1/nothing-here' });
    const gw = answers(await rawExchange(d.gatewayUrl!, 'FOO /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n'))[0]!;
    expect(gw.status).toBe(405);
    expect(gw.body).toMatchObject({ ok: false, error: { code: 'method_not_allowed', details: { method: 'FOO', allowed: ['GET', 'HEAD'] } } });
  });

  it('CONNECT is 405 method_not_allowed, not a connection dropped unanswered', async () => {
    await using d = await startBoth('svc-foreign-connect-');
    for (const url of [d.kernelUrl!, d.gatewayUrl!]) {
      const raw = await rawExchange(url, 'CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n');
      const [a] = answers(raw);
      expect(a?.status, raw).toBe(405);
      expect(a!.body.error).toMatchObject({ code: 'method_not_allowed', details: { method: 'CONNECT', allowed: [] } });
    }
    // The listener still serves.
    expect((await fetch(`${d.kernelUrl}/v1/health`)).status).toBe(200);
  });

  it('an HTTP/1.1 request without Host is 400 request_invalid in the envelope (RFC 9112 §3.2); HTTP/1.0 needs none', async () => {
    await using d = await startBoth('svc-foreign-host-');
    for (const url of [d.kernelUrl!, d.gatewayUrl!]) {
      const [a] = answers(await rawExchange(url, 'GET /v1/health HTTP/1.1\r\n\r\n'));
      expect(a!.status).toBe(400);
      expect(a!.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/headers/host' } });
    }
    const [ok] = answers(await rawExchange(d.kernelUrl!, 'GET /v1/health HTTP/1.0\r\n\r\n'));
    expect(ok!.status).toBe(200);
    expect(ok!.body.ok).toBe(true);
  });

  it('an Expect other than 100-continue is 400 request_invalid naming it (not Node\'s empty 417)', async () => {
    await using d = await startBoth('svc-foreign-expect-');
    for (const url of [d.kernelUrl!, d.gatewayUrl!]) {
      const [a] = answers(await rawExchange(url, 'POST /v1/leases HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'));
      expect(a!.status).toBe(400);
      expect(a!.headers.connection).toBe('close');
      expect(a!.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/headers/expect' } });
      expect(a!.body.error.message).toContain('"foo"');
    }
  });

  it('HTTP/2 prior knowledge, an unknown HTTP version and a bad Content-Length say what is wrong', async () => {
    await using d = await startBoth('svc-foreign-parser-');
    const h2 = answers(await rawExchange(d.kernelUrl!, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'))[0]!;
    expect(h2.status).toBe(400);
    envelope(h2.body, 'request_invalid');
    expect(h2.body.error.message).toMatch(/HTTP\/2 is not served/);
    const v3 = answers(await rawExchange(d.kernelUrl!, 'GET /v1/health HTTP/3.0\r\nHost: x\r\n\r\n'))[0]!;
    expect(v3.status).toBe(400);
    expect(v3.body.error.message).toMatch(/HTTP version/);
    const cl = answers(await rawExchange(d.kernelUrl!, 'POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'))[0]!;
    expect(cl.status).toBe(400);
    envelope(cl.body, 'request_invalid');
    expect(cl.body.error.message).toMatch(/Content-Length/);
    // A chunked body that breaks its coding: the route waiting for it never answers, so the
    // refusal goes out at once rather than after the answers pending on the connection.
    const started = Date.now();
    const chunk = await rawExchange(d.kernelUrl!, 'POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n');
    const [bad] = answers(chunk);
    expect(bad?.status, chunk).toBe(400);
    envelope(bad!.body, 'request_invalid');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('pipelined requests are answered in order on one connection; HTTP/1.0 keep-alive is honoured', async () => {
    await using d = await startBoth('svc-foreign-pipeline-');
    const raw = await rawExchange(
      d.kernelUrl!,
      'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n' +
        'GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n' +
        'POST /v1/leases/nope/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n' +
        'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n' +
        // A body that does not parse ends the connection (fastify's rule: it says Connection: close).
        'POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n{',
    );
    const got = answers(raw);
    expect(got.map((a) => a.status)).toEqual([200, 404, 404, 200, 400]);
    expect(got.map((a) => a.body?.error?.code ?? null)).toEqual([null, 'not_found', 'not_found', null, 'request_invalid']);
    expect(got[4]!.headers.connection).toBe('close');
    // A request the parser refuses after pipelined ones: those are answered first, in order,
    // and the refusal names the refused request's method, not the first one's.
    const refused = answers(
      await rawExchange(d.kernelUrl!, 'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/runs/nope HTTP/1.1\r\nHost: x\r\n\r\nFOO /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n'),
    );
    expect(refused.map((a) => a.status)).toEqual([200, 404, 405]);
    expect(refused[2]!.body.error.details).toEqual({ method: 'FOO', allowed: ['POST', 'GET', 'HEAD'] });
    const ten = answers(await rawExchange(d.kernelUrl!, 'GET /v1/health HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /v1/health HTTP/1.0\r\n\r\n'));
    expect(ten.map((a) => [a.status, a.headers.connection])).toEqual([
      [200, 'keep-alive'],
      [200, 'close'],
    ]);
  });

  it('a body in another charset is 400 request_invalid naming the label (D §10, RFC 8259: JSON is UTF-8)', async () => {
    await using d = await startBoth('svc-foreign-charset-');
    // A Java client's ISO-8859-1 default: "é" is one byte 0xE9, not UTF-8.
    const body = Buffer.concat([Buffer.from('{"worker_id":"w'), Buffer.from([0xe9]), Buffer.from('","kinds":["model"]}')]);
    const res = await fetch(`${d.kernelUrl}/v1/leases`, { method: 'POST', headers: { 'content-type': 'application/json; charset=ISO-8859-1' }, body });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as any;
    envelope(answer, 'request_invalid');
    expect(answer.error.message).toContain('charset=ISO-8859-1');
    // An ASCII body under the same label is the same bytes in UTF-8: served.
    const ascii = await fetch(`${d.kernelUrl}/v1/leases`, { method: 'POST', headers: { 'content-type': 'application/json; charset=ISO-8859-1' }, body: '{"worker_id":"w","kinds":["model"],"wait_seconds":0}' });
    expect(ascii.status).toBe(204);
  });

  it('a refused upload from a client that asked to close is read to its end before the close: the client reads the 413, not EPIPE (docs/design.md "Listeners")', async () => {
    await using d = await startBoth('svc-foreign-close-');
    const { port } = new URL(d.kernelUrl!);
    const size = 6 * 1024 * 1024; // over the 1 MiB of /policies, several socket buffers long
    for (const version of ['HTTP/1.1\r\nConnection: close', 'HTTP/1.0']) {
      const got = await new Promise<{ text: string; error: string | null }>((resolve) => {
        const sock = connect(Number(port), '127.0.0.1');
        let text = '';
        let error: string | null = null;
        sock.on('data', (b) => (text += b.toString('utf8')));
        sock.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
        sock.on('close', () => resolve({ text, error }));
        sock.write(`POST /v1/policies ${version}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
        sock.end(Buffer.alloc(size, 0x20));
      });
      expect(got.error, version).toBeNull();
      const [a] = answers(got.text);
      expect(a!.status, version).toBe(413);
      expect(a!.headers.connection).toBe('close');
      envelope(a!.body, 'payload_too_large');
    }
  });

  it('an answer to a refused request line is redacted like every other body: a registered secret in the path is never echoed (docs/design.md "Listeners")', async () => {
    const secret = 'sk-live-0123456789abcdef';
    const redactor = new Redactor();
    redactor.add(secret);
    const app = Fastify(fastifyOptions());
    installCommon(app, { token: null, render: renderKernelError, logger: silentLogger, redactor });
    app.get('/v1/health', async () => ({ ok: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      const exchange = (line: string) =>
        new Promise<string>((resolve) => {
          const sock = connect(port, '127.0.0.1');
          let out = '';
          sock.on('data', (b) => (out += b.toString('utf8')));
          sock.on('error', () => undefined);
          sock.on('close', () => resolve(out));
          sock.end(`${line}\r\nHost: x\r\nConnection: close\r\n\r\n`);
        });
      // A method the router knows: 404 through onSend, redacted.
      const routed = answers(await exchange(`GET /v1/${secret} HTTP/1.1`));
      expect(routed.map((a) => a.status)).toEqual([404]);
      // One Node's parser refuses (renderClientError): the same 404, redacted too.
      const refused = answers(await exchange(`FOO /v1/${secret} HTTP/1.1`));
      expect(refused.map((a) => a.status)).toEqual([404]);
      expect(JSON.stringify(refused[0]!.body)).not.toContain(secret);
      expect(refused[0]!.body.error.message).toContain('/v1/');
    } finally {
      await app.close();
    }
  });

  it('a body that stalls after its request was answered ends the connection at the request timeout without a second answer, kept alive or asked to close', async () => {
    const app = Fastify(fastifyOptions());
    installCommon(app, { token: 'tok', render: renderKernelError, logger: silentLogger });
    app.post('/v1/echo', async (req) => req.body);
    // The request timeout, shortened as in os-limits.test.ts.
    app.server.requestTimeout = 600;
    app.server.headersTimeout = 600;
    (app.server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval = 100;
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      // Kept alive; and asked to close, whose close waits for the body's end (closeAfterBody).
      for (const version of ['HTTP/1.1', 'HTTP/1.1\r\nConnection: close', 'HTTP/1.0']) {
        const { raw, closedBy } = await new Promise<{ raw: string; closedBy: 'server' | 'client' }>((resolve) => {
          const sock = connect(port, '127.0.0.1');
          let out = '';
          sock.on('data', (b) => (out += b.toString('utf8')));
          sock.on('error', () => undefined);
          const giveUp = setTimeout(() => {
            resolve({ raw: out, closedBy: 'client' });
            sock.destroy();
          }, 5000);
          sock.on('close', () => {
            clearTimeout(giveUp);
            resolve({ raw: out, closedBy: 'server' });
          });
          // No bearer: 401 before the body; the body then never comes whole.
          sock.write(`POST /v1/echo ${version}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`);
        });
        // svcd ends it (the timeout), not the client giving up: no descriptor held for good.
        expect(closedBy, version).toBe('server');
        const got = answers(raw);
        expect(got.map((a) => a.status), version).toEqual([401]);
        expect(raw.match(/HTTP\/1\.1 /g), version).toHaveLength(1);
      }
    } finally {
      await app.close();
    }
  });
});

describe.skipIf(!HAS_CURL)('curl as a client (I 4.1, I 7.1, D §10)', () => {
  it('its defaults reach the routes: --data (a form content type), Expect: 100-continue over 1 KiB, chunked, HTTP/1.0, --compressed', async () => {
    await using d = await startRunDaemon();
    const base = `${d.kernelUrl}/v1`;
    const remit = {
      tools: ['billing.*'],
      scopes: ['sql:table:*'],
      grants: [],
      spend: { tokens: 1000, usd: 1 },
      autonomy: 'supervised',
      ttl_seconds: 3600,
      policy_set: [],
      requested_by: { id: 'ana', role: 'agent', manager: 'finance' },
    };
    // `--data` labels the body application/x-www-form-urlencoded; svc reads any label as JSON.
    const form = await curl(['-X', 'POST', `${base}/remits`, '--data', JSON.stringify(remit)]);
    expect(form.status).toBe(201);
    expect(form.body.remit_id).toMatch(/^rmt_/);
    // A body over 1 KiB: curl asks for 100-continue first; with `Expect:` it does not.
    const big = JSON.stringify({ name: 'big', version: '1', source: `# ${'x'.repeat(3000)}\nallow all\n  when true\n` });
    const withExpect = await curl(['-X', 'POST', `${base}/policies`, '-H', 'Content-Type: application/json', '--data-binary', big]);
    expect(withExpect.status).toBe(201);
    const noExpect = await curl(['-X', 'POST', `${base}/policies`, '-H', 'Content-Type: application/json', '-H', 'Expect:', '--data-binary', big.replace('"1"', '"2"')]);
    expect(noExpect.status).toBe(201);
    const chunked = await curl(['-X', 'POST', `${base}/policies`, '-H', 'Transfer-Encoding: chunked', '--data-binary', big.replace('"1"', '"3"')]);
    expect(chunked.status).toBe(201);
    // The same body under a label that is not JSON's: read as JSON all the same.
    for (const type of ['application/json; charset=utf-8', 'APPLICATION/JSON', 'application/vnd.foo+json', 'text/plain']) {
      const r = await curl(['-X', 'POST', `${base}/remits`, '-H', `Content-Type: ${type}`, '--data', JSON.stringify(remit)]);
      expect(r.status, type).toBe(201);
    }
    const h10 = await curl(['--http1.0', `${base}/health`]);
    expect(h10.status).toBe(200);
    expect(h10.body.ok).toBe(true);
    const zipped = await curl(['--compressed', `${base}/runs?limit=1`]);
    expect(zipped.status).toBe(200);
    expect(zipped.body).toEqual({ runs: [], next: null });
    // A base URL ending in `/` joined to `/v1/...`: the doubled slash names the same route.
    expect((await curl([`${d.kernelUrl}//v1/health`])).status).toBe(200);
    const doubled = await curl(['-X', 'PUT', `${d.kernelUrl}//v1//health`]);
    expect(doubled.status).toBe(405);
    expect(doubled.headers.allow).toBe('GET, HEAD');
    // Trailing slash and query string on a path; a percent-encoded id.
    expect((await curl([`${base}/health/?probe=1`])).status).toBe(200);
    const encoded = await curl([`${base}/remits/${encodeURIComponent(form.body.remit_id).replace('r', '%72')}`]);
    expect(encoded.status).toBe(200);
  });

  it('a form that is not JSON is 400 request_invalid naming the form content type', async () => {
    await using d = await startBoth('svc-foreign-form-');
    const r = await curl(['-X', 'POST', `${d.kernelUrl}/v1/remits`, '--data', 'tools=a&scopes=b']);
    expect(r.status).toBe(400);
    envelope(r.body, 'request_invalid');
    expect(r.body.error.message).toMatch(/not valid JSON.*application\/x-www-form-urlencoded/);
    const multipart = await curl(['-X', 'POST', `${d.gatewayUrl}/v1/tools/call`, '-F', 'a=b']);
    expect(multipart.status).toBe(400);
    expect(multipart.body.error.message).toMatch(/multipart\/form-data/);
  });

  it('POSTs that take no body accept none, an empty one, and Content-Length: 0 under a JSON label', async () => {
    await using d = await startRunDaemon();
    const base = `${d.kernelUrl}/v1`;
    const { run_id, lease } = await runToAction(d);
    for (const extra of [[], ['-H', 'Content-Type: application/json', '--data', ''], ['-H', 'Content-Type: application/json', '-H', 'Content-Length: 0']]) {
      const hb = await curl(['-X', 'POST', `${base}/leases/${lease.lease_id}/heartbeat`, ...extra]);
      expect(hb.status, extra.join(' ')).toBe(200);
      expect(hb.body.expires_at).toEqual(expect.any(String));
      const replay = await curl(['-X', 'POST', `${base}/runs/${run_id}/replay`, ...extra]);
      expect(replay.status, extra.join(' ')).toBe(200);
      expect(replay.body.chain_valid).toBe(true);
      // Resume takes `{actor}` or nothing: a run that is not parked is 409, not a 400 for the body.
      const resume = await curl(['-X', 'POST', `${base}/runs/${run_id}/resume`, ...extra]);
      expect(resume.status, extra.join(' ')).toBe(409);
      envelope(resume.body, 'invalid_state');
    }
    // An approval decided with curl's defaults (a form content type, 100-continue not needed).
    const proposed = await propose(d, lease.lease_id, { tool: 'billing.refund', args: { amount: 150 } });
    expect(proposed.body.decision).toBe('approval_required');
    // A decision needs a body: none is 400 request_invalid, not a 500.
    const bare = await curl(['-X', 'POST', `${base}/approvals/${proposed.body.approval_id}`]);
    expect(bare.status).toBe(400);
    envelope(bare.body, 'request_invalid');
    const approved = await curl(['-X', 'POST', `${base}/approvals/${proposed.body.approval_id}`, '--data', JSON.stringify({ decision: 'approved', actor: APPROVER, reason: 'ok' })]);
    expect(approved.status).toBe(200);
    expect(approved.body.run_id).toBe(run_id);
    // Abandon needs a reason: an empty body is 400 naming it.
    const abandon = await curl(['-X', 'POST', `${base}/runs/${run_id}/abandon`, '-H', 'Content-Type: application/json', '--data', '']);
    expect(abandon.status).toBe(400);
    envelope(abandon.body, 'request_invalid');
  });

  it('odd methods and HEAD: 405 with Allow in the envelope, HEAD without a body', async () => {
    await using d = await startBoth('svc-foreign-methods-');
    const base = `${d.kernelUrl}/v1`;
    for (const method of ['OPTIONS', 'PROPFIND', 'FOO', 'CONNECT']) {
      const r = await curl(['-X', method, `${base}/health`]);
      expect(r.status, method).toBe(405);
      envelope(r.body, 'method_not_allowed');
    }
    const head = await curl(['-I', `${base}/health`]);
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const expect417 = await curl(['-X', 'POST', `${base}/leases`, '-H', 'Expect: foo', '--data', '{}']);
    expect(expect417.status).toBe(400);
    envelope(expect417.body, 'request_invalid');
  });

  it('the bearer scheme in any case, with more than one space; a wrong or Basic credential is 401 (I 5.1)', async () => {
    await using d = await startTestDaemon({ token: 'tok-foreign-1' });
    const url = `${d.kernelUrl}/v1/health`;
    for (const header of ['Authorization: Bearer tok-foreign-1', 'authorization: bearer tok-foreign-1', 'Authorization: BEARER  tok-foreign-1']) {
      expect((await curl(['-H', header, url])).status, header).toBe(200);
    }
    expect((await curl(['--oauth2-bearer', 'tok-foreign-1', url])).status).toBe(200);
    for (const args of [['-u', ':tok-foreign-1'], ['-H', 'Authorization: Bearer tok-foreign-2'], []]) {
      const r = await curl([...args, url]);
      expect(r.status, args.join(' ')).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer');
      envelope(r.body, 'unauthorized');
    }
  });
});

describe.skipIf(!HAS_PYTHON)('Python as a client (I 4.1, I 7.1)', () => {
  it('urllib: a JSON POST, a form-labelled POST, an empty POST, and an error answer read from HTTPError', async () => {
    await using d = await startRunDaemon();
    const remit = await mintRemit(d);
    const script = `
import json, sys, urllib.request, urllib.error
base = sys.argv[1]
out = {}
def call(name, req):
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            out[name] = [r.status, json.loads(text) if text else None]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, json.loads(e.read())]
call('get', base + '/remits/' + sys.argv[2])
call('form', urllib.request.Request(base + '/leases', data=json.dumps({"worker_id": "py", "kinds": ["model"], "wait_seconds": 0}).encode()))
call('json', urllib.request.Request(base + '/leases', data=b'{"worker_id": "py", "kinds": ["bogus"]}', headers={"Content-Type": "application/json"}))
call('empty', urllib.request.Request(base + '/leases/nope/heartbeat', method='POST'))
call('missing', base + '/runs/nope')
print(json.dumps(out))
`;
    const r = await run('python3', ['-c', script, `${d.kernelUrl}/v1`, remit.remit_id]);
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout);
    expect(out.get[0]).toBe(200);
    expect(out.form).toEqual([204, null]); // idle: no step to lease
    expect(out.json[0]).toBe(400);
    envelope(out.json[1], 'request_invalid');
    expect(out.empty[0]).toBe(404);
    envelope(out.empty[1], 'not_found');
    expect(out.missing[0]).toBe(404);
    expect(out.missing[1].error.details).toEqual({ resource: 'run', id: 'nope' });
  });

  it('urllib (which always sends Connection: close) reads the 413 of a bundle over 8 MiB, every time', async () => {
    await using d = await startBoth('svc-foreign-urllib-413-');
    const script = `
import json, sys, urllib.request, urllib.error
body = b'{"bundle": {"x": "' + b'a' * (9 * 1024 * 1024) + b'"}}'
out = []
for i in range(3):
    try:
        urllib.request.urlopen(urllib.request.Request(sys.argv[1] + '/bundles', data=body, headers={"Content-Type": "application/json"}), timeout=20)
        out.append('accepted')
    except urllib.error.HTTPError as e:
        out.append([e.code, json.loads(e.read())["error"]["code"]])
    except Exception as e:
        out.append(repr(e))
print(json.dumps(out))
`;
    const r = await run('python3', ['-c', script, `${d.kernelUrl}/v1`]);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([
      [413, 'payload_too_large'],
      [413, 'payload_too_large'],
      [413, 'payload_too_large'],
    ]);
  });

  it.skipIf(!HAS_REQUESTS)('requests: json=, data= (a form), no body, params=, and a bearer header', async () => {
    await using d = await startRunDaemon({}, 'tok-py');
    const script = `
import json, sys, requests
base = sys.argv[1]
h = {"Authorization": "bearer tok-py"}
remit = {"tools": ["billing.*"], "scopes": ["sql:table:*"], "grants": [], "spend": {"tokens": 10, "usd": 1}, "autonomy": "observe", "ttl_seconds": 60, "policy_set": [], "requested_by": {"id": "ana", "role": "agent", "manager": "finance"}}
out = {}
r = requests.post(base + '/remits', json=remit, headers=h); out['json'] = [r.status_code, r.json()]
r = requests.post(base + '/remits', data=json.dumps(remit), headers=h); out['data'] = [r.status_code, r.json()]
r = requests.post(base + '/leases/nope/heartbeat', headers=h); out['empty'] = [r.status_code, r.json()]
r = requests.get(base + '/runs', params={"limit": "x"}, headers=h); out['params'] = [r.status_code, r.json()]
r = requests.get(base + '/runs/', params={"limit": 1}, headers=h); out['list'] = [r.status_code, r.json()]
r = requests.get(base + '/health'); out['noauth'] = [r.status_code, r.json()]
print(json.dumps(out))
`;
    const r = await run('python3', ['-c', script, `${d.kernelUrl}/v1`]);
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout);
    expect(out.json[0]).toBe(201);
    expect(out.data[0]).toBe(201);
    expect(out.empty[0]).toBe(404);
    envelope(out.empty[1], 'not_found');
    expect(out.params[0]).toBe(400);
    expect(out.params[1].error.details).toEqual({ path: '/querystring/limit' });
    expect(out.list).toEqual([200, { runs: [], next: null }]);
    expect(out.noauth[0]).toBe(401);
    envelope(out.noauth[1], 'unauthorized');
  });
});
