/**
 * Interface 2.10: "Every `${VAR}` inside any config string is replaced from the gateway's
 * environment at load. The substituted value never appears in logs, responses or events."
 * Awkward secrets against a real local HTTP server: digits that also occur inside numbers,
 * quotes and backslashes that JSON escapes (once in a field, twice in JSON text inside a
 * field), and a `${VAR}` used as a header name. Each check searches the outputs for every
 * spelling of the value, and checks that the answer around it is still what it was.
 */
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGatewayConfig, registerSecret } from '../../src/gateway/config.js';
import { Redactor, type Logger } from '../../src/log/logger.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

const DIGITS = '31337';
const QUOTED = 'qs"x\\y-ZZZ999';
const HEADER_NAME = 'X-Hidden-Name-4242'; // the http connector sends it lower-cased
const TRAILING = 's3cr3t-TRAIL-77\n'; // a secret read from a file: headers go out trimmed
const SLASHED = 'tokA1b2/C3d4+E5f6=G7h8;q&r'; // what PHP writes as \/ and Go's encoder as \u0026
/** `t` with its JSON escapes undone as often as any remain (at most 12 times), every stage kept. */
function unescapeDeep(t: string): string {
  const stages = [t];
  for (let i = 0; i < 12; i++) {
    const next = stages.at(-1)!.replace(/\\(["\\/bfnrt]|u[0-9a-fA-F]{4})/g, (_, e: string) => (e.length === 5 ? String.fromCharCode(parseInt(e.slice(1), 16)) : JSON.parse(`"\\${e}"`)));
    if (next === stages.at(-1)) break;
    stages.push(next);
  }
  return stages.join('\n');
}

/** `v` JSON-escaped once, twice, … `n` times (its spellings in JSON text nested that deep). */
const escapedUpTo = (v: string, n: number): string[] => (n === 0 ? [] : [JSON.stringify(v).slice(1, -1), ...escapedUpTo(JSON.stringify(v).slice(1, -1), n - 1)]);
const spellings = (v: string) => [v, v.toLowerCase(), JSON.stringify(v).slice(1, -1), JSON.stringify(JSON.stringify(v).slice(1, -1)).slice(1, -1)];

const signer = testSigner();
const token = (tools: string[], scopes: string[], run?: string) => mintToken(signer, remitPayload(signer, { tools, scopes, autonomy: 'autonomous', ...(run ? { run } : {}) }));

/** Every file of the gateway's store (database and WAL) as text, as an attacker with the disk would read it. */
const readStore = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('gateway.db')).map((f) => readFileSync(join(dir, f), 'latin1')).join('\n');

const files = mkdtempSync(join(tmpdir(), 'svc-secrets-files-'));
let server: Server;
let port = 0;
let gw: TestGateway;
let logText = () => '';
let logger: Logger;

beforeAll(async () => {
  // Echoes the request's headers back as JSON (so `body` is JSON text holding the secrets):
  // as JSON.stringify writes it, as PHP's json_encode does (`/` as `\/`) with Go's `\u0026`
  // for `&`, every letter t as \u0074, and in UTF-16 as its content-type declares.
  const php = (json: string) => json.replaceAll('/', '\\/').replaceAll('&', '\\u0026').replaceAll('t', '\\u0074');
  server = createServer((req, res) => {
    const json = JSON.stringify({ headers: req.headers });
    if (req.url === '/php') res.writeHead(200, { 'content-type': 'application/json' }).end(php(json));
    else if (req.url === '/utf16') res.writeHead(200, { 'content-type': 'application/json; charset=utf-16le' }).end(Buffer.from(json, 'utf16le'));
    // Labels that do not say what the bytes are: UTF-8 called UTF-16; Java's "UTF-16", big-endian
    // with its BOM (WHATWG reads the label as little-endian); UTF-16 a byte off, called UTF-8.
    else if (req.url === '/utf8-called-utf16') res.writeHead(200, { 'content-type': 'application/json; charset=utf-16le' }).end(json);
    else if (req.url === '/utf16be') res.writeHead(200, { 'content-type': 'application/json; charset=utf-16' }).end(Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(json, 'utf16le').swap16()]));
    else if (req.url === '/utf16-shifted') res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(Buffer.concat([Buffer.from([0x20]), Buffer.from(json, 'utf16le')]));
    // Two copies, one the label hides: UTF-8 then UTF-16, labelled UTF-8 and labelled UTF-16.
    else if (req.url === '/mixed') res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(Buffer.concat([Buffer.from(json + '\n'), Buffer.from(json, 'utf16le')]));
    else if (req.url === '/mixed-called-utf16') res.writeHead(200, { 'content-type': 'text/plain; charset=utf-16le' }).end(Buffer.concat([Buffer.from(json + '\n'), Buffer.from(json, 'utf16le')]));
    // UTF-32, whose label fetch's decoders do not know.
    else if (req.url === '/utf32') res.writeHead(200, { 'content-type': 'text/plain; charset=utf-32' }).end(Buffer.from([...json].flatMap((c) => [c.charCodeAt(0) & 0xff, 0, 0, 0])));
    // JSON whose string holds the headers four escapes deep (the raw body: five).
    else if (req.url === '/deep') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: JSON.stringify(JSON.stringify(JSON.stringify(php(json)))) }));
    // Not JSON, so only the raw body carries it: PHP's spelling, then escaped twice more.
    else if (req.url === '/escaped-thrice') res.writeHead(200, { 'content-type': 'text/plain' }).end(`echo: ${JSON.stringify(JSON.stringify(php(json)))}`);
    // The bearer token as a response header's name, which fetch hands on lower-cased.
    // The request's headers base64-encoded, in the body and in a response header.
    else if (req.url === '/b64') res.writeHead(200, { 'content-type': 'text/plain', 'x-auth-b64': Buffer.from(String(req.headers['x-slashed'])).toString('base64') }).end(Buffer.from(json).toString('base64'));
    else if (req.url === '/header-name') res.writeHead(200, { 'content-type': 'text/plain', [`x-${String(req.headers.authorization).slice(7)}`]: '1' }).end('ok');
    else res.writeHead(200, { 'content-type': 'application/json' }).end(json);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  // A token saved by Windows PowerShell 5 (`echo $env:TOKEN > token.txt`): UTF-16LE with a BOM.
  writeFileSync(join(files, 'token.txt'), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`token=${SLASHED}\r\n`, 'utf16le')]));
  const redactor = new Redactor();
  const log = capturedLogger(redactor);
  logger = log.logger;
  logText = log.text;
  gw = await startGateway({
    keys: signer,
    redactor,
    logger,
    env: { SECRET_DIGITS: DIGITS, SECRET_QUOTED: QUOTED, SECRET_HNAME: HEADER_NAME, SECRET_TRAIL: TRAILING, SECRET_SLASHED: SLASHED, SVC_GATEWAY_TEST_TOOLS: '1' },
    doc: {
      connectors: [
        {
          name: 'web',
          type: 'http',
          allowed_hosts: ['127.0.0.1'],
          headers: { 'x-digits': '${SECRET_DIGITS}', 'x-quoted': '${SECRET_QUOTED}', '${SECRET_HNAME}': 'named', authorization: 'Bearer ${SECRET_TRAIL}', 'x-slashed': '${SECRET_SLASHED}' },
        },
        { name: 'files', type: 'fs', root: files },
      ],
    },
  });
});

afterAll(async () => {
  rmSync(files, { recursive: true, force: true });
  await gw?.close();
  await new Promise<void>((r) => server?.close(() => r()));
});

describe('awkward ${VAR} values never leave the gateway (I 2.10)', () => {
  it("a secret's digits inside a number: the answer stays JSON and the idempotency key is stored, not stuck (D 9)", async () => {
    const t = token(['test.*'], ['test:*'], 'run_DIGITS');
    const call = { remit_token: t, run_id: 'run_DIGITS', tool: 'test.echo', args: { n: 313370, note: `x${DIGITS}y` }, idempotency_key: 'digits-1' };
    const first = await gw.call(call);
    expect(first.status, first.text).toBe(200);
    expect(first.body.result.echo).toEqual({ n: '[REDACTED]', note: 'x[REDACTED]y' });
    const again = await gw.call(call);
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ ok: true, replayed: true });
    for (const text of [first.text, again.text, JSON.stringify(gw.link.events)]) expect(text).not.toContain(DIGITS);
  });

  it('a URL whose host spells a secret, which the URL parser lower-cases: the refusal names the host redacted (I 2.10, 5.3)', async () => {
    const res = await gw.call({ remit_token: token(['web.get'], ['http:host:*']), tool: 'web.get', args: { url: 'http://s3cr3t-TRAIL-77.invalid/x' } });
    expect(res.status).toBe(403);
    expect(res.body.refusal.detail).toContain('host [REDACTED].invalid is not in allowed_hosts');
    expect(JSON.stringify(res.body).toLowerCase()).not.toContain('s3cr3t-trail-77');
  });

  it('an upstream echoing the credentials base64-encoded, in its body and a header: redacted (I 2.10)', async () => {
    const res = await gw.call({ remit_token: token(['web.get'], ['http:host:127.0.0.1']), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/b64` } });
    expect(res.status).toBe(200);
    const text = JSON.stringify(res.body);
    expect(res.body.result.body).toContain('[REDACTED]');
    expect(res.body.result.headers['x-auth-b64']).toContain('[REDACTED]');
    for (const secret of [QUOTED, TRAILING.trim(), SLASHED]) {
      for (let shift = 0; shift < 3; shift++) {
        const core = Buffer.concat([Buffer.alloc(shift), Buffer.from(secret)]).toString('base64').slice(shift + 1, -4);
        expect(text, secret).not.toContain(core);
      }
    }
  });

  it('quotes and backslashes: neither the raw value nor its JSON-escaped spellings appear, in a field or in JSON text inside one', async () => {
    const res = await gw.call({ remit_token: token(['web.*'], ['http:host:127.0.0.1']), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/` } });
    expect(res.status, res.text).toBe(200);
    // The upstream really got both headers (redacted on the way back), and the header named by
    // a ${VAR} was substituted, not sent as the literal `${SECRET_HNAME}`.
    expect(res.body.result.json.headers).toMatchObject({ 'x-quoted': '[REDACTED]', 'x-digits': '[REDACTED]', '[REDACTED]': 'named', authorization: 'Bearer [REDACTED]' });
    expect(JSON.parse(res.body.result.body).headers['x-quoted']).toBe('[REDACTED]');
    expect(res.text).not.toContain('${');
    for (const secret of [DIGITS, QUOTED, HEADER_NAME, TRAILING, TRAILING.trim()]) for (const s of spellings(secret)) expect(res.text).not.toContain(s);
  });

  it('an upstream echoing a secret as a response header name, which fetch lower-cases: redacted in that spelling too (I 2.10)', async () => {
    const call = { remit_token: token(['web.*'], ['http:host:127.0.0.1'], 'run_hname'), run_id: 'run_hname', tool: 'web.post', args: { url: `http://127.0.0.1:${port}/header-name`, json: {} }, idempotency_key: 'header-name-1' };
    const res = await gw.call(call);
    expect(res.status, res.text).toBe(200);
    expect(res.body.result.headers).toHaveProperty('x-[REDACTED]', '1');
    const again = await gw.call(call);
    expect(again.body).toMatchObject({ ok: true, replayed: true });
    for (const text of [res.text, again.text, readStore(gw.dataDir), JSON.stringify(gw.link.events), logText()]) expect(text.toLowerCase()).not.toContain(TRAILING.trim().toLowerCase());
  });

  for (const [path, how] of [
    ['/php', 'spelt with JSON escapes the gateway does not write itself (\\/, \\u0026, \\u0074)'],
    ['/utf16', 'in a UTF-16 body that says so in its charset'],
    ['/utf8-called-utf16', 'in UTF-8 bytes labelled UTF-16'],
    ['/utf16be', 'in big-endian UTF-16 labelled "utf-16" (read as little-endian by the label)'],
    ['/utf16-shifted', 'in UTF-16 a byte off, labelled UTF-8'],
    ['/escaped-thrice', 'escaped three times over in a body that is not JSON'],
    ['/mixed', 'twice, in UTF-8 and in UTF-16, labelled UTF-8'],
    ['/mixed-called-utf16', 'twice, in UTF-8 and in UTF-16, labelled UTF-16'],
    ['/utf32', 'in UTF-32 (a label fetch does not know)'],
    ['/deep', 'four escapes deep in a JSON string (five in the raw body)'],
  ]) {
    it(`an upstream echoing a secret ${how}: redacted in the raw body too, in the answer and in the stored result (I 2.10, D 9)`, async () => {
      const call = { remit_token: token(['web.*'], ['http:host:127.0.0.1'], `run_${path.slice(1)}`), run_id: `run_${path.slice(1)}`, tool: 'web.post', args: { url: `http://127.0.0.1:${port}${path}`, json: {} }, idempotency_key: `echo-${path.slice(1)}` };
      const first = await gw.call(call);
      expect(first.status, first.text).toBe(200);
      if (first.body.result.json?.headers) expect(first.body.result.json.headers).toMatchObject({ 'x-slashed': '[REDACTED]', 'x-quoted': '[REDACTED]' });
      expect(first.body.result.body).toContain('[REDACTED]');
      const again = await gw.call(call);
      expect(again.body).toMatchObject({ ok: true, replayed: true });
      const stored = readStore(gw.dataDir);
      // Every reading of every output: as text, and its bytes as UTF-16 either way round.
      const even = (b: Buffer) => b.subarray(0, b.length & ~1);
      const readings = (t: string) => {
        const bytes = Buffer.from(t, 'utf8');
        return [0, 1].flatMap((at) => [even(bytes.subarray(at)).toString('utf16le'), Buffer.from(even(bytes.subarray(at))).swap16().toString('utf16le')]);
      };
      for (const text of [first.text, again.text, stored, JSON.stringify(gw.link.events), logText()]) {
        // What an agent could make of it: other readings of its bytes, its NULs dropped (wide
        // text read narrow), its JSON escapes undone again and again.
        for (const reading of [text, ...readings(text), unescapeDeep(text.replaceAll('\u0000', '').replaceAll('\\u0000', ''))]) {
          for (const secret of [SLASHED, QUOTED, 'C3d4+E5f6', 'G7h8;q', ...escapedUpTo(QUOTED, 4)]) expect(reading).not.toContain(secret);
        }
        expect(text).not.toMatch(/C3d4\+E5f6|\\u0074okA1b2/);
      }
    });
  }

  it('a UTF-16 file holding a secret, read by the fs connector as UTF-8: redacted in its NUL-joined spelling (I 2.10)', async () => {
    const res = await gw.call({ remit_token: token(['files.*'], [`fs:path:${realpathSync(files)}`]), tool: 'files.read', args: { path: 'token.txt' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.result.content).toContain('[REDACTED]');
    const narrow = res.text.replaceAll('\\u0000', '');
    for (const secret of [SLASHED, 'C3d4+E5f6', 'G7h8;q']) expect(narrow).not.toContain(secret);
  });

  it('logs: every line stays JSON and shows no spelling of any secret', async () => {
    await gw.call({ remit_token: token(['test.*'], ['test:*']), tool: 'test.fail', args: { why: `${QUOTED} ${DIGITS}0` } });
    // What a connector's error would log: the secrets inside a string, a number and a key.
    logger.warn('upstream said', { detail: `header ${QUOTED}`, code: 313370, [HEADER_NAME]: 1 });
    expect(logText()).toContain('upstream said');
    for (const line of logText().trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    for (const secret of [DIGITS, QUOTED, HEADER_NAME]) for (const s of spellings(secret)) expect(logText()).not.toContain(s);
  });
});

describe('Redactor (src/log/logger.ts)', () => {
  const r = new Redactor();
  registerSecret(r, QUOTED);
  registerSecret(r, 'p@ss word/7');

  it('walks values: strings, keys and numbers; the shape around them is kept', () => {
    const d = new Redactor();
    registerSecret(d, DIGITS);
    expect(d.redactValue({ [`k${DIGITS}`]: [313370, 7, true, null, `a${DIGITS}`], at: new Date(0) })).toEqual({ 'k[REDACTED]': ['[REDACTED]', 7, true, null, 'a[REDACTED]'], at: '1970-01-01T00:00:00.000Z' });
    expect(d.redactJsonText('{"n":313370,"m":1}')).toBe('{"n":"[REDACTED]","m":1}');
    expect(d.redactJsonText('plain 31337 text')).toBe('plain [REDACTED] text');
    expect(d.redactJsonText('{"n":1}')).toBe('{"n":1}');
  });

  it('registers the spellings a secret takes on its way out: JSON-escaped once and twice, percent-encoded', () => {
    const inner = JSON.stringify({ v: QUOTED });
    expect(r.redactValue({ body: inner })).toEqual({ body: '{"v":"[REDACTED]"}' });
    expect(r.redact(JSON.stringify({ body: inner }))).not.toContain('ZZZ999');
    expect(r.redact(`GET /?k=${encodeURIComponent('p@ss word/7')}`)).toBe('GET /?k=[REDACTED]');
  });

  it("JSON's own words are never secrets, and a __proto__ key stays data (the answer keeps its shape)", () => {
    const w = new Redactor();
    registerSecret(w, 'true');
    registerSecret(w, 'null');
    registerSecret(w, 's3cret-value');
    expect(w.redactJsonText('{"ok":true,"v":null,"s":"s3cret-value"}')).toBe('{"ok":true,"v":null,"s":"[REDACTED]"}');
    const body = w.redactJsonText('{"a":"s3cret-value","__proto__":{"x":1},"b":2}');
    expect(body).toBe('{"a":"[REDACTED]","__proto__":{"x":1},"b":2}');
    expect(Object.getPrototypeOf(w.redactValue(JSON.parse('{"__proto__":{"x":"s3cret-value"}}')))).toBe(Object.prototype);
  });

  it('the trimmed value, and the spellings new URL() gives it in a query and a path, are registered too', () => {
    const u = new Redactor();
    registerSecret(u, ' p@ss/w:rd"q\n');
    const followed = new URL('http://upstream/echo?k=p@ss/w:rd"q');
    expect(followed.href).toContain('p@ss/w:rd%22q'); // neither encodeURIComponent's spelling nor the raw one
    expect(u.redact(followed.href)).toBe('http://upstream/echo?k=[REDACTED]');
    expect(u.redact(new URL('http://upstream/p@ss/w:rd"q').href)).toBe('http://upstream/[REDACTED]');
    expect(u.redact('Bearer p@ss/w:rd"q')).toBe('Bearer [REDACTED]');
  });

  it('the spelling userinfo gives it: a redirect to http://user:<value>@host/ hands on its Location so (I 2.10)', () => {
    const u = new Redactor();
    const secret = 'pA5s:w0rd/@?&=+ Zq~!$';
    registerSecret(u, secret);
    const location = new URL('http://u@127.0.0.1:8080/echo');
    location.password = secret;
    expect(location.href).not.toContain(encodeURIComponent(secret)); // userinfo has its own encode set
    expect(u.redact(location.href)).toBe('http://u:[REDACTED]@127.0.0.1:8080/echo');
  });

  it('a map key as a config problem spells it, a JSON pointer token (/ as ~1, ~ as ~0): redacted in startup errors (I 2.10)', () => {
    const r = new Redactor();
    const secret = 'pA5s:w0rd/@?&=+ Zq~!$';
    let message = '';
    try {
      loadGatewayConfig({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['127.0.0.1'], headers: { '${K}': 'v' } }] }, { env: { K: secret }, redactor: r });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('is not a valid HTTP header name');
    expect(message).toContain('pA5s:w0rd~1@?&=+ Zq~0!$'); // the error itself, before the redactor
    expect(r.redact(message)).not.toMatch(/pA5s|w0rd/);
  });

  it('an allowed host showing a value is registered lower-cased, whole: URL parsers hand hosts on lower-cased (I 2.10)', async () => {
    const r = new Redactor();
    const config = loadGatewayConfig({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['${H}.invalid', 'Api.Example.com'] }] }, { env: { H: 'SwEEp7Kq9Zx3MvRt' }, redactor: r });
    expect(config.connectors[0]).toMatchObject({ allowed_hosts: ['sweep7kq9zx3mvrt.invalid', 'api.example.com'] });
    expect(r.redact('cannot reach sweep7kq9zx3mvrt.invalid: ENOTFOUND')).toBe('cannot reach [REDACTED]: ENOTFOUND');
    expect(r.redact('scope http:host:sweep7kq9zx3mvrt.invalid')).toBe('scope http:host:[REDACTED]');
    // A host that shows no value stays (the value itself, 16 bytes, is matched in any case anyway).
    expect(r.redact('sweep7kq9zx3mvrt and api.example.com')).toBe('[REDACTED] and api.example.com');
    // A wildcard entry: the hosts it matches end in what follows `*.`.
    const w = new Redactor();
    loadGatewayConfig({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['*.${T}.example.com'] }] }, { env: { T: 'AcmeTenant42' }, redactor: w });
    expect(w.redact('http:host:api.acmetenant42.example.com')).toBe('http:host:api.[REDACTED]');
    // One variable holding the whole entry, `*.` and all.
    const whole = new Redactor();
    loadGatewayConfig({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['${H}'] }] }, { env: { H: '*.AcmeTenant42.example.com' }, redactor: whole });
    expect(whole.redact('http:host:api.acmetenant42.example.com')).toBe('http:host:api.[REDACTED]');
  });

  it('base64 and base64url spellings of a value of 8 bytes or more, wherever it sits in the encoded bytes (I 2.10)', () => {
    const b = new Redactor();
    const secret = 'tokA1b2/C3d4+E5f6=G7h8;q&r';
    registerSecret(b, secret);
    for (let before = 0; before < 4; before++) {
      for (let after = 0; after < 4; after++) {
        const bytes = Buffer.concat([Buffer.alloc(before, 0x41), Buffer.from(secret), Buffer.alloc(after, 0x42)]);
        for (const encoded of [bytes.toString('base64'), bytes.toString('base64url')]) {
          const shown = b.redact(`blob ${encoded} end`);
          expect(shown, encoded).toContain('[REDACTED]');
          expect(shown).toMatch(/^blob .*\[REDACTED\].* end$/);
        }
      }
    }
    // A shorter value has too few characters of its own to find without redacting by chance.
    const short = new Redactor();
    registerSecret(short, 'pin-424');
    expect(short.redact(Buffer.from('pin-424').toString('base64'))).toBe(Buffer.from('pin-424').toString('base64'));
  });

  it('a form-encoded spelling is registered too', () => {
    const f = new Redactor();
    registerSecret(f, 'p@ss word!~');
    expect(f.redact(new URLSearchParams({ q: 'p@ss word!~' }).toString())).toBe('q=[REDACTED]');
  });

  it('a secret behind JSON escapes it does not register (\\/, \\uXXXX in either case, escaped twice) is redacted, the text around it kept', () => {
    const red = new Redactor();
    red.add(SLASHED);
    expect(red.redact('{"a":"Bearer tokA1b2\\/C3d4+E5f6=G7h8;q\\u0026r","b":"\\u00e9\\/"}')).toBe('{"a":"Bearer [REDACTED]","b":"\\u00e9\\/"}');
    expect(red.redact('x \\u0074okA1b2\\/C3d4+E5f6=G7h8;q\\u0026R y')).toBe('x \\u0074okA1b2\\/C3d4+E5f6=G7h8;q\\u0026R y'); // R is not r: no secret
    expect(red.redact('x \\u0074okA1b2\\/C3d4+E5f6=G7h8;q\\u0026r y')).toBe('x [REDACTED] y');
    expect(red.redact('\\u0054\\u006FkA1b2/C3d4+E5f6=G7h8;q&r')).toBe('\\u0054\\u006FkA1b2/C3d4+E5f6=G7h8;q&r'); // T is not t
    expect(red.redact('{"t":"{\\"a\\":\\"tokA1b2\\\\/C3d4+E5f6=G7h8;q&r\\"}"}')).toBe('{"t":"{\\"a\\":\\"[REDACTED]\\"}"}');
    expect(red.shows('tokA1b2\\/C3d4+E5f6=G7h8;q&r')).toBe(true);
    expect(red.shows('tokA1b2\\/C3d4+E5f6=G7h8;q')).toBe(false);
    // A backslash that starts no escape stands for itself; two hits, each replaced once.
    expect(red.redact('\\x tokA1b2\\/C3d4+E5f6=G7h8;q&r\\tokA1b2/C3d4+E5f6=G7h8;q&r')).toBe('\\x [REDACTED]\\[REDACTED]');
    // In a value: the raw body beside its parse.
    expect(red.redactValue({ body: '{"k":"tokA1b2\\/C3d4+E5f6=G7h8;q&r"}', n: 1 })).toEqual({ body: '{"k":"[REDACTED]"}', n: 1 });
  });

  it('a value walked whole: a secret three escapes deep in a string is four deep in its JSON text, and still found', () => {
    const red = new Redactor();
    registerSecret(red, SLASHED);
    const spelt = JSON.stringify(JSON.stringify(`{"k":"${SLASHED.replaceAll('/', '\\/')}"}`)); // PHP's \/, then escaped twice more
    expect(red.redactValue({ status: 200, body: `echo: ${spelt}`, json: null }).body).toBe(`echo: "\\"{\\\\\\"k\\\\\\":\\\\\\"[REDACTED]\\\\\\"}\\""`);
  });

  it('a body of backslashes costs a linear pass per level with a small constant (a hostile upstream)', () => {
    const red = new Redactor();
    registerSecret(red, SLASHED);
    // The fastest of three runs of a call's three passes: a busy machine slows a run, never speeds one.
    const fastest = (body: string) =>
      Math.min(
        ...[0, 1, 2].map(() => {
          const t0 = performance.now();
          for (let i = 0; i < 3; i++) expect(red.redactValue({ body }).body).toBe(body);
          return performance.now() - t0;
        }),
      );
    const small = fastest('\\'.repeat(512 * 1024));
    const large = fastest('\\'.repeat(4 * 1024 * 1024));
    // Linear in the bytes (0.5 → 4 MiB: about 8×) …
    expect(large / small).toBeLessThan(24);
    // … and with a small constant: the old version was linear too, but allocated a copy per
    // level (3.8 s for 5 MiB here; this whole test took 22 s against it), today's takes
    // about 0.5 s. The fastest of three runs, so a loaded machine is not what is measured.
    expect(large).toBeLessThan(3000);
  });

  it('a lower-cased spelling is redacted only in header names, where HTTP lower-cases: a user name "Admin" leaves "admin" in other text alone', () => {
    const r = new Redactor();
    registerSecret(r, 'Admin');
    expect(r.redact('user Admin, role admin')).toBe('user [REDACTED], role admin');
    expect(r.redactLowerCased('x-admin-token')).toBe('x-[REDACTED]-token');
  });

  it('values under four characters are not registered (documented in svc-gateway(5))', () => {
    const s = new Redactor();
    registerSecret(s, 'abc');
    expect(s.size).toBe(0);
    expect(s.redact('abc')).toBe('abc');
  });
});
