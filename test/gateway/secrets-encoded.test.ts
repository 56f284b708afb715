/**
 * Interface 2.10: "The substituted value never appears in logs, responses or events", for an
 * upstream that echoes a credential transformed: upper- or lower-cased, in another Unicode
 * normalization form, base64 (standard and URL-safe, padded or not, at any offset: a Basic
 * credential), hex, percent-encoded byte by byte, as HTML entities. The covered spellings and
 * why the others are not: docs/design.md (Secrets), svc-gateway(5) SECRETS. Each check searches
 * the outputs for every covered form of the value, worked out here, not by the code under test.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerSecret } from '../../src/gateway/config.js';
import { Redactor, type Logger } from '../../src/log/logger.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

/** 10 bytes: long enough for the transformed spellings (8 bytes), too short for them before. */
const BEARER = 'Kq7-zX2w9P';
/** A Basic credential's password (its base64 sits at an offset within `user:password`). */
const PASSWORD = 'Tr0ub4dor&3';

/** `v` as each covered encoding spells it. */
function coveredForms(v: string): Record<string, string[]> {
  const bytes = Buffer.from(v, 'utf8');
  const base64 = (b: Buffer) => [0, 1, 2].flatMap((shift) => {
    const enc = Buffer.concat([Buffer.alloc(shift), b]).toString('base64');
    // The characters made of the value's bits alone, at each of the three offsets.
    const core = enc.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + b.length)) / 6));
    return [core, core.replaceAll('+', '-').replaceAll('/', '_')];
  });
  return {
    asIs: [v],
    case: [v.toUpperCase(), v.toLowerCase(), [...v].map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join('')],
    base64: [...base64(bytes), ...base64(Buffer.from(v.toUpperCase()))],
    hex: [bytes.toString('hex'), bytes.toString('hex').toUpperCase()],
    percent: [[...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''), [...bytes].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('')],
    html: [[...v].map((c) => `&#${c.codePointAt(0)};`).join(''), [...v].map((c) => `&#x${c.codePointAt(0)!.toString(16)};`).join(''), v.replaceAll('&', '&amp;')],
  };
}
const everyForm = (v: string) => Object.values(coveredForms(v)).flat();

const signer = testSigner();
const token = (run: string) => mintToken(signer, remitPayload(signer, { tools: ['web.*'], scopes: ['http:host:127.0.0.1'], autonomy: 'autonomous', run }));

let server: Server;
let port = 0;
let gw: TestGateway;
let logger: Logger;
let logText = () => '';
const upstreamSaid: string[] = [];

beforeAll(async () => {
  // A careless upstream: it quotes the request's credentials back in every way it knows.
  server = createServer((req, res) => {
    const auth = String(req.headers.authorization);
    const basic = String(req.headers['x-basic']);
    const body = [
      `upper: ${auth.toUpperCase()}`,
      `lower: ${auth.toLowerCase()}`,
      `base64: ${Buffer.from(auth).toString('base64')}`,
      `base64url: ${Buffer.from(auth).toString('base64url')}`,
      `base64 of upper: ${Buffer.from(auth.toUpperCase()).toString('base64')}`,
      `hex: ${Buffer.from(auth).toString('hex')}`,
      `percent: ${[...Buffer.from(auth)].map((b) => `%${b.toString(16)}`).join('')}`,
      `html: ${[...auth].map((c) => `&#x${c.charCodeAt(0).toString(16)};`).join('')}`,
      `basic: ${basic} ${basic.toUpperCase()}`,
      `decoded, HTML-escaped: ${Buffer.from(basic.slice(6), 'base64').toString().replaceAll('&', '&amp;')}`,
    ].join('\n');
    upstreamSaid.push(body);
    res.writeHead(req.url === '/fail' ? 400 : 200, { 'content-type': 'text/plain', 'x-echo': Buffer.from(auth).toString('hex').toUpperCase() }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  const redactor = new Redactor();
  const log = capturedLogger(redactor);
  logger = log.logger;
  logText = log.text;
  gw = await startGateway({
    keys: signer,
    redactor,
    logger,
    env: { BEARER, BASIC: Buffer.from(`svc-user:${PASSWORD}`).toString('base64'), PASSWORD },
    doc: { connectors: [{ name: 'web', type: 'http', allowed_hosts: ['127.0.0.1'], headers: { authorization: 'Bearer ${BEARER}', 'x-basic': 'Basic ${BASIC}', 'x-password': '${PASSWORD}' } }] },
  });
});

afterAll(async () => {
  await gw?.close();
  await new Promise<void>((r) => server?.close(() => r()));
});

describe('an upstream echoing a ${VAR} credential encoded or case-changed (I 2.10)', () => {
  it('neither the /tools/call answer, the logs nor the run events show it in any covered form', async () => {
    const ok = await gw.call({ remit_token: token('run_enc'), run_id: 'run_enc', tool: 'web.get', args: { url: `http://127.0.0.1:${port}/echo` } });
    expect(ok.status, ok.text).toBe(200);
    const failed = await gw.call({ remit_token: token('run_enc'), run_id: 'run_enc', tool: 'web.get', args: { url: `http://127.0.0.1:${port}/fail` } });
    // The upstream really echoed, in every form (each line redacted, not dropped).
    expect(upstreamSaid.length).toBeGreaterThanOrEqual(2);
    for (const label of ['upper', 'lower', 'base64', 'base64url', 'base64 of upper', 'hex', 'percent', 'html']) expect(ok.body.result.body).toMatch(new RegExp(`^${label}: .*\\[REDACTED\\]`, 'm'));
    expect(ok.body.result.headers['x-echo']).toContain('[REDACTED]');
    // What a connector's error would log: the upstream's words as it said them.
    logger.warn('upstream said', { body: upstreamSaid.join('\n') });
    expect(logText()).toContain('upstream said');
    const outputs = { answer: ok.text, failure: failed.text, logs: logText(), events: JSON.stringify(gw.link.events) };
    expect(gw.link.events.length).toBeGreaterThan(0);
    for (const [where, text] of Object.entries(outputs)) {
      for (const secret of [BEARER, PASSWORD]) {
        for (const [encoding, forms] of Object.entries(coveredForms(secret))) for (const form of forms) expect(text, `${where}: ${encoding} ${form}`).not.toContain(form);
      }
    }
  });
});

describe('Redactor: encoded and case-changed spellings (src/log/secret-spellings.ts; svc-gateway(5) SECRETS)', () => {
  const SECRET = 'sk-live-Wor9dX2a/B+q=7';
  const r = new Redactor();
  registerSecret(r, SECRET);

  for (const [encoding, forms] of Object.entries(coveredForms(SECRET)).filter(([e]) => e !== 'asIs')) {
    it(`${encoding}: every covered spelling is replaced whole, the text around it kept`, () => {
      for (const form of forms) expect(r.redact(`before ${form} after`), form).toBe('before [REDACTED] after');
    });
  }

  it('base64 at any offset: a Basic credential user:password of an 8-byte password, padded or not', () => {
    const b = new Redactor();
    registerSecret(b, 'pass-123');
    for (const user of ['u', 'us', 'use', 'user']) {
      const basic = Buffer.from(`${user}:pass-123`);
      for (const encoded of [basic.toString('base64'), basic.toString('base64url'), basic.toString('base64').replace(/=+$/, '')]) expect(b.redact(`Basic ${encoded}`), encoded).toContain('[REDACTED]');
    }
  });

  it('percent-encoded with lower-case hex, and JSON \\uXXXX for every character', () => {
    const p = new Redactor();
    registerSecret(p, 'a/b c'); // short: its letters only as they are
    expect(p.redact('q=a%2fb%20c')).toBe('q=[REDACTED]');
    expect(r.redact(`"${[...SECRET].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`)).toBe('"[REDACTED]"');
  });

  it('another Unicode normalization form: NFD of an NFC value, NFC of an NFD one, NFKC', () => {
    const nfc = 'Crème-brûlée-42';
    const n = new Redactor();
    registerSecret(n, nfc);
    expect(n.redact(`x ${nfc.normalize('NFD')} y`)).toBe('x [REDACTED] y');
    expect(n.redact(`x ${nfc.normalize('NFD').toUpperCase()} y`)).toBe('x [REDACTED] y');
    const d = new Redactor();
    registerSecret(d, nfc.normalize('NFD'));
    expect(d.redact(`x ${nfc} y`)).toBe('x [REDACTED] y');
    const k = new Redactor();
    registerSecret(k, 'ﬁle-key-Ⅻ-2024');
    expect(k.redact('x file-key-XII-2024 y')).toBe('x [REDACTED] y');
  });

  it('HTML: named entities for markup characters, numeric quotes and slash as OWASP writes them', () => {
    const h = new Redactor();
    const secret = `p'a"s<s&w/rd`;
    registerSecret(h, secret);
    const owasp = secret.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#x27;').replaceAll('/', '&#x2F;');
    expect(h.redact(`<p>${owasp}</p>`)).toBe('<p>[REDACTED]</p>');
    expect(h.redact(`<a title="${secret.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;')}">`)).toBe('<a title="[REDACTED]">');
  });

  it('unrelated text with similar characters is left as it is, beside the value it resembles', () => {
    const near = 'sk-live-Wor9dX2a/B+q=8';
    const pairs: Array<[string, string]> = [
      [SECRET.toUpperCase(), near.toUpperCase()],
      [Buffer.from(SECRET).toString('base64'), Buffer.from(near).toString('base64')],
      [Buffer.from(SECRET).toString('hex'), Buffer.from(near).toString('hex')],
      [[...SECRET].map((c) => `&#${c.charCodeAt(0)};`).join(''), [...near].map((c) => `&#${c.charCodeAt(0)};`).join('')],
      [[...Buffer.from(SECRET)].map((b) => `%${b.toString(16)}`).join(''), [...Buffer.from(near)].map((b) => `%${b.toString(16)}`).join('')],
    ];
    for (const [value, similar] of pairs) {
      // (base64 keeps its last partial character and padding: only the value's own bits are matched)
      const out = r.redact(`${value} ${similar}`);
      expect(out.startsWith('[REDACTED]') && out.endsWith(` ${similar}`), out).toBe(true);
    }
    // A prefix is not the value, in any spelling.
    for (const prefix of ['SK-LIVE-WOR9DX2A', Buffer.from('sk-live-Wor9dX2').toString('base64')]) expect(r.redact(prefix)).toBe(prefix);
    // A short value (under 8 bytes) is matched in its own case only ("Admin" leaves "ADMIN"), and not in hex.
    const s = new Redactor();
    registerSecret(s, 'Ab1!x');
    expect(s.redact(`Ab1!x AB1!X ab1!x ${Buffer.from('Ab1!x').toString('hex')} &#65;&#98;&#49;&#33;&#120;`)).toBe(`[REDACTED] AB1!X ab1!x ${Buffer.from('Ab1!x').toString('hex')} [REDACTED]`);
  });

  it('overlapping spellings of two secrets are replaced as one span: no piece of either is left', () => {
    const o = new Redactor();
    registerSecret(o, 'abcd-1234');
    registerSecret(o, '1234-wxyz-long');
    expect(o.redact('x abcd-1234-wxyz-long y')).toBe('x [REDACTED] y');
  });
});
