/**
 * The gateway inside svcd (decisions §9, §11): beside the kernel in one process (in-process
 * kernel link: keys by reference, events straight into the run engine, the kernel's tool
 * catalog), apart from it (HTTP link with GET /v1/keys and POST /v1/runs/{id}/events; the
 * HTTP tool catalog), and the built binary: startup line, config errors, `svc gateway`
 * commands, and SIGTERM ending the MCP process groups. The binary tests run the built
 * dist/ (`npx tsc -p tsconfig.json` first; `npm test` builds).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { HttpToolCatalog } from '../../src/gateway/tool-catalog.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { Redactor, silentLogger } from '../../src/log/logger.js';
import { startSvcd } from '../../daemon/server.js';
import { runSvc } from '../helpers/cli.js';
import { isAlive, ROOT, spawnSvcd, startTestDaemon, tempDir, waitOutput, type TestDaemon } from '../helpers/daemon.js';
import { refundsBundle, REQUESTER } from '../integration/run-fixtures.js';
import { capturedLogger } from './helpers.js';

const dir = tempDir('svc-gw-daemon-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function json(url: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...(init.headers ?? {}) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A run of the refunds bundle under a kernel-minted remit for the test tools. */
async function runWithRemit(kernelUrl: string, d: TestDaemon, publisher: ReturnType<typeof generatePublisherKey>, remit: Record<string, unknown>): Promise<{ runId: string; token: string }> {
  const bundle = refundsBundle();
  const b = await json(`${kernelUrl}/v1/bundles`, { body: { bundle, signature: signBundle(bundle, publisher) } });
  expect([200, 201]).toContain(b.status);
  const m = await json(`${kernelUrl}/v1/remits`, {
    body: { tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER, ...remit },
  });
  expect(m.status).toBe(201);
  const r = await json(`${kernelUrl}/v1/runs`, { body: { bundle_id: b.body.bundle_id, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: m.body.remit_id, requested_by: REQUESTER } });
  expect(r.status).toBe(201);
  void d;
  return { runId: r.body.run_id, token: m.body.token };
}

async function eventsOf(kernelUrl: string, runId: string): Promise<any[]> {
  return (await json(`${kernelUrl}/v1/runs/${runId}/events?limit=1000`)).body.events;
}

/**
 * A valid remit of no run (unbound) presented with another run's id: steps 1–4 pass (interface
 * 5.3: `run` is not set), but it is not that run's remit, so the kernel takes no tool.called
 * on that run from it (decisions §7, POST /runs/{id}/events); a refusal is still recorded
 * there, with the bearer alone. The same whether the gateway is in svcd's process or not.
 */
async function foreignRemitCalls(kernelUrl: string, gatewayUrl: string, runId: string, headers: Record<string, string> = {}): Promise<void> {
  const m = await json(`${kernelUrl}/v1/remits`, {
    headers,
    body: { tools: ['test.echo'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
  });
  expect(m.status).toBe(201);
  const before = (await json(`${kernelUrl}/v1/runs/${runId}/events?limit=1000`, { headers })).body.events.length;
  const call = (body: Record<string, unknown>) => json(`${gatewayUrl}/v1/tools/call`, { headers, body: { remit_token: m.body.token, run_id: runId, ...body } });
  expect((await call({ tool: 'test.echo', args: { n: 1 } })).body.ok).toBe(true);
  expect((await call({ tool: 'test.write', args: {} })).body.refusal.reason).toBe('tool_not_in_remit');
  const after = (await json(`${kernelUrl}/v1/runs/${runId}/events?limit=1000`, { headers })).body.events.slice(before);
  expect(after.map((e: any) => [e.kind, e.payload.reason ?? e.payload.outcome])).toEqual([['tool.refused', 'tool_not_in_remit']]);
}

describe('a token on one listener only (svcd(8) ENVIRONMENT: SVC_TOKEN)', () => {
  it('svcd warns at start when the kernel takes a bearer token and the gateway does not, naming the open listener; not when both do', async () => {
    const warned = async (gatewayToken: string | null): Promise<string[]> => {
      const { logger, text } = capturedLogger();
      const config = loadGatewayConfig({ data_dir: join(dir, `token-${gatewayToken ?? 'none'}`), token: gatewayToken }, { env: {}, redactor: new Redactor() });
      const kdir = tempDir();
      const d = await startSvcd({ logger, token: 'kernel-only-token', kernel: { dataDir: kdir, listen: '127.0.0.1:0', synchronous: 'NORMAL' }, gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
      try {
        return text()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { level: string; msg: string; listen?: string })
          .filter((l) => l.level === 'warn' && l.msg.includes('bearer token'))
          .map((l) => `${l.msg} @ ${l.listen === d.gatewayUrl ? 'gateway' : l.listen}`);
      } finally {
        await d.close();
        rmSync(kdir, { recursive: true, force: true });
      }
    };
    expect(await warned(null)).toEqual(['the kernel takes a bearer token and the gateway does not: any local process may call tools; set gateway.token (or SVC_TOKEN for both) @ gateway']);
    expect(await warned('gateway-token')).toEqual([]);
  });
});

describe('one process: the in-process kernel link (decisions §9, §11)', () => {
  it('verifies kernel-minted remits, appends tool.called and tool.refused to the run, and feeds the kernel tool catalog', async () => {
    const publisher = generatePublisherKey();
    const config = loadGatewayConfig({ data_dir: join(dir, 'one'), test_tools: true }, { env: {}, redactor: new Redactor() });
    await using d = await startTestDaemon({ kernel: { publishers: [`${publisher.key_id}:${publisher.public_key}`] }, gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
    expect(d.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const { runId, token } = await runWithRemit(d.kernelUrl!, d, publisher, {});
    const gw = `${d.gatewayUrl}/v1/tools/call`;

    const ok = await json(gw, { body: { remit_token: token, run_id: runId, step: 'lookup', tool: 'test.echo', args: { x: 1 } } });
    expect(ok.body).toMatchObject({ ok: true, result: { echo: { x: 1 } } });
    const refused = await json(gw, { body: { remit_token: token, run_id: runId, tool: 'test.write', args: {}, scope: 'other:*' } });
    expect(refused.body.refusal.reason).toBe('scope_not_granted');
    const malformed = await json(gw, { body: { remit_token: 'krt1.bad', run_id: runId, tool: 'test.echo', args: {} } });
    expect(malformed.body.refusal.reason).toBe('token_malformed');

    const evs = (await eventsOf(d.kernelUrl!, runId)).filter((e) => e.kind.startsWith('tool.'));
    expect(evs.map((e) => [e.kind, e.payload.reason ?? e.payload.outcome])).toEqual([
      ['tool.called', 'ok'],
      ['tool.refused', 'scope_not_granted'],
      ['tool.refused', 'token_malformed'],
    ]);
    expect(evs[0].payload).toMatchObject({ tool: 'test.echo', step: 'lookup', scopes: ['test:*'], replayed: false, args_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(evs[0].actor).toEqual({ id: 'gateway', role: 'gateway' });

    const replay = await json(`${d.kernelUrl}/v1/runs/${runId}/replay`, { method: 'POST' });
    expect(replay.body.chain_valid).toBe(true);

    expect(await d.kernel!.toolCatalog!.describe('test.write')).toMatchObject({ id: 'test.write', writes: true });
    expect(await d.kernel!.toolCatalog!.describe('nope.x')).toBeNull();

    await foreignRemitCalls(d.kernelUrl!, d.gatewayUrl!, runId);
  });
});

describe("svcd's own listeners are no tool's upstream (src/gateway/svc-listeners.ts)", () => {
  it('an http connector allowed 127.0.0.1 cannot reach the kernel or the gateway, directly or by a redirect', async () => {
    const { createServer } = await import('node:http');
    let kernelTarget = '';
    const local = createServer((req, res) => {
      if (req.url === '/to-kernel') res.writeHead(302, { location: kernelTarget }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"local":true}');
    });
    await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
    const localUrl = `http://127.0.0.1:${(local.address() as { port: number }).port}`;
    try {
      const config = loadGatewayConfig({ data_dir: join(dir, 'self'), connectors: [{ name: 'web', type: 'http', allowed_hosts: ['127.0.0.1', 'localhost', 'localhost.', '[::ffff:7f00:1]'] }] }, { env: {}, redactor: new Redactor() });
      await using d = await startTestDaemon({ gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
      kernelTarget = `${d.kernelUrl}/v1/health`;
      const mint = await json(`${d.kernelUrl}/v1/remits`, {
        body: { tools: ['web.*'], scopes: ['http:host:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
      });
      const call = (url: string) => json(`${d.gatewayUrl}/v1/tools/call`, { body: { remit_token: mint.body.token, tool: 'web.post', args: { url, json: {} } } });
      const port = new URL(d.kernelUrl!).port;
      // Every spelling of loopback is loopback: the URL parser hands [::ffff:127.0.0.1] on as [::ffff:7f00:1].
      for (const url of [`${d.kernelUrl}/v1/remits`, `http://localhost:${port}/v1/remits`, `http://localhost.:${port}/v1/remits`, `http://[::ffff:127.0.0.1]:${port}/v1/remits`, `${d.gatewayUrl}/v1/canaries/web/release`]) {
        const res = await call(url);
        expect(res.status, url).toBe(403);
        expect(res.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('is a listener of this svcd') });
      }
      // A redirect there is not followed; the POST before it was sent, so its answer is the
      // 3xx as it came, like a redirect to a host the remit does not grant (svc-gateway(5)).
      const bounced = await call(`${localUrl}/to-kernel`);
      expect(bounced.status, JSON.stringify(bounced.body)).toBe(200);
      expect(bounced.body.result).toMatchObject({ status: 302, headers: { location: kernelTarget } });
      expect((await call(`${localUrl}/ok`)).body).toMatchObject({ ok: true, result: { status: 200, json: { local: true } } });
    } finally {
      await new Promise((r) => local.close(r));
    }
  });
});

describe('two processes: the HTTP kernel link and the HTTP tool catalog (decisions §7, §9)', () => {
  it('fetches the keys, posts tool.refused with the bearer alone and tool.called with X-Svc-Remit', async () => {
    const publisher = generatePublisherKey();
    const token = 'shared-bearer-token-123';
    await using kd = await startTestDaemon({ token, kernel: { publishers: [`${publisher.key_id}:${publisher.public_key}`] } });
    const auth = { authorization: `Bearer ${token}` };
    const config = loadGatewayConfig({ data_dir: join(dir, 'two'), test_tools: true, kernel_url: kd.kernelUrl, token }, { env: {}, redactor: new Redactor() });
    const gd = await startSvcd({ logger: silentLogger, kernel: false, gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
    try {
      expect(gd.kernelUrl).toBeNull();
      const bundle = refundsBundle();
      const b = await json(`${kd.kernelUrl}/v1/bundles`, { body: { bundle, signature: signBundle(bundle, publisher) }, headers: auth });
      const m = await json(`${kd.kernelUrl}/v1/remits`, {
        headers: auth,
        body: { tools: ['test.echo'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
      });
      const r = await json(`${kd.kernelUrl}/v1/runs`, { headers: auth, body: { bundle_id: b.body.bundle_id, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: m.body.remit_id, requested_by: REQUESTER } });
      const runId = r.body.run_id;
      const call = (body: Record<string, unknown>) => json(`${gd.gatewayUrl}/v1/tools/call`, { headers: auth, body });
      expect((await call({ remit_token: m.body.token, run_id: runId, tool: 'test.echo', args: {} })).body.ok).toBe(true);
      expect((await call({ remit_token: m.body.token, run_id: runId, tool: 'test.write', args: {} })).body.refusal.reason).toBe('tool_not_in_remit');
      expect((await call({ remit_token: 'krt1.x.y', run_id: runId, tool: 'test.echo', args: {} })).body.refusal.reason).toBe('token_malformed');
      const evs = (await json(`${kd.kernelUrl}/v1/runs/${runId}/events?limit=1000`, { headers: auth })).body.events.filter((e: any) => e.kind.startsWith('tool.'));
      expect(evs.map((e: any) => [e.kind, e.payload.reason ?? e.payload.outcome])).toEqual([
        ['tool.called', 'ok'],
        ['tool.refused', 'tool_not_in_remit'],
        ['tool.refused', 'token_malformed'],
      ]);
      await foreignRemitCalls(kd.kernelUrl!, gd.gatewayUrl!, runId, auth);
      // Without the bearer the gateway answers 401.
      expect((await json(`${gd.gatewayUrl}/v1/health`)).status).toBe(401);

      const catalog = new HttpToolCatalog({ gatewayUrl: gd.gatewayUrl!, token });
      expect(await catalog.describe('test.write')).toMatchObject({ writes: true, connector: 'test' });
      expect(await catalog.describe('test.nothing')).toBeNull();
      // A wrong token: nothing is described (fail safe, D 5.2), and the operator is told once
      // per refresh, however many lookups were waiting on it.
      const warnings: Array<Record<string, unknown>> = [];
      const logger = { ...silentLogger, warn: (msg: string, fields?: Record<string, unknown>) => void warnings.push({ msg, ...fields }) };
      const wrong = new HttpToolCatalog({ gatewayUrl: gd.gatewayUrl!, token: 'not-the-token', logger });
      expect(await Promise.all([wrong.describe('test.write'), wrong.describe('test.echo')])).toEqual([null, null]);
      expect(warnings).toEqual([expect.objectContaining({ msg: expect.stringContaining('cannot read the gateway tool descriptors'), err: 'GET /v1/tools answered 401' })]);
      expect(JSON.stringify(warnings)).not.toContain(token);
    } finally {
      await gd.close();
    }
  });
});

describe('the svcd binary (decisions §11) and `svc gateway` (CLI)', () => {
  const WRAPPER = join(ROOT, 'fixtures/gateway/mcp-drift-wrapper.mjs');
  const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  it('serves the gateway beside the kernel, answers the CLI, and SIGTERM ends the MCP process group', async () => {
    const cfg = join(dir, 'gateway.yaml');
    writeFileSync(
      cfg,
      [
        'connectors:',
        '  - name: everything',
        '    type: mcp',
        `    command: [node, ${JSON.stringify(WRAPPER)}, --stderr-env, API_SECRET, --, node, ${JSON.stringify(EVERYTHING)}, stdio]`,
        '    env: {API_SECRET: "${BIN_SECRET}"}',
        '    probe: {tool: echo, args: {message: hi}}',
      ].join('\n'),
    );
    const dataDir = join(dir, 'bin-kernel');
    const gwData = join(dir, 'bin-gateway');
    mkdirSync(dataDir, { recursive: true });
    const secret = 'binary-secret-9911aa';
    const svcd = await spawnSvcd(['--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg], {
      SVC_GATEWAY_TEST_TOOLS: '1',
      SVC_GATEWAY_DATA: gwData,
      BIN_SECRET: secret,
      SVC_TOKEN: '',
    });
    try {
      expect(svcd.kernelUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(svcd.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const env = { SVC_GATEWAY_URL: svcd.gatewayUrl!, SVC_TOKEN: '' };

      const tools = await runSvc(['gateway', 'tools', '--json'], env);
      expect(tools.code).toBe(0);
      const ids = (JSON.parse(tools.stdout) as Array<{ id: string }>).map((t) => t.id);
      expect(ids).toEqual(expect.arrayContaining(['everything.echo', 'test.echo', 'test.write']));
      const human = await runSvc(['gateway', 'tools'], env);
      expect(human.stdout).toMatch(/TOOL\s+WRITES\s+SCOPE/);

      const m = await json(`${svcd.kernelUrl}/v1/remits`, {
        body: { tools: ['test.echo', 'everything.*'], scopes: ['test:*', 'mcp:everything:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
      });
      const call = await runSvc(['gateway', 'call', 'test.echo', '--args', '{"a":1}', '--remit-token', m.body.token], env);
      expect(call.code).toBe(0);
      expect(JSON.parse(call.stdout)).toEqual({ echo: { a: 1 } });
      const refused = await runSvc(['gateway', 'call', 'test.write', '--remit-token', m.body.token, '--json'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('refused (tool_not_in_remit)');
      expect(JSON.parse(refused.stdout).refusal.reason).toBe('tool_not_in_remit');
      const usage = await runSvc(['gateway', 'call', 'test.echo', '--args', '[1]', '--remit-token', 'x'], env);
      expect(usage.code).toBe(2);
      const leak = await runSvc(['gateway', 'call', 'everything.get-env', '--remit-token', m.body.token, '--json'], env);
      expect(leak.code).toBe(0);
      expect(leak.stdout).toContain('API_SECRET');
      expect(leak.stdout).not.toContain(secret);

      await json(`${svcd.gatewayUrl}/v1/test/shape`, { body: { shape: {} } });
      const probe = await runSvc(['gateway', 'probe', 'test'], env);
      expect(probe.code).toBe(1); // a probe that did not pass fails the command (svc(1))
      expect(probe.stdout).toContain('test: failed (1 consecutive failure)');
      expect(probe.stdout).toContain('missing: ok');
      expect(probe.stderr).toContain('the probe of test did not pass: failed');
      const passing = await runSvc(['gateway', 'probe', 'everything'], env);
      expect(passing.code).toBe(0);
      expect(passing.stdout.trim()).toBe('everything: healthy (0 consecutive failures)');
      const canaries = await runSvc(['gateway', 'canaries', '--json'], env);
      expect(JSON.parse(canaries.stdout)).toMatchObject({ test: { status: 'failed' }, everything: { status: 'healthy' } });
      // Only a quarantine is released (I 3); a failing connector's status is answered
      // unchanged (D §9), and the CLI says nothing was released.
      const release = await runSvc(['gateway', 'release', 'test', '--json'], env);
      expect(release.code).toBe(0);
      expect(JSON.parse(release.stdout)).toMatchObject({ connector: 'test', status: 'failed', consecutive_failures: 1 });
      const said = await runSvc(['gateway', 'release', 'test'], env);
      expect(said.code).toBe(0);
      expect(said.stdout).toContain('test: failed (1 consecutive failure)');
      expect(said.stderr).toBe('svc: test is failed, not quarantined: nothing was released\n');
      expect((await runSvc(['gateway', 'probe', 'nope'], env)).code).toBe(1);

      const pids = [...svcd.stderr().matchAll(/child-pid=(\d+)/g)].map((x) => Number(x[1]));
      expect(pids.length).toBeGreaterThanOrEqual(1);
      expect(pids.every(isAlive)).toBe(true);
      expect(await svcd.stop('SIGTERM')).toBe(0);
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && pids.some(isAlive)) await new Promise((r) => setTimeout(r, 50));
      expect(pids.filter(isAlive)).toEqual([]);
      expect(svcd.stderr()).not.toContain(secret);
      expect(svcd.stderr()).toContain('API_SECRET=[REDACTED]');
    } finally {
      await svcd.stop('SIGKILL');
    }
  }, 60_000);

  /** Running, not a zombie left for an init that does not reap (this sandbox's pid 1). */
  function running(pid: number): boolean {
    try {
      return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false;
    }
  }
  async function statementPid(gwData: string, parent: number): Promise<number> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const kids = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      const host = kids.find((k) => readFileSync(`/proc/${k}/cmdline`, 'utf8').includes('better-sqlite3'));
      if (host) return host;
      if (Date.now() > deadline) throw new Error(`no statement process under ${parent} (${gwData})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('a slow sqlite statement holds up neither the kernel nor SIGTERM, and dies with a SIGKILLed svcd (docs/design.md, "Upstreams are hostile peers too")', async () => {
    const db = join(dir, 'slow.db');
    const { default: Database } = await import('better-sqlite3');
    const file = new Database(db);
    file.exec('CREATE TABLE IF NOT EXISTS t (v INTEGER)');
    file.close();
    const cfg = join(dir, 'slow-sqlite.yaml');
    const count = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n) SELECT count(*) AS n FROM c, (SELECT count(*) FROM t)';
    writeFileSync(cfg, ['connectors:', '  - name: slow', '    type: sqlite', `    path: ${JSON.stringify(db)}`, '    timeout_ms: 60000', '    tools:', '      count:', `        statement: ${JSON.stringify(count)}`].join('\n'));
    const args = (name: string) => ['--data-dir', join(dir, `${name}-kernel`), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg, '--drain-seconds', '1'];
    const env = (name: string) => ({ SVC_GATEWAY_DATA: join(dir, `${name}-gateway`), SVC_TOKEN: '' });
    const slowCall = async (svcd: { kernelUrl: string | null; gatewayUrl: string | null }) => {
      const m = await json(`${svcd.kernelUrl}/v1/remits`, {
        body: { tools: ['slow.*'], scopes: ['sql:table:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER },
      });
      expect(m.status).toBe(201);
      const call = json(`${svcd.gatewayUrl}/v1/tools/call`, { body: { remit_token: m.body.token, tool: 'slow.count', args: { n: 1e12 } } }).catch((e: Error) => e);
      await new Promise((r) => setTimeout(r, 300)); // the statement is running now
      return { call }; // wrapped: an async function returning the promise would wait for it
    };

    const svcd = await spawnSvcd(args('term'), env('term'));
    try {
      const host = await statementPid(join(dir, 'term-gateway'), svcd.child.pid!);
      const { call } = await slowCall(svcd);
      const t0 = Date.now();
      const health = await json(`${svcd.kernelUrl}/v1/health`);
      expect(health.status).toBe(200);
      expect(Date.now() - t0).toBeLessThan(1000); // the kernel answers while the statement runs
      const stopped = Date.now();
      expect(await svcd.stop('SIGTERM')).toBe(0);
      expect(Date.now() - stopped).toBeLessThan(10_000); // the drain (1 s), not the statement, set the pace
      expect(running(host)).toBe(false);
      await call;
    } finally {
      await svcd.stop('SIGKILL');
    }

    const killed = await spawnSvcd(args('kill'), env('kill'));
    let host = 0;
    try {
      host = await statementPid(join(dir, 'kill-gateway'), killed.child.pid!);
      const { call } = await slowCall(killed);
      await killed.stop('SIGKILL');
      await call;
      // Its watchdog ends the orphan within a second, statement or not.
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && running(host)) await new Promise((r) => setTimeout(r, 50));
      expect(running(host)).toBe(false);
    } finally {
      await killed.stop('SIGKILL');
      if (host && running(host)) process.kill(host, 'SIGKILL');
    }
  }, 60_000);

  it('what an MCP server left running when it ended with a SIGKILLed svcd is ended by the next svcd (D §9: the whole group; mcp-groups.ts)', async () => {
    // The leader is the server itself, which ends at the close of its stdin; the `sleep` it
    // started lives on in its group with no leader to find it by.
    const cfg = join(dir, 'leaky.yaml');
    writeFileSync(cfg, ['connectors:', '  - name: leaky', '    type: mcp', `    command: [sh, -c, ${JSON.stringify(`sleep 601 & exec node ${EVERYTHING} stdio`)}]`].join('\n'));
    const gwData = join(dir, 'leaky-gateway');
    const args = ['--data-dir', join(dir, 'leaky-kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg];
    const env = { SVC_GATEWAY_DATA: gwData, SVC_TOKEN: '' };
    const first = await spawnSvcd(args, env);
    const [leader] = Object.keys(JSON.parse(readFileSync(join(gwData, 'mcp-groups.json'), 'utf8'))).filter((k) => k !== 'gateway').map(Number);
    const children = readdirSync('/proc')
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === leader; // ppid
        } catch {
          return false;
        }
      });
    expect(children).toHaveLength(1);
    const sleeper = children[0]!;
    await first.stop('SIGKILL');
    const gone = Date.now() + 5000;
    while (Date.now() < gone && isAlive(leader!)) await new Promise((r) => setTimeout(r, 50));
    expect(isAlive(leader!)).toBe(false); // the server ended at the close of its stdin…
    expect(isAlive(sleeper)).toBe(true); // …and left this behind, with no leader
    // A process marked by someone else's server is not ours to end.
    const decoy = spawn('sleep', ['602'], { env: { ...process.env, SVC_MCP_GROUP: 'someone-else' }, stdio: 'ignore', detached: true });
    const second = await spawnSvcd(args, env);
    try {
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && isAlive(sleeper)) await new Promise((r) => setTimeout(r, 50));
      expect(isAlive(sleeper)).toBe(false);
      expect(await waitOutput(second.stderr, 'ended a process an MCP server left running')).toContain(`"pid":${sleeper}`);
      expect(isAlive(decoy.pid!)).toBe(true);
      const [own] = Object.keys(JSON.parse(readFileSync(join(gwData, 'mcp-groups.json'), 'utf8'))).filter((k) => k !== 'gateway').map(Number);
      expect(own).not.toBe(leader);
      expect(isAlive(own!)).toBe(true); // its own server, started after the sweep
      expect(await second.stop('SIGTERM')).toBe(0);
    } finally {
      await second.stop('SIGKILL');
      if (isAlive(sleeper)) process.kill(sleeper, 'SIGKILL');
      decoy.kill('SIGKILL');
    }
  }, 60_000);

  it('a record written by a gateway that still runs (a copied data directory) is left alone; once that gateway is gone, its servers are ended', async () => {
    const gwData = join(dir, 'copied-gateway');
    mkdirSync(gwData, { recursive: true });
    const startOf = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
    };
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const server = spawn('sleep', ['603'], { stdio: 'ignore', detached: true }); // leads its own group, as a server does
    await new Promise((r) => server.once('spawn', r));
    const record = (owner: { pid: number; start: string }) =>
      writeFileSync(join(gwData, 'mcp-groups.json'), JSON.stringify({ [server.pid!]: { start: startOf(server.pid!), boot, connector: 'copied' }, gateway: { ...owner, boot } }));
    const args = ['--data-dir', join(dir, 'copied-kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'];
    const env = { SVC_GATEWAY_DATA: gwData, SVC_TOKEN: '' };
    try {
      record({ pid: process.pid, start: startOf(process.pid) }); // this test process: alive
      const first = await spawnSvcd(args, env);
      try {
        expect(await waitOutput(first.stderr, 'belong to a gateway that still runs')).toContain(`"pid":${process.pid}`);
        expect(isAlive(server.pid!)).toBe(true);
        expect(await first.stop('SIGTERM')).toBe(0);
      } finally {
        await first.stop('SIGKILL'); // a failed expectation above must not leave it running
      }

      record({ pid: process.pid, start: '1' }); // the pid, but not the process that wrote it
      const second = await spawnSvcd(args, env);
      try {
        const deadline = Date.now() + 5000;
        while (Date.now() < deadline && isAlive(server.pid!)) await new Promise((r) => setTimeout(r, 50));
        expect(isAlive(server.pid!)).toBe(false);
      } finally {
        await second.stop('SIGTERM');
      }
    } finally {
      server.kill('SIGKILL');
    }
  }, 60_000);

  it('an MCP server that outlives a SIGKILLed svcd is ended by the next svcd on the directory (src/gateway/connectors/mcp-groups.ts)', async () => {
    // The group leader is a shell that goes on sleeping after the server exits at the end of
    // its stdin: the kind of server that survives its gateway.
    const cfg = join(dir, 'stubborn.yaml');
    writeFileSync(
      cfg,
      ['connectors:', '  - name: stubborn', '    type: mcp', `    command: [sh, -c, ${JSON.stringify(`node ${EVERYTHING} stdio; exec sleep 600`)}]`].join('\n'),
    );
    const gwData = join(dir, 'stubborn-gateway');
    const args = ['--data-dir', join(dir, 'stubborn-kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg];
    const env = { SVC_GATEWAY_DATA: gwData, SVC_TOKEN: '' };
    const first = await spawnSvcd(args, env);
    const recorded = () => Object.keys(JSON.parse(readFileSync(join(gwData, 'mcp-groups.json'), 'utf8'))).filter((k) => k !== 'gateway').map(Number);
    const [leader] = recorded();
    expect(leader).toBeGreaterThan(1);
    await first.stop('SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    expect(isAlive(leader!)).toBe(true); // the orphan this test is about
    const second = await spawnSvcd(args, env);
    try {
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && isAlive(leader!)) await new Promise((r) => setTimeout(r, 50));
      expect(isAlive(leader!)).toBe(false);
      expect(await waitOutput(second.stderr, 'ended an MCP server left running')).toContain('ended an MCP server left running by a gateway that did not stop');
      // Its own server is recorded in the orphan's place, and ended by an orderly stop.
      const [own] = recorded();
      expect(own).not.toBe(leader);
      expect(await second.stop('SIGTERM')).toBe(0);
      expect(recorded()).toEqual([]);
      expect(isAlive(own!)).toBe(false);
    } finally {
      await second.stop('SIGKILL');
      try {
        process.kill(-leader!, 'SIGKILL');
      } catch {
        /* ended */
      }
    }
  }, 60_000);

  it('the gateway: section of --config, --no-kernel, --no-gateway, and the JSON startup line', async () => {
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, 'gateway:\n  test_tools: true\n  canary: {interval_seconds: 120}\n');
    const svcd = await spawnSvcd(['--config', cfg, '--no-kernel', '--gateway-listen', '127.0.0.1:0'], { SVC_GATEWAY_DATA: join(dir, 'cfg-gw'), SVC_TOKEN: '', SVC_GATEWAY_TEST_TOOLS: '' });
    try {
      expect(svcd.kernelUrl).toBeNull();
      const tools = (await json(`${svcd.gatewayUrl}/v1/tools`)).body as Array<{ id: string }>;
      expect(tools.map((t) => t.id)).toContain('test.echo');
    } finally {
      expect(await svcd.stop()).toBe(0);
    }
    const noGw = await spawnSvcd(['--no-gateway', '--data-dir', join(dir, 'nogw'), '--kernel-listen', '127.0.0.1:0'], { SVC_TOKEN: '', SVC_GATEWAY_URL: '' });
    try {
      expect(noGw.gatewayUrl).toBeNull();
      expect(noGw.kernelUrl).not.toBeNull();
    } finally {
      await noGw.stop();
    }
    // Without the gateway's address nothing describes the tools: every proposal is decided as
    // a write to a system of record, which an operator of a split deployment learns at start.
    const warning = 'the kernel runs without a gateway and without its address (SVC_GATEWAY_URL or kernel.gateway_url)';
    expect(noGw.stderr()).toContain(warning);
    const withUrl = await spawnSvcd(['--no-gateway', '--data-dir', join(dir, 'nogw'), '--kernel-listen', '127.0.0.1:0'], { SVC_TOKEN: '', SVC_GATEWAY_URL: 'http://127.0.0.1:7402' });
    await withUrl.stop();
    expect(withUrl.stderr()).not.toContain(warning);
  }, 30_000);

  it('a bad gateway config stops svcd at startup with every problem listed', async () => {
    const cfg = join(dir, 'bad.yaml');
    writeFileSync(cfg, 'listen: 5\nconnectors:\n  - {name: db, type: sqlite}\n  - {name: web, type: http, allowed_hosts: []}\n  - {name: m, type: mcp, command: [x], env: {K: "${MISSING_VAR_XYZ}"}}\n');
    const err = await spawnSvcd(['--no-kernel', '--gateway-config', cfg, '--gateway-listen', '127.0.0.1:0'], { SVC_GATEWAY_DATA: join(dir, 'bad-gw'), SVC_TOKEN: '' }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    const msg = (err as Error).message;
    expect(msg).toMatch(/svcd exited 1/);
    for (const p of ['/listen: must be a string', '/connectors/0/path: is required', '/connectors/1/allowed_hosts', 'MISSING_VAR_XYZ is not set']) expect(msg).toContain(p);
  }, 30_000);
});
