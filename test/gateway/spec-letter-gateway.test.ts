/**
 * The letter of interface.md (I 2.9, 2.10, 3, 4.2, 5.3, 7.2, 8) and decisions.md (D §3, §9) for
 * the gateway, black-box: the built svcd (kernel and gateway in one process, test tools on, a
 * sqlite connector) over HTTP. The kernel's key is set with SVC_SIGNING_KEY so the test can sign
 * remit tokens the kernel would never issue (expired, not yet valid, bound to another run).
 * One daemon for the file; the tests that open the `test` connector's circuit come last.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { request, type Answer } from '../helpers/http-answer.js';
import { mintToken, rawToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { REQUESTER, refundsBundle } from '../integration/run-fixtures.js';

const signer = testSigner();
const publisher = generatePublisherKey();
let svcd: SpawnedSvcd;
let gwData: string;

beforeAll(async () => {
  const dir = tempDir('svc-spec-gw-');
  const dbPath = join(dir, 'shop.db');
  const db = new Database(dbPath);
  db.exec(`CREATE TABLE invoices (id TEXT PRIMARY KEY, customer_id TEXT, amount REAL);
           CREATE TABLE customers (id TEXT PRIMARY KEY, name TEXT);
           CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT, at TEXT);
           INSERT INTO customers VALUES ('c1', 'Ada');
           INSERT INTO invoices VALUES ('inv_1', 'c1', 12.5);`);
  db.close();
  const cfg = join(dir, 'gateway.yaml');
  writeFileSync(
    cfg,
    JSON.stringify({
      connectors: [
        {
          name: 'shop',
          type: 'sqlite',
          path: dbPath,
          probe: { tool: 'invoice', args: { id: 'inv_1' } },
          tools: {
            invoice: {
              description: 'one invoice',
              writes: false,
              statement: 'SELECT id, amount FROM invoices WHERE id = :id',
              input_schema: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
              contract: { required: { rows: 'list' } },
            },
            invoice_customer: {
              description: 'an invoice with its customer',
              writes: false,
              statement: 'SELECT i.id, c.name FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.id = :id',
              input_schema: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
            },
            add_note: {
              description: 'add a note',
              writes: true,
              statement: 'INSERT INTO notes (text, at) VALUES (:text, :now) RETURNING id, text, at',
              input_schema: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
            },
            add_note_plain: {
              description: 'add a note, no returning',
              writes: true,
              statement: 'INSERT INTO notes (text, at) VALUES (:text, :now)',
              input_schema: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
            },
          },
        },
      ],
    }),
  );
  gwData = join(dir, 'gw');
  // SVC_CANARY_QUARANTINE_AFTER and SVC_CANARY_AUTO_RELEASE empty: their defaults (2, off) are under test.
  svcd = await spawnSvcd(
    ['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg, '--publisher', `${publisher.key_id}:${publisher.public_key}`],
    { SVC_TOKEN: '', SVC_GATEWAY_TEST_TOOLS: '1', SVC_GATEWAY_DATA: gwData, SVC_SIGNING_KEY: encodeBase64url(signer.seed), SVC_CANARY_INTERVAL: '3600', SVC_CANARY_QUARANTINE_AFTER: '', SVC_CANARY_AUTO_RELEASE: '' },
  );
}, 30_000);

afterAll(async () => {
  await svcd?.stop();
});

const http = (base: string, path: string, body?: unknown): Promise<Answer> => request(base, path, { body });
const gw = (path: string, body?: unknown) => http(svcd.gatewayUrl!, path, body);
const kernel = (path: string, body?: unknown) => http(svcd.kernelUrl!, path, body);

/** D §9: errors other than 403 are `{ok: false, error: {code, message, details}}`. */
function expectGatewayError(a: Answer, status: number, code: string): any {
  expect({ status: a.status, code: a.body?.error?.code }).toEqual({ status, code });
  expect(a.body).toMatchObject({ ok: false, error: { code, message: expect.any(String), details: expect.any(Object) } });
  return a.body.error;
}

/** I 7.2: a 403 is `{ok: false, refusal: {reason, detail}}`. */
function expectRefusal(a: Answer, reason: string): void {
  expect({ status: a.status, reason: a.body?.refusal?.reason }).toEqual({ status: 403, reason });
  expect(a.body).toEqual({ ok: false, refusal: { reason, detail: expect.anything() } });
}

/** A base64url character whose lowest bit differs: on a part's last character, bits past the data (D §1). */
function flipLowBit(c: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  return alphabet[alphabet.indexOf(c) ^ 1]!;
}

const token = (over: Record<string, unknown> = {}) => mintToken(signer, remitPayload(signer, { tools: ['test.*', 'shop.*'], scopes: ['test:*', 'sql:table:*'], ...over } as never));
const call = (over: Record<string, unknown>) =>
  gw('/tools/call', { remit_token: token(), run_id: 'run_01J00000000000000000000000', step: 's', lease_id: null, tool: 'test.echo', args: {}, idempotency_key: null, scope: null, ...over });

describe('I 4.2 health and tools; I 2.9 descriptors', () => {
  it('GET /health: {ok, version, connectors: {<name>: healthy}}', async () => {
    const h = await gw('/health');
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ ok: true, version: expect.any(String), connectors: { shop: 'healthy', test: 'healthy' } });
  });

  it('GET /tools: an array of descriptors with the members and types of I 2.9; sqlite derivation is `table`', async () => {
    const t = await gw('/tools');
    expect(t.status).toBe(200);
    expect(Array.isArray(t.body)).toBe(true);
    const ids = t.body.map((d: any) => d.id);
    expect(ids).toEqual(expect.arrayContaining(['shop.invoice', 'shop.add_note', 'test.echo', 'test.write', 'test.fail', 'test.flaky', 'test.sleep', 'test.shape']));
    for (const d of t.body) {
      expect(d, d.id).toMatchObject({ id: `${d.connector}.${d.id.slice(d.connector.length + 1)}`, connector: expect.any(String), description: expect.any(String), writes: expect.any(Boolean), input_schema: expect.any(Object), scope_derivation: expect.any(String), contract: { required: expect.any(Object) } });
      for (const type of Object.values(d.contract.required)) expect(['string', 'number', 'bool', 'object', 'list']).toContain(type);
    }
    const inv = t.body.find((d: any) => d.id === 'shop.invoice');
    expect(inv).toMatchObject({ connector: 'shop', writes: false, scope_derivation: 'table', contract: { required: { rows: 'list' } } });
    expect(t.body.find((d: any) => d.id === 'shop.add_note').writes).toBe(true);
    expect(t.body.find((d: any) => d.id === 'test.write').writes).toBe(true);
    expect(t.body.find((d: any) => d.id === 'test.echo').writes).toBe(false);
  });
});

describe('I 4.2 / 2.10 / D §9 calls', () => {
  it('200 {ok: true, result, scope, scopes, replayed: false, latency_ms}; sqlite select returns {rows}', async () => {
    const c = await call({ tool: 'shop.invoice', args: { id: 'inv_1' } });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ ok: true, result: { rows: [{ id: 'inv_1', amount: 12.5 }] }, scope: 'sql:table:invoices', scopes: ['sql:table:invoices'], replayed: false, latency_ms: expect.any(Number) });
  });

  it('a statement over two tables needs both scopes; a remit with one is scope_not_granted (I 4.2 rule 3)', async () => {
    const both = await call({ tool: 'shop.invoice_customer', args: { id: 'inv_1' } });
    expect(both.status).toBe(200);
    expect([...both.body.scopes].sort()).toEqual(['sql:table:customers', 'sql:table:invoices']);
    expectRefusal(await call({ tool: 'shop.invoice_customer', args: { id: 'inv_1' }, remit_token: token({ scopes: ['sql:table:invoices'] }) }), 'scope_not_granted');
  });

  it('a non-null request scope narrows: a derived scope outside it is scope_not_granted (D §9)', async () => {
    expect((await call({ tool: 'shop.invoice', args: { id: 'inv_1' }, scope: 'sql:table:invoices' })).status).toBe(200);
    expectRefusal(await call({ tool: 'shop.invoice', args: { id: 'inv_1' }, scope: 'sql:table:customers' }), 'scope_not_granted');
  });

  it('a write returns its RETURNING row with :now as ISO 8601 UTC; without RETURNING {changes, last_insert_rowid}', async () => {
    const w = await call({ tool: 'shop.add_note', args: { text: 'hi' } });
    expect(w.status).toBe(200);
    expect(w.body.result).toMatchObject({ id: expect.any(Number), text: 'hi', at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    const p = await call({ tool: 'shop.add_note_plain', args: { text: 'plain' } });
    expect(p.status).toBe(200);
    expect(p.body.result).toEqual({ changes: 1, last_insert_rowid: expect.any(Number) });
  });

  it('an unknown tool is 404 tool_not_found; arguments outside input_schema 422 args_invalid', async () => {
    expectGatewayError(await call({ tool: 'shop.nothing' }), 404, 'tool_not_found');
    expectGatewayError(await call({ tool: 'shop.invoice', args: { id: 5 } }), 422, 'args_invalid');
  });

  it('idempotency: a repeat is replayed with the stored result; other arguments 409 idempotency_conflict (I 4.2 rules 1-2, I 7.2)', async () => {
    const key = `k-${Date.now()}`;
    const first = await call({ tool: 'shop.add_note', args: { text: 'once' }, idempotency_key: key });
    expect(first.body.replayed).toBe(false);
    const again = await call({ tool: 'shop.add_note', args: { text: 'once' }, idempotency_key: key });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ ok: true, replayed: true, result: first.body.result });
    const other = await call({ tool: 'shop.add_note', args: { text: 'twice' }, idempotency_key: key });
    expectGatewayError(other, 409, 'idempotency_conflict');
  });

  it('a duplicate while the first is in flight: 409 idempotency_in_flight with Retry-After (D §9)', async () => {
    const key = `sleep-${Date.now()}`;
    const first = call({ tool: 'test.sleep', args: { ms: 1_000 }, idempotency_key: key });
    await new Promise((r) => setTimeout(r, 200));
    const second = call({ tool: 'test.sleep', args: { ms: 1_000 }, idempotency_key: key });
    // Whichever claimed the key first runs (on a loaded machine the second can): the other is told.
    const answers = await Promise.all([first, second]);
    const ran = answers.filter((a) => a.status === 200);
    const dup = answers.find((a) => a.status !== 200)!;
    expect(ran).toHaveLength(1);
    expectGatewayError(dup, 409, 'idempotency_in_flight');
    expect(Number(dup.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await call({ tool: 'test.sleep', args: { ms: 1_000 }, idempotency_key: key })).body.replayed).toBe(true);
  });

  it('a deterministic failure is stored under its key; an upstream error releases the key so a retry runs (D §9)', async () => {
    const key = `det-${Date.now()}`;
    const dupe = { tool: 'shop.add_note_plain', args: { text: 'x' }, idempotency_key: key };
    expect((await call(dupe)).status).toBe(200);
    const flakyKey = `up-${Date.now()}`;
    const flaky = { tool: 'test.flaky', args: { fail_times: 1, key: flakyKey }, idempotency_key: flakyKey };
    expectGatewayError(await call(flaky), 502, 'upstream_error');
    const retried = await call(flaky);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ replayed: false, result: { ok: true } });
  });

  it('test tools of D §9: echo, write, flaky', async () => {
    expect((await call({ tool: 'test.echo', args: { a: 1 } })).body.result).toEqual({ echo: { a: 1 } });
    expect((await call({ tool: 'test.write', args: { a: 1 } })).body.result).toEqual({ written: { a: 1 } });
    const key = `f-${Date.now()}`;
    expectGatewayError(await call({ tool: 'test.flaky', args: { fail_times: 1, key } }), 502, 'upstream_error');
    expect((await call({ tool: 'test.flaky', args: { fail_times: 1, key } })).body.result).toEqual({ ok: true });
  });
});

describe('I 5.3 / D §3 verification order and refusals', () => {
  it.each([
    ['prefix not krt1', 'token_malformed', () => rawToken(signer, Buffer.from(JSON.stringify(remitPayload(signer))), signer.keyId, 'krt2')],
    ['three parts', 'token_malformed', () => token().split('.').slice(0, 3).join('.')],
    ['padding in a part', 'token_malformed', () => { const p = token().split('.'); p[3] += '='; return p.join('.'); }],
    ['over 16 KiB', 'token_malformed', () => token({ grants: ['x'.repeat(17_000)] })],
    ['payload not an object', 'token_malformed', () => rawToken(signer, Buffer.from('[1]'))],
    ['a required field missing', 'token_malformed', () => { const { exp: _e, ...p } = remitPayload(signer); return mintToken(signer, p); }],
    ['unknown key_id', 'signature_invalid', () => mintToken(signer, remitPayload(signer), 'cp-AAAAAAAAAAAAAAAA')],
    ['iss other than key_id', 'signature_invalid', () => mintToken(signer, { ...remitPayload(signer), iss: 'cp-BBBBBBBBBBBBBBBB' })],
    ['signature of other bytes', 'signature_invalid', () => { const p = token().split('.'); p[3] = token({ grants: ['y'] }).split('.')[3]; return p.join('.'); }],
    ['expired', 'remit_expired', () => token({ exp: Math.floor(Date.now() / 1000) - 5 })],
    ['not yet valid', 'remit_not_yet_valid', () => token({ nbf: Math.floor(Date.now() / 1000) + 600 })],
    ['bound to another run', 'remit_run_mismatch', () => token({ run: 'run_01J99999999999999999999999' })],
    ['tool outside tools', 'tool_not_in_remit', () => token({ tools: ['shop.*'] })],
    ['scope outside scopes', 'scope_not_granted', () => token({ scopes: ['sql:table:*'] })],
    // I 2.1: matching is exact-or-glob and case sensitive.
    ['a tool pattern in other case', 'tool_not_in_remit', () => token({ tools: ['Test.*'] })],
    ['a scope pattern in other case', 'scope_not_granted', () => token({ scopes: ['TEST:*'] })],
    ['a character outside the alphabet', 'token_malformed', () => { const p = token().split('.'); p[3] = `+${p[3].slice(1)}`; return p.join('.'); }],
    ['non-canonical trailing bits (D §1)', 'token_malformed', () => { const p = token().split('.'); p[3] = p[3].slice(0, -1) + flipLowBit(p[3].at(-1)!); return p.join('.'); }],
    ['payload nested deeper than 32 (D §3)', 'token_malformed', () => mintToken(signer, { ...remitPayload(signer), deep: JSON.parse('['.repeat(40) + ']'.repeat(40)) })],
    // Verification order (I 5.3, D §9): the earlier step's reason wins.
    ['bad signature and expired', 'signature_invalid', () => { const p = token({ exp: 1 }).split('.'); p[3] = token().split('.')[3]; return p.join('.'); }],
    ['expired and tool outside tools', 'remit_expired', () => token({ exp: Math.floor(Date.now() / 1000) - 5, tools: ['shop.*'] })],
    ['other run and tool outside tools', 'remit_run_mismatch', () => token({ run: 'run_01J99999999999999999999999', tools: ['shop.*'] })],
    ['tool and scope outside', 'tool_not_in_remit', () => token({ tools: ['shop.*'], scopes: ['sql:table:*'] })],
  ] as Array<[string, string, () => string]>)('%s: 403 %s', async (_name, reason, make) => {
    expectRefusal(await call({ tool: 'test.echo', remit_token: make() }), reason);
  });

  it('D §9 order: token before tool exists, tool exists before tool pattern, tool pattern before args, args before scope, scope before autonomy', async () => {
    expectRefusal(await call({ tool: 'shop.nothing', remit_token: token({ exp: Math.floor(Date.now() / 1000) - 5 }) }), 'remit_expired');
    expectGatewayError(await call({ tool: 'shop.nothing', remit_token: token({ tools: ['test.*'] }) }), 404, 'tool_not_found');
    expectRefusal(await call({ tool: 'shop.invoice', args: { id: 5 }, remit_token: token({ tools: ['test.*'] }) }), 'tool_not_in_remit');
    expectGatewayError(await call({ tool: 'shop.invoice', args: { id: 5 }, remit_token: token({ scopes: ['test:*'] }) }), 422, 'args_invalid');
    expectRefusal(await call({ tool: 'test.write', remit_token: token({ scopes: ['sql:table:*'], autonomy: 'observe' }) }), 'scope_not_granted');
  });

  it('tools with writes: true are autonomy_too_low under observe and propose, allowed under supervised', async () => {
    for (const autonomy of ['observe', 'propose']) expectRefusal(await call({ tool: 'test.write', remit_token: token({ autonomy }) }), 'autonomy_too_low');
    expect((await call({ tool: 'test.echo', remit_token: token({ autonomy: 'observe' }) })).status).toBe(200);
    expect((await call({ tool: 'test.write', remit_token: token({ autonomy: 'supervised' }) })).status).toBe(200);
  });

  it('the literal connector scope: a test.* tool needs `test:*`, a prefix glob is not enough without it', async () => {
    expectRefusal(await call({ tool: 'test.echo', remit_token: token({ scopes: ['test:x'] }) }), 'scope_not_granted');
    expect((await call({ tool: 'test.echo', remit_token: token({ scopes: ['test:*'] }) })).status).toBe(200);
  });

  it('every refusal is a tool.refused event on the run and a svc_gateway_refusals_total{reason} increment (I 4.2 rule 4, I 5.3)', async () => {
    const bundle = refundsBundle();
    const pushed = await kernel('/bundles', { bundle, signature: signBundle(bundle, publisher) });
    expect([200, 201]).toContain(pushed.status);
    const remit = await kernel('/remits', { tools: ['test.echo'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER });
    const run = await kernel('/runs', { bundle_id: pushed.body.bundle_id, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: remit.body.remit_id, requested_by: REQUESTER });
    const runId = run.body.run_id;
    const count = async () => Number(/^svc_gateway_refusals_total\{reason="tool_not_in_remit"\} (\d+)/m.exec((await gw('/metrics')).text)?.[1] ?? 0);
    const before = await count();
    expectRefusal(await call({ run_id: runId, tool: 'test.write', remit_token: remit.body.token }), 'tool_not_in_remit');
    expect(await count()).toBe(before + 1);
    const deadline = Date.now() + 5_000;
    let refused: any[] = [];
    while (Date.now() < deadline && refused.length === 0) {
      refused = (await kernel(`/runs/${runId}/events`)).body.events.filter((e: any) => e.kind === 'tool.refused');
      if (refused.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(refused).toHaveLength(1);
    expect(JSON.stringify(refused[0].payload)).toContain('tool_not_in_remit');
  });
});

describe('I 6.2: tool.refused for every 403, also when the token itself is bad', () => {
  it('a malformed token on a call naming a real run appends tool.refused to that run', async () => {
    const bundle = refundsBundle();
    const pushed = await kernel('/bundles', { bundle, signature: signBundle(bundle, publisher) });
    const remit = await kernel('/remits', { tools: ['test.echo'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER });
    const run = await kernel('/runs', { bundle_id: pushed.body.bundle_id, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: remit.body.remit_id, requested_by: REQUESTER });
    // Steps of runs earlier tests left are handed out first (oldest ready): end them.
    let l = await kernel('/leases', { worker_id: 'w', kinds: ['model'] });
    while (l.status === 200 && l.body.run_id !== run.body.run_id) {
      await kernel(`/leases/${l.body.lease_id}/fail`, { error: { code: 'x', message: 'x' }, deterministic: true });
      l = await kernel('/leases', { worker_id: 'w', kinds: ['model'] });
    }
    expect(l.body.run_id).toBe(run.body.run_id);
    expectRefusal(await call({ run_id: run.body.run_id, step: l.body.step, lease_id: l.body.lease_id, remit_token: 'krt1.x.y.z' }), 'token_malformed');
    const deadline = Date.now() + 5_000;
    let refused: any[] = [];
    while (Date.now() < deadline && refused.length === 0) {
      refused = (await kernel(`/runs/${run.body.run_id}/events`)).body.events.filter((e: any) => e.kind === 'tool.refused');
      if (refused.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(JSON.stringify(refused)).toContain('token_malformed');
    expect(JSON.stringify(refused)).not.toContain('krt1.x.y.z');
  });
});

describe('I 4.2 canaries / I 3 connector states / D §9', () => {
  it('GET /canaries: a map keyed by connector with the members of I 4.2', async () => {
    const c = await gw('/canaries');
    expect(c.status).toBe(200);
    expect(Array.isArray(c.body)).toBe(false);
    for (const name of ['shop', 'test']) {
      expect(c.body[name], name).toMatchObject({ status: expect.stringMatching(/^(healthy|failed|quarantined)$/), consecutive_failures: expect.any(Number) });
      for (const key of ['last_probe_at', 'last_ok_at', 'last_error', 'contract_diff']) expect(c.body[name], key).toHaveProperty(key);
    }
  });

  it('(a result stored for the replay checks below)', async () => {
    expect((await call({ tool: 'test.echo', args: { stored: 1 }, idempotency_key: 'stored-before' })).body).toMatchObject({ ok: true, replayed: false });
  });

  it('probe returns the status object; a drifted shape fails, two failures (the default) quarantine: 503 connector_quarantined, repair file, canary_status -1; passing probes do not release (auto_release off); release does', async () => {
    const shape = (await gw('/tools')).body.find((d: any) => d.id === 'test.shape').contract.required;
    const ok = await gw('/canaries/test/probe', {});
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: 'healthy', consecutive_failures: 0, last_probe_at: expect.stringMatching(/Z$/), last_ok_at: expect.stringMatching(/Z$/) });
    expect(ok.body.contract_diff).toEqual({ missing: [], type_mismatch: [], unexpected_required: [] });
    // A shape without the contract's fields.
    expect((await gw('/test/shape', { shape: {} })).status).toBeLessThan(300);
    const failed = await gw('/canaries/test/probe', {});
    expect(failed.body).toMatchObject({ status: 'failed', consecutive_failures: 1 });
    expect(failed.body.contract_diff.missing.length).toBe(Object.keys(shape).length);
    const quarantined = await gw('/canaries/test/probe', {});
    expect(quarantined.body).toMatchObject({ status: 'quarantined', consecutive_failures: 2 });
    expect((await gw('/health')).body.connectors.test).toBe('quarantined');
    expect((await gw('/metrics')).text).toMatch(/^svc_gateway_canary_status\{connector="test"\} -1$/m);
    expectGatewayError(await call({ tool: 'test.echo' }), 503, 'connector_quarantined');
    // D §9: idempotency replay comes before quarantine.
    expect((await call({ tool: 'test.echo', args: { stored: 1 }, idempotency_key: 'stored-before' })).body).toMatchObject({ ok: true, replayed: true });
    const repairs = existsSync(join(gwData, 'repairs')) ? readdirSync(join(gwData, 'repairs')) : [];
    const file = repairs.find((f) => /^test-.+\.json$/.test(f));
    expect(file).toBeDefined();
    const repair = JSON.parse(readFileSync(join(gwData, 'repairs', file!), 'utf8'));
    for (const key of ['contract', 'diff', 'probe']) expect(repair, key).toHaveProperty(key);
    expect(JSON.stringify(Object.keys(repair))).toMatch(/observed|shape/);
    // auto_release is off by default (I 2.10, 8): passing probes leave it quarantined.
    const good = Object.fromEntries(Object.entries(shape).map(([k, t]) => [k, { string: 's', number: 1, bool: true, object: {}, list: [] }[t as string]]));
    await gw('/test/shape', { shape: good });
    for (let i = 0; i < 2; i++) expect((await gw('/canaries/test/probe', {})).body.status).toBe('quarantined');
    const released = await gw('/canaries/test/release', {});
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ status: 'healthy' });
    expect((await gw('/metrics')).text).toMatch(/^svc_gateway_canary_status\{connector="test"\} 1$/m);
    expect((await gw('/canaries/test/probe', {})).body.status).toBe('healthy');
    expect((await call({ tool: 'test.echo' })).status).toBe(200);
  });

  it('probe or release of an unknown connector: 404 not_found', async () => {
    expectGatewayError(await gw('/canaries/nothing/probe', {}), 404, 'not_found');
    expectGatewayError(await gw('/canaries/nothing/release', {}), 404, 'not_found');
  });
});

describe('I 4.2 metrics; I 3 / 8 / D §9 circuit (last: it opens the test connector)', () => {
  it('GET /metrics is Prometheus text with every gateway metric of I 4.2', async () => {
    const m = await gw('/metrics');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const name of ['svc_gateway_calls_total', 'svc_gateway_refusals_total', 'svc_gateway_call_latency_seconds', 'svc_gateway_canary_status', 'svc_gateway_circuit_open']) {
      expect(m.text, name).toMatch(new RegExp(`^${name}(_bucket|_sum|_count)?(\\{| )`, 'm'));
    }
    expect(m.text).toMatch(/^svc_gateway_calls_total\{tool="shop\.invoice",outcome="[a-z_]+"\} \d+/m);
  });

  it('5 consecutive upstream errors open the circuit: 502 upstream_error with error.circuit "open" and Retry-After, svc_gateway_circuit_open 1; other connectors unaffected', async () => {
    // The fifth failure reached the upstream and already says what the next call meets
    // (docs/design.md, man svc-gateway(5) CIRCUIT BREAKER).
    for (let i = 0; i < 5; i++) {
      const e = expectGatewayError(await call({ tool: 'test.fail' }), 502, 'upstream_error');
      expect(e.circuit, `call ${i + 1}`).toBe(i < 4 ? undefined : 'open');
    }
    const res = await call({ tool: 'test.echo' });
    const open = expectGatewayError(res, 502, 'upstream_error');
    expect(open.circuit).toBe('open');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // D §9: idempotency replay comes before the circuit.
    expect((await call({ tool: 'test.echo', args: { stored: 1 }, idempotency_key: 'stored-before' })).body).toMatchObject({ ok: true, replayed: true });
    expect((await gw('/metrics')).text).toMatch(/^svc_gateway_circuit_open\{connector="test"\} 1$/m);
    expect((await call({ tool: 'shop.invoice', args: { id: 'inv_1' } })).status).toBe(200);
  });
});
