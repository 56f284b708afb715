/**
 * The mcp connector against real MCP servers over stdio (interface 2.10, 4.2; decisions §9):
 * @modelcontextprotocol/server-everything and @modelcontextprotocol/server-filesystem, each
 * behind fixtures/gateway/mcp-drift-wrapper.mjs (which adds x-svc-scope and, on a flag file,
 * definition drift). One gateway and its servers are shared by the whole file.
 *
 * Covers: list, call, writes from readOnlyHint, x-svc-scope, isError, crash and restart,
 * drift as contract_diff.unexpected_required with quarantine, the leak test (a `${VAR}`
 * secret given to a server's env and read back with get-env appears in no response, event,
 * metric or log line), and the end of every process group when the gateway stops.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpConnector, unboundedByPrefix } from '../../src/gateway/connectors/mcp.js';
import { killGroup } from '../../src/gateway/connectors/mcp-transport.js';
import { Redactor } from '../../src/log/logger.js';
import { isAlive, ROOT, tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

const SECRET = 'leak-canary-7f3a9c1e5b';
const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const FILESYSTEM = join(ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const WRAPPER = join(ROOT, 'fixtures/gateway/mcp-drift-wrapper.mjs');

const signer = testSigner();
const dir = tempDir('svc-gw-mcp-');
const fsRoot = join(dir, 'files');
const driftFlag = join(dir, 'drift.flag');
const redactor = new Redactor();
const log = capturedLogger(redactor);
let gw: TestGateway;

const token = (tools: string[], scopes: string[], autonomy: 'autonomous' | 'propose' = 'autonomous', run?: string) =>
  mintToken(signer, remitPayload(signer, { tools, scopes, autonomy, ...(run ? { run } : {}) }));

function childPids(): number[] {
  return [...log.text().matchAll(/child-pid=(\d+)/g)].map((m) => Number(m[1]));
}

async function until<T>(what: string, fn: () => T | Promise<T>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  mkdirSync(fsRoot, { recursive: true });
  writeFileSync(join(fsRoot, 'a.txt'), 'alpha from mcp');
  gw = await startGateway({
    keys: signer,
    redactor,
    logger: log.logger,
    mcp: { initialBackoffMs: 100, maxBackoffMs: 400 },
    env: { LEAK_SECRET: SECRET, SVC_CANARY_QUARANTINE_AFTER: '2' },
    doc: {
      connectors: [
        {
          name: 'everything',
          type: 'mcp',
          command: ['node', WRAPPER, '--stderr-env', 'SERVER_SECRET', '--', 'node', EVERYTHING, 'stdio'],
          env: { SERVER_SECRET: '${LEAK_SECRET}' },
          probe: { tool: 'echo', args: { message: 'canary' } },
        },
        {
          name: 'fsmcp',
          type: 'mcp',
          command: ['node', WRAPPER, '--scope', 'read_text_file=path', '--', 'node', FILESYSTEM, fsRoot],
          tools: { read_text_file: { description: 'Read a file (scoped by path)' } },
        },
        {
          name: 'drift',
          type: 'mcp',
          command: ['node', WRAPPER, '--flag', driftFlag, '--require', 'echo=level', '--', 'node', EVERYTHING, 'stdio'],
          probe: { tool: 'drift.echo', args: { message: 'canary' } },
        },
      ],
    },
  });
}, 60_000);

afterAll(async () => {
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('unboundedByPrefix: x-svc-scope values a prefix grant cannot bound (svc-gateway(5) mcp)', () => {
  it('finds a .. segment or a NUL as a path or URL reader would, and leaves dots inside names alone', () => {
    const unbounded = ['/d/pub/../s', '/d/pub/%2e%2E/s', '/d/pub/%252e%252e/s', '/d/pub/.\t./s', '/d/pub/.\r\n./s', '/d/pub/..?x', '/d/pub/..#x', '/d/pub/..;x', '/d/pub/\uFF0E\uFF0E/s', '/d/pub/\u2025/s', '/d/pub\\..\\s', '/d/pub/a\u0000', '/d/pub/%00', '..'];
    for (const v of unbounded) expect(unboundedByPrefix(v), JSON.stringify(v)).toBe(true);
    for (const v of ['/d/pub/ok.txt', '/d/pub/..notes', '/d/pub/./a', 'v1.2', 'a..b', 42 .toString()]) expect(unboundedByPrefix(v), v).toBe(false);
  });
});

describe('list (interface 4.2 GET /tools; decisions §9 writes from readOnlyHint, x-svc-scope)', () => {
  it('exposes every server tool as <name>.<tool> with its input schema', async () => {
    const tools = (await gw.req('GET', '/tools')).body as Array<Record<string, any>>;
    const byId = new Map(tools.map((t) => [t.id, t]));
    expect(byId.get('everything.echo')).toMatchObject({
      connector: 'everything',
      writes: false,
      scope_derivation: 'none',
      input_schema: { type: 'object', required: ['message'] },
      contract: { required: { content: 'list' } },
    });
    expect(byId.get('everything.toggle-simulated-logging')?.writes).toBe(true);
    expect(byId.get('fsmcp.write_file')?.writes).toBe(true);
    expect(byId.get('fsmcp.read_text_file')).toMatchObject({ writes: false, scope_derivation: 'x-svc-scope', description: 'Read a file (scoped by path)' });
    expect(byId.has('drift.echo')).toBe(true);
  });
});

describe('call', () => {
  it('calls a tool over stdio; the remit needs the literal mcp:<server>:* without x-svc-scope', async () => {
    const res = await gw.call({ remit_token: token(['everything.echo'], ['mcp:everything:*']), tool: 'everything.echo', args: { message: 'hello' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, scope: 'mcp:everything:*', result: { content: [{ type: 'text', text: 'Echo: hello' }] } });
    const other = await gw.call({ remit_token: token(['everything.echo'], ['mcp:drift:*']), tool: 'everything.echo', args: { message: 'hello' } });
    expect(other.body.refusal.reason).toBe('scope_not_granted');
    // Interface 5.3 step 6 names the literal `<connector>:*`: it grants the call as well, and
    // the derived scope reported stays the 4.2 table's `mcp:<server>:*`.
    const short = await gw.call({ remit_token: token(['everything.echo'], ['everything:*']), tool: 'everything.echo', args: { message: 'hello' } });
    expect(short.body).toMatchObject({ ok: true, scope: 'mcp:everything:*' });
    const otherShort = await gw.call({ remit_token: token(['everything.echo'], ['drift:*']), tool: 'everything.echo', args: { message: 'hello' } });
    expect(otherShort.body.refusal.reason).toBe('scope_not_granted');
    // Only the exact literal: a pattern that merely covers it (`ever*`, `everything:x*`) is
    // about another system's scopes and grants nothing here.
    const glob = await gw.call({ remit_token: token(['everything.echo'], ['ever*']), tool: 'everything.echo', args: { message: 'hello' } });
    expect(glob.body.refusal.reason).toBe('scope_not_granted');
    // The request's own scope may name it too.
    const asked = await gw.call({ remit_token: token(['everything.echo'], ['everything:*']), tool: 'everything.echo', args: { message: 'hello' }, scope: 'everything:*' });
    expect(asked.body).toMatchObject({ ok: true, scope: 'mcp:everything:*' });
    const sum = await gw.call({ remit_token: token(['everything.*'], ['mcp:everything:*']), tool: 'everything.get-sum', args: { a: 2, b: 3 } });
    expect(sum.body.result.content[0].text).toContain('5');
  });

  it('checks arguments against the server input schema (422 args_invalid)', async () => {
    const res = await gw.call({ remit_token: token(['everything.*'], ['mcp:everything:*']), tool: 'everything.echo', args: {} });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'args_invalid', details: { errors: [{ path: '/message' }] } });
  });

  it('x-svc-scope makes the named argument the scope: mcp:<server>:<value>', async () => {
    const real = realpathSync(fsRoot);
    const file = join(real, 'a.txt');
    const ok = await gw.call({ remit_token: token(['fsmcp.read_text_file'], [`mcp:fsmcp:${real}/*`]), tool: 'fsmcp.read_text_file', args: { path: file } });
    expect(ok.body).toMatchObject({ ok: true, scope: `mcp:fsmcp:${file}`, result: { content: [{ type: 'text', text: 'alpha from mcp' }] } });
    const denied = await gw.call({ remit_token: token(['fsmcp.read_text_file'], ['mcp:fsmcp:/etc/*']), tool: 'fsmcp.read_text_file', args: { path: file } });
    expect(denied.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining(`mcp:fsmcp:${file}`) });
    // An empty value would name no scope at all (a bare `mcp:fsmcp:`): args_invalid.
    const empty = await gw.call({ remit_token: token(['fsmcp.read_text_file'], ['mcp:fsmcp:*']), tool: 'fsmcp.read_text_file', args: { path: '' } });
    expect(empty.status).toBe(422);
    expect(empty.body.error).toMatchObject({ code: 'args_invalid', message: expect.stringContaining('non-empty string or a number') });
  });

  it('an x-svc-scope value a prefix cannot bound (a ".." segment, also %2e%2e, or a NUL) needs the whole server: <dir>/pub/* does not reach <dir>/secret (I 5.3 step 6)', async () => {
    const real = realpathSync(fsRoot);
    mkdirSync(join(real, 'pub'), { recursive: true });
    writeFileSync(join(real, 'pub', 'ok.txt'), 'public');
    writeFileSync(join(real, 'secret.txt'), 'TOP-SECRET');
    const prefix = token(['fsmcp.read_text_file'], [`mcp:fsmcp:${real}/pub/*`]);
    const inside = await gw.call({ remit_token: prefix, tool: 'fsmcp.read_text_file', args: { path: join(real, 'pub', 'ok.txt') } });
    expect(inside.body).toMatchObject({ ok: true, result: { content: [{ text: 'public' }] } });
    // Dots inside a name and a "." segment are no way out.
    writeFileSync(join(real, 'pub', '..notes.v2.txt'), 'dots');
    for (const path of [join(real, 'pub', '..notes.v2.txt'), `${real}/pub/./ok.txt`]) {
      const res = await gw.call({ remit_token: prefix, tool: 'fsmcp.read_text_file', args: { path } });
      expect(res.status, path).toBe(200);
    }
    const escapes = [`${real}/pub/../secret.txt`, `${real}/pub/%2e%2E/secret.txt`, `${real}/pub\\..\\secret.txt`, `${real}/pub/ok.txt\u0000`];
    for (const path of escapes) {
      const refused = await gw.call({ remit_token: prefix, tool: 'fsmcp.read_text_file', args: { path } });
      expect(refused.status, path).toBe(403);
      expect(refused.body.refusal, path).toMatchObject({ reason: 'scope_not_granted' });
      // Under the granted prefix as written, what is missing is the whole server.
      if (path.startsWith(`${real}/pub/`)) expect(refused.body.refusal.detail, path).toContain('scope mcp:fsmcp:* is not granted');
      expect(JSON.stringify(refused.body)).not.toContain('TOP-SECRET');
    }
    // The whole server granted: nothing can leave it, and the server's own confinement decides.
    const whole = await gw.call({ remit_token: token(['fsmcp.read_text_file'], ['mcp:fsmcp:*']), tool: 'fsmcp.read_text_file', args: { path: `${real}/pub/../secret.txt` } });
    expect(whole.body).toMatchObject({ ok: true, scopes: [`mcp:fsmcp:${real}/pub/../secret.txt`, 'mcp:fsmcp:*'], result: { content: [{ text: 'TOP-SECRET' }] } });
  });

  it('a tool without readOnlyHint is a write: refused under propose', async () => {
    const res = await gw.call({ remit_token: token(['fsmcp.*'], ['mcp:fsmcp:*'], 'propose'), tool: 'fsmcp.write_file', args: { path: join(fsRoot, 'w.txt'), content: 'x' } });
    expect(res.body.refusal.reason).toBe('autonomy_too_low');
    expect(existsSync(join(fsRoot, 'w.txt'))).toBe(false);
  });

  it('a request the server refuses (JSON-RPC -32600, a task-only tool) is 422 deterministic_failure and never opens the circuit', async () => {
    for (let i = 0; i < 6; i++) {
      const res = await gw.call({ remit_token: token(['everything.*'], ['mcp:everything:*']), tool: 'everything.simulate-research-query', args: { topic: 'x' } });
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'deterministic_failure', details: { mcp_code: -32600 } });
    }
    const echo = await gw.call({ remit_token: token(['everything.echo'], ['mcp:everything:*']), tool: 'everything.echo', args: { message: 'still closed' } });
    expect(echo.status).toBe(200);
  });

  it('a tool result with isError is 422 deterministic_failure', async () => {
    const res = await gw.call({ remit_token: token(['fsmcp.*'], ['mcp:fsmcp:*']), tool: 'fsmcp.read_text_file', args: { path: '/etc/hostname' } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('deterministic_failure');
  });
});

describe('crash and restart (decisions §9: restart with backoff)', () => {
  it('a killed server is restarted and serves again', async () => {
    const c = gw.gateway.connectors.get('everything') as McpConnector;
    const pid = c.pid!;
    const generation = c.generation;
    expect(killGroup(pid, 'SIGKILL')).toBe(true);
    await until('the server to be seen down', () => c.state !== 'ready');
    const down = await gw.call({ remit_token: token(['everything.echo'], ['mcp:everything:*']), tool: 'everything.echo', args: { message: 'while down' } });
    // The restart may already have happened (200); if not, the call is an upstream error.
    expect([200, 502]).toContain(down.status);
    if (down.status === 502) expect(down.body.error.code).toBe('upstream_error');
    await until('the restart', () => c.state === 'ready' && c.generation > generation);
    expect(c.pid).not.toBe(pid);
    expect(isAlive(pid)).toBe(false);
    const res = await gw.call({ remit_token: token(['everything.echo'], ['mcp:everything:*']), tool: 'everything.echo', args: { message: 'back' } });
    expect(res.body.result.content[0].text).toBe('Echo: back');
  }, 20_000);
});

describe('definition drift (decisions §9: contract_diff.unexpected_required)', () => {
  it('a server that starts requiring an input is reported, fails its canary and is quarantined; release after it is fixed', async () => {
    const clean = await gw.req('POST', '/canaries/drift/probe');
    expect(clean.body).toMatchObject({ status: 'healthy', contract_diff: { missing: [], type_mismatch: [], unexpected_required: [] } });

    writeFileSync(driftFlag, 'on');
    const first = await gw.req('POST', '/canaries/drift/probe');
    // Decisions §9 lists input fields: the field's name; the tool that requires it is named in
    // last_error and the repair file.
    expect(first.body).toMatchObject({ status: 'failed', consecutive_failures: 1, contract_diff: { unexpected_required: ['level'] } });
    expect(first.body.last_error).toContain('level (drift.echo)');
    const second = await gw.req('POST', '/canaries/drift/probe');
    expect(second.body.status).toBe('quarantined');
    const repair = JSON.parse(readFileSync(second.body.repair_file, 'utf8'));
    expect(repair).toMatchObject({
      connector: 'drift',
      diff: { unexpected_required: ['level'] },
      drift: [{ tool: 'drift.echo', field: 'level', input_schema: { required: ['message'] } }],
      probe: { tool: 'drift.echo' },
    });
    // The served descriptor did not silently change.
    const tools = (await gw.req('GET', '/tools')).body as Array<Record<string, any>>;
    expect(tools.find((t) => t.id === 'drift.echo')!.input_schema.required).toEqual(['message']);
    const blocked = await gw.call({ remit_token: token(['drift.*'], ['mcp:drift:*']), tool: 'drift.echo', args: { message: 'x' } });
    expect(blocked.status).toBe(503);

    unlinkSync(driftFlag);
    expect((await gw.req('POST', '/canaries/drift/probe')).body).toMatchObject({ status: 'quarantined', contract_diff: { unexpected_required: [] } });
    expect((await gw.req('POST', '/canaries/drift/release')).body.status).toBe('healthy');
    expect((await gw.call({ remit_token: token(['drift.*'], ['mcp:drift:*']), tool: 'drift.echo', args: { message: 'x' } })).status).toBe(200);
  });
});

describe('the orphan record (src/gateway/connectors/mcp-groups.ts)', () => {
  it('a second gateway opened in this process on the same directory leaves the first one\'s servers alone', async () => {
    const leaders = Object.keys(JSON.parse(readFileSync(join(gw.dataDir, 'mcp-groups.json'), 'utf8'))).filter((k) => k !== 'gateway').map(Number);
    expect(leaders.length).toBeGreaterThanOrEqual(3); // everything, fsmcp, drift
    const second = await startGateway({ keys: signer, dataDir: gw.dataDir, doc: {} });
    await second.close();
    expect(leaders.every(isAlive)).toBe(true);
    const echo = await gw.call({ remit_token: token(['everything.echo'], ['mcp:everything:*']), tool: 'everything.echo', args: { message: 'still here' } });
    expect(echo.status).toBe(200);
  });
});

describe('leak test (interface 2.10: a ${VAR} value never appears in logs, responses or events)', () => {
  it('a secret given to an MCP server env and read back with get-env is redacted everywhere', async () => {
    const run = 'run_LEAK';
    const t = token(['everything.*'], ['mcp:everything:*'], 'autonomous', run);
    const res = await gw.call({ remit_token: t, run_id: run, step: 'env', tool: 'everything.get-env', args: {} });
    expect(res.status).toBe(200);
    // The server really saw it: its env dump has the variable, with the value redacted.
    expect(res.text).toContain('SERVER_SECRET');
    expect(res.text).toContain('[REDACTED]');
    // A refusal whose detail would carry it, and an idempotent replay of the stored result.
    await gw.call({ remit_token: t, run_id: run, tool: 'everything.get-env', args: {}, idempotency_key: 'leak-1' });
    const replay = await gw.call({ remit_token: t, run_id: run, tool: 'everything.get-env', args: {}, idempotency_key: 'leak-1' });
    expect(replay.body.replayed).toBe(true);
    await gw.req('POST', '/canaries/everything/probe');

    const surfaces: Array<[string, string]> = [
      ['response', res.text],
      ['replayed response', replay.text],
      ['events', JSON.stringify(gw.link.events)],
      ['metrics', await gw.metrics()],
      ['tools', (await gw.req('GET', '/tools')).text],
      ['canaries', (await gw.req('GET', '/canaries')).text],
      ['health', (await gw.req('GET', '/health')).text],
      ['logs', log.text()],
      ['idempotency store', JSON.stringify(await gw.gateway.store.db.all('SELECT body FROM gateway_idempotency'))],
    ];
    for (const dirName of existsSync(join(gw.dataDir, 'repairs')) ? readdirSync(join(gw.dataDir, 'repairs')) : []) {
      surfaces.push([`repair ${dirName}`, readFileSync(join(gw.dataDir, 'repairs', dirName), 'utf8')]);
    }
    for (const [what, text] of surfaces) expect(text.includes(SECRET), `${what} leaks the secret`).toBe(false);
    // The log really carried the server's stderr line, redacted (so the check above is not vacuous).
    expect(log.text()).toContain('SERVER_SECRET=[REDACTED]');
    expect(gw.link.events.filter((e) => e.runId === run).length).toBeGreaterThanOrEqual(3);
  });
});

describe('shutdown (decisions §9: the whole process group is ended)', () => {
  it('a server that never answers initialize is ended at once on close, not after the startup timeout', async () => {
    const mute = new McpConnector(
      { name: 'mute', type: 'mcp', command: [process.execPath, '-e', 'setInterval(() => {}, 1e9)'], env: {}, tools: {}, timeout_ms: 5000 } as never,
      { logger: log.logger, startupTimeoutMs: 30_000 },
    );
    const starting = mute.start();
    const pid = (await until('the server to run', () => mute.pid))!;
    const t0 = Date.now();
    await mute.close();
    await starting;
    // stdin closed, then SIGTERM after the 2 s grace (svc-gateway(5)); far under 30 s.
    expect(Date.now() - t0).toBeLessThan(5000);
    await until('the server to end', () => !isAlive(pid), 3000);
    expect(mute.state).toBe('closed');
  });

  it('closing the gateway ends every server and the processes they started', async () => {
    const pids = [...gw.gateway.connectors.values()].map((c) => (c as McpConnector).pid!).filter(Boolean);
    const children = childPids().filter(isAlive);
    expect(pids.length).toBe(3);
    expect(children.length).toBeGreaterThanOrEqual(3);
    await gw.close();
    await until('every process to end', () => [...pids, ...children].every((p) => !isAlive(p)), 5000);
  });
});
