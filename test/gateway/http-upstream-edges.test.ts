/**
 * Upstream edges of the http connector. An answer whose body is cut off mid-way is the
 * upstream's failure (502 upstream_error, counted by the breaker), not a gateway bug logged at
 * error level. And it never follows a redirect from https down to http (svc-gateway(5) "http",
 * decisions §9): the config's credential headers would cross the network in the clear. A
 * redirect that stays on https is followed as before. Real peers: an https server with a
 * self-signed certificate made by openssl for this run, and a plain http server that records
 * what reaches it. The certificate is trusted through NODE_TLS_REJECT_UNAUTHORIZED=0, set in
 * this file's own process only while it runs.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { Redactor } from '../../src/log/logger.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

const SECRET = 'tls-downgrade-secret-5f1c2a';
const signer = testSigner();
const plainHits: IncomingMessage['headers'][] = [];
let plain: Server;
let secure: Server;
let gw: TestGateway;
let plainUrl = '';
let secureUrl = '';
const redactor = new Redactor();
const log = capturedLogger(redactor);
const rejectUnauthorized = process.env.NODE_TLS_REJECT_UNAUTHORIZED;

function listen(server: Server): Promise<string> {
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(String((server.address() as AddressInfo).port))));
}

beforeAll(async () => {
  const dir = tempDir('svc-gw-tls-');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  plain = createHttpServer((req, res) => {
    plainHits.push(req.headers);
    if (req.url === '/start') res.writeHead(302, { location: '/landed' }).end();
    else if (req.url === '/cut') {
      // Promises 100 bytes, sends 4, and hangs up.
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
      res.write('part', () => res.socket?.destroy());
    }
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"plain":true}');
  });
  plainUrl = `http://127.0.0.1:${await listen(plain)}`;
  secure = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (req, res) => {
    if (req.url === '/down') res.writeHead(302, { location: `${plainUrl}/landed` }).end();
    else if (req.url === '/across') res.writeHead(302, { location: '/json' }).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ secure: true, key_seen: req.headers['x-api-key'] === SECRET }));
  });
  secureUrl = `https://127.0.0.1:${await listen(secure)}`;
  gw = await startGateway({
    keys: signer,
    env: { WEB_KEY: SECRET },
    redactor,
    logger: log.logger,
    doc: { connectors: [{ name: 'web', type: 'http', allowed_hosts: ['127.0.0.1'], headers: { 'x-api-key': '${WEB_KEY}' }, timeout_ms: 5000 }] },
  });
});

afterAll(async () => {
  if (rejectUnauthorized === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  else process.env.NODE_TLS_REJECT_UNAUTHORIZED = rejectUnauthorized;
  await gw?.close();
  await Promise.all([plain, secure].map((s) => new Promise((r) => s?.close(r))));
});

describe('http connector redirects and TLS (svc-gateway(5) "http", D §9)', () => {
  const token = () => mintToken(signer, remitPayload(signer, { tools: ['web.*'], scopes: ['http:host:127.0.0.1'], autonomy: 'autonomous' }));

  it('an https answer redirecting to http on an allowed host is returned as the 3xx, and nothing is sent in the clear', async () => {
    const res = await gw.call({ remit_token: token(), tool: 'web.get', args: { url: `${secureUrl}/down` } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.result).toMatchObject({ status: 302, headers: { location: `${plainUrl}/landed` } });
    expect(plainHits).toEqual([]);
    expect(res.text).not.toContain(SECRET);
  });

  it('a redirect that stays on https is followed, with the credential', async () => {
    const res = await gw.call({ remit_token: token(), tool: 'web.get', args: { url: `${secureUrl}/across` } });
    expect(res.body.result).toMatchObject({ status: 200, json: { secure: true, key_seen: true } });
  });

  it('http to http on an allowed host is still followed (nothing to downgrade)', async () => {
    const before = plainHits.length;
    const res = await gw.call({ remit_token: token(), tool: 'web.get', args: { url: `${plainUrl}/start` } });
    expect(res.body.result).toMatchObject({ status: 200, json: { plain: true } });
    const hits = plainHits.slice(before);
    expect(hits.length).toBe(2);
    expect(hits.every((h) => h['x-api-key'] === SECRET)).toBe(true);
  });

  it('an answer cut off mid-body is a 502 upstream_error, logged as the upstream failing, not as a gateway bug', async () => {
    const res = await gw.call({ remit_token: token(), tool: 'web.get', args: { url: `${plainUrl}/cut` } });
    expect(res.status, res.text).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'upstream_error', message: expect.stringContaining('the answer was cut off'), details: { status: 200 } });
    expect(log.text()).not.toContain('unexpected error');
    expect(log.text()).not.toContain(SECRET);
  });
});
