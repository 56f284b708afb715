/**
 * Gateway configuration (interface 2.10; decisions §9): YAML and JSON, `${VAR}` substitution
 * with every value registered for redaction, environment overrides winning over the file,
 * defaults, and every problem reported at once.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { GatewayConfigError, loadGatewayConfig, loadGatewayConfigFile } from '../../src/gateway/config.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { IdempotencyStore } from '../../src/gateway/idempotency.js';
import { compileInputSchema } from '../../src/gateway/schema-validator.js';
import { Redactor, silentLogger } from '../../src/log/logger.js';
import { isAlive, ROOT, tempDir } from '../helpers/daemon.js';

const dir = tempDir('svc-gwcfg-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatewayConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a GatewayConfigError');
}

describe('gateway config defaults (interface 2.10)', () => {
  it('an empty document gets every default', () => {
    const c = loadGatewayConfig({}, { env: {}, redactor: new Redactor() });
    expect(c).toMatchObject({
      listen: '127.0.0.1:7402',
      kernel_url: 'http://127.0.0.1:7401',
      token: null,
      test_tools: false,
      canary: { interval_seconds: 60, quarantine_after: 2, auto_release: false },
      connectors: [],
    });
    expect(c.data_dir).toBe(join(process.cwd(), 'gateway-data'));
  });
});

describe('${VAR} substitution (interface 2.10)', () => {
  it('replaces ${VAR} in every string and registers each value with the redactor', () => {
    const redactor = new Redactor();
    const c = loadGatewayConfig(
      {
        connectors: [
          { name: 'crm', type: 'http', allowed_hosts: ['api.example.com'], headers: { authorization: 'Bearer ${CRM_KEY}', 'x-literal': 'cost $${NOT_A_VAR}' } },
          { name: 'files', type: 'mcp', command: ['node', 'server.js'], env: { API_TOKEN: '${MCP_TOKEN}' } },
        ],
      },
      { env: { CRM_KEY: 'crm-secret-123', MCP_TOKEN: 'mcp "quoted" secret' }, redactor },
    );
    const http = c.connectors[0]!;
    expect(http.type === 'http' && http.headers).toEqual({ authorization: 'Bearer crm-secret-123', 'x-literal': 'cost ${NOT_A_VAR}' });
    expect(c.connectors[1]!.type === 'mcp' && c.connectors[1]!.env.API_TOKEN).toBe('mcp "quoted" secret');
    expect(redactor.redact('header crm-secret-123 and mcp "quoted" secret')).toBe('header [REDACTED] and [REDACTED]');
    // Inside JSON the quotes are escaped; that spelling is registered too.
    expect(redactor.redact(JSON.stringify({ v: 'mcp "quoted" secret' }))).toBe('{"v":"[REDACTED]"}');
  });

  it('an unset variable is a problem naming where it is used', () => {
    const p = problemsOf(() => loadGatewayConfig({ token: '${GW_TOKEN}' }, { env: {}, redactor: new Redactor() }));
    expect(p).toEqual(['/token: environment variable GW_TOKEN is not set']);
  });

  it('a ${ that starts no reference is a problem quoting it as written, closing brace and all (svc-gateway(5) SECRETS)', () => {
    const why = '(a name of letters, digits and _, not starting with a digit; $${ is a literal ${)';
    const p = problemsOf(() => loadGatewayConfig({ kernel_url: 'http://h/${1KEY}/${}', data_dir: '/d/${OPEN' }, { env: { '1KEY': 'x' }, redactor: new Redactor() }));
    expect(p).toEqual([
      `/kernel_url: "\${1KEY}" is not a valid \${VAR} reference ${why}`,
      `/kernel_url: "\${}" is not a valid \${VAR} reference ${why}`,
      `/data_dir: "\${OPEN" is not a valid \${VAR} reference ${why}`,
    ]);
  });
});

describe('environment overrides win over the file (documented in man/svc-gateway.5)', () => {
  it('SVC_GATEWAY_DATA, SVC_CANARY_*, SVC_GATEWAY_TEST_TOOLS and SVC_TOKEN replace the keys', () => {
    const c = loadGatewayConfig(
      { data_dir: '/from/file', token: 'file-token', test_tools: false, canary: { interval_seconds: 30, quarantine_after: 5, auto_release: false } },
      {
        env: { SVC_GATEWAY_DATA: '/from/env', SVC_CANARY_INTERVAL: '0.5', SVC_CANARY_QUARANTINE_AFTER: '3', SVC_CANARY_AUTO_RELEASE: '1', SVC_GATEWAY_TEST_TOOLS: '1', SVC_TOKEN: 'env-token' },
        redactor: new Redactor(),
      },
    );
    expect(c).toMatchObject({ data_dir: '/from/env', token: 'env-token', test_tools: true, canary: { interval_seconds: 0.5, quarantine_after: 3, auto_release: true } });
  });

  it('without the variables the file keys hold', () => {
    const c = loadGatewayConfig({ canary: { interval_seconds: 30 }, test_tools: true }, { env: {}, redactor: new Redactor() });
    expect(c.canary.interval_seconds).toBe(30);
    expect(c.test_tools).toBe(true);
  });

  it('malformed variables are problems, not silent defaults', () => {
    const p = problemsOf(() =>
      loadGatewayConfig({}, { env: { SVC_CANARY_INTERVAL: 'soon', SVC_CANARY_QUARANTINE_AFTER: '0', SVC_CANARY_AUTO_RELEASE: 'maybe' }, redactor: new Redactor() }),
    );
    expect(p).toHaveLength(3);
    expect(p.join('\n')).toMatch(/SVC_CANARY_INTERVAL[\s\S]*SVC_CANARY_QUARANTINE_AFTER[\s\S]*SVC_CANARY_AUTO_RELEASE/);
  });

  it('a canary interval past the longest timer Node keeps (24.8 days) is a problem: Node would run it after 1 ms, a probe storm', () => {
    expect(problemsOf(() => loadGatewayConfig({}, { env: { SVC_CANARY_INTERVAL: '2592000' }, redactor: new Redactor() }))).toEqual([
      'SVC_CANARY_INTERVAL: must be a number of seconds above 0 and at most 2147483 (24.8 days), got "2592000"',
    ]);
    const p = problemsOf(() => loadGatewayConfig({ canary: { interval_seconds: 2_592_000 } }, { env: {}, redactor: new Redactor() }));
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(/^\/canary\/interval_seconds: .*2147483/);
    expect(loadGatewayConfig({ canary: { interval_seconds: 2_147_483 } }, { env: {}, redactor: new Redactor() }).canary.interval_seconds).toBe(2_147_483);
  });

  it('only 1 enables SVC_GATEWAY_TEST_TOOLS and SVC_CANARY_AUTO_RELEASE (I 2.10): true or yes are refused, never taken as on', () => {
    for (const v of ['true', 'yes', 'on', 'TRUE', '2']) {
      const p = problemsOf(() => loadGatewayConfig({}, { env: { SVC_GATEWAY_TEST_TOOLS: v, SVC_CANARY_AUTO_RELEASE: v }, redactor: new Redactor() }));
      expect(p).toEqual([`SVC_CANARY_AUTO_RELEASE: must be 1 or 0, got "${v}"`, `SVC_GATEWAY_TEST_TOOLS: must be 1 or 0, got "${v}"`]);
    }
    const off = loadGatewayConfig({ test_tools: true, canary: { auto_release: true } }, { env: { SVC_GATEWAY_TEST_TOOLS: '0', SVC_CANARY_AUTO_RELEASE: '0' }, redactor: new Redactor() });
    expect(off.test_tools).toBe(false);
    expect(off.canary.auto_release).toBe(false);
  });
});

describe('one schema reports every problem at once', () => {
  it('a file that is a list or a scalar is told what a config is (svc-gateway(5))', () => {
    const file = join(dir, 'list.yaml');
    writeFileSync(file, '- name: db\n  type: sqlite\n');
    expect(problemsOf(() => loadGatewayConfigFile(file, { env: {}, redactor: new Redactor() }))).toEqual(['/: must be a mapping of keys (key: value lines), not a list']);
    expect(problemsOf(() => loadGatewayConfig('listen', { env: {}, redactor: new Redactor() }))).toEqual(['/: must be a mapping of keys (key: value lines), not a string']);
  });

  it('lists each problem with its JSON pointer', () => {
    const p = problemsOf(() =>
      loadGatewayConfig(
        {
          listen: 7402,
          colour: 'blue',
          canary: { interval_seconds: 0, quarantine_after: 1.5 },
          connectors: [
            { name: 'db', type: 'sqlite' },
            { name: 'web', type: 'http', allowed_hosts: [], tools: { get: { contract: { required: { status: 'integer' } } } } },
            { name: 'x', type: 'ftp' },
            { name: 'srv', type: 'mcp', command: 'node server.js' },
          ],
        },
        { env: {}, redactor: new Redactor() },
      ),
    );
    expect(p).toEqual(
      expect.arrayContaining([
        '/colour: is not a known key',
        '/listen: must be a string',
        '/canary/interval_seconds: must be > 0',
        '/canary/quarantine_after: must be an integer',
        '/connectors/0/path: is required',
        '/connectors/1/allowed_hosts: must not be empty',
        expect.stringMatching(/^\/connectors\/1\/tools\/get\/contract\/required\/status: must be one of/),
        '/connectors/2/type: type must be one of "sqlite", "http", "fs", "mcp"',
        '/connectors/3/command: must be an array',
      ]),
    );
    expect(p.length).toBeGreaterThanOrEqual(9);
  });

  it('semantic problems are collected too: duplicate names, unknown operations, probes of missing tools', () => {
    const p = problemsOf(() =>
      loadGatewayConfig(
        {
          connectors: [
            { name: 'db', type: 'sqlite', path: 'x.db', tools: { q: {} }, probe: { tool: 'db.missing' } },
            { name: 'db', type: 'fs', root: '.', tools: { delete: {} } },
          ],
        },
        { env: {}, redactor: new Redactor() },
      ),
    );
    expect(p).toEqual([
      '/connectors/0/tools/q: a sqlite tool needs a statement',
      '/connectors/0/probe/tool: connector db has no tool "missing"',
      '/connectors/1/name: "db" is already used by /connectors/0',
      '/connectors/1/tools/delete: a fs connector has only the operations read, list, write',
    ]);
    // Paths are JSON pointers: an operation name holding `/` or `~` is escaped in them.
    expect(problemsOf(() => loadGatewayConfig({ connectors: [{ name: 'db', type: 'sqlite', path: 'x.db', tools: { 'a/b~c': {} } }] }, { env: {}, baseDir: dir }))).toEqual([
      '/connectors/0/tools/a~1b~0c: a sqlite tool needs a statement',
    ]);
  });

  it('rules the schema cannot state: fixed operations keep their writes flag, only sqlite tools have statements, probes name an operation the type has (svc-gateway(5))', () => {
    const p = problemsOf(() =>
      loadGatewayConfig(
        {
          connectors: [
            { name: 'web', type: 'http', allowed_hosts: ['example.com'], tools: { get: { statement: 'SELECT 1', writes: true }, post: { writes: false } }, probe: { tool: 'web.delete' } },
            { name: 'files', type: 'fs', root: '.', tools: { read: { writes: true }, list: { writes: false }, write: { writes: false } }, probe: { tool: 'list' } },
          ],
        },
        { env: {}, redactor: new Redactor(), baseDir: dir },
      ),
    );
    expect(p).toEqual([
      '/connectors/0/tools/get/statement: only sqlite tools have statements',
      '/connectors/0/tools/get/writes: http.get never writes',
      '/connectors/0/tools/post/writes: http.post always writes',
      '/connectors/0/probe/tool: a http connector has only the operations get, post',
      '/connectors/1/tools/read/writes: fs.read never writes',
      '/connectors/1/tools/write/writes: fs.write always writes',
    ]);
    // The flag as it is (list: false, above) is no problem: writes on an http or fs tool only restates it.
    const ok = loadGatewayConfig({ connectors: [{ name: 'files', type: 'fs', root: '.', tools: { write: { writes: true }, read: { writes: false } }, probe: { tool: 'files.read' } }] }, { env: {}, redactor: new Redactor(), baseDir: dir });
    expect(ok.connectors[0]!.name).toBe('files');
  });

  it('"test" names no connector while SVC_GATEWAY_TEST_TOOLS is on: its tools would shadow the test.* tools (decisions §9)', () => {
    const doc = { connectors: [{ name: 'test', type: 'fs', root: '.' }] };
    expect(problemsOf(() => loadGatewayConfig(doc, { env: { SVC_GATEWAY_TEST_TOOLS: '1' }, redactor: new Redactor(), baseDir: dir }))).toEqual([
      '/connectors/0/name: "test" is reserved for the test tools while SVC_GATEWAY_TEST_TOOLS is on',
    ]);
    expect(loadGatewayConfig(doc, { env: {}, redactor: new Redactor(), baseDir: dir }).connectors[0]!.name).toBe('test');
  });

  it('a token no client can send as a bearer is a problem at load (decisions §9 auth), its value never shown', () => {
    expect(problemsOf(() => loadGatewayConfig({ token: 'gw-secret-77\n' }, { env: {}, redactor: new Redactor() }))).toEqual([
      '/token: begins or ends with whitespace (a newline read from a file?), which no client can send in a header',
    ]);
    expect(problemsOf(() => loadGatewayConfig({ token: '${T}' }, { env: { T: 'gw\u0007secret' }, redactor: new Redactor() }))).toEqual([
      '/token: holds a character a header cannot carry (a control character, or one above U+00FF)',
    ]);
  });

  it('an http connector header fetch could never send is a problem at load, the value never shown (svc-gateway(5) CONFIGURATION)', () => {
    const env = { KEY: 'k-secret-4711', CTL: 'a\u0001b-secret' };
    const headers = { 'bad header ${KEY}': 'x', 'x-ctl': '${CTL}', 'x-crlf': 'a\r\nInjected: 1', 'x-wide': '\u{1F600}', 'x-fine': 'Bearer ${KEY}', 'x-latin1': 'caf\u00e9\tok', 'x-file': '${KEY}\r\n' };
    const p = problemsOf(() => loadGatewayConfig({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['example.com'], headers }] }, { env, redactor: new Redactor() }));
    expect(p).toEqual([
      "/connectors/0/headers/bad header k-secret-4711: is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)",
      '/connectors/0/headers/x-ctl: the value holds a character a header cannot carry (a control character other than tab, or one above U+00FF)',
      '/connectors/0/headers/x-crlf: the value holds a character a header cannot carry (a control character other than tab, or one above U+00FF)',
      '/connectors/0/headers/x-wide: the value holds a character a header cannot carry (a control character other than tab, or one above U+00FF)',
    ]);
  });

  it('a kernel_url or listen on a port fetch refuses is a problem: the gateway could never reach the kernel, nor svc it', () => {
    expect(problemsOf(() => loadGatewayConfig({ kernel_url: 'http://127.0.0.1:6665' }, { env: {}, redactor: new Redactor() }))).toEqual([
      '/kernel_url: port 6665 is one that fetch refuses to connect to (a "bad port" of the Fetch standard); use another port',
    ]);
    expect(loadGatewayConfig({ kernel_url: 'http://127.0.0.1:7401' }, { env: {}, redactor: new Redactor() }).kernel_url).toBe('http://127.0.0.1:7401');
    // Its own listener likewise: the file's problem, named by its path.
    expect(problemsOf(() => loadGatewayConfig({ listen: '127.0.0.1:6667' }, { env: {}, redactor: new Redactor() }))).toEqual([
      '/listen: port 6667 is one that fetch refuses to connect to (a "bad port" of the Fetch standard), so svc\'s clients could never reach it; choose another port',
    ]);
  });

  it('connector setup problems (statements, roots, commands) are reported together at open', async () => {
    const dbDir = join(dir, 'setup');
    mkdirSync(dbDir, { recursive: true });
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(join(dbDir, 'a.db'));
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    db.close();
    const config = loadGatewayConfig(
      {
        data_dir: join(dbDir, 'data'),
        connectors: [
          { name: 'db', type: 'sqlite', path: join(dbDir, 'a.db'), tools: { bad: { statement: 'SELECT * FROM missing_table' }, sneaky: { statement: 'DELETE FROM t' } } },
          { name: 'files', type: 'fs', root: join(dbDir, 'no-such-dir') },
          { name: 'srv', type: 'mcp', command: [join(dbDir, 'no-such-binary')] },
        ],
      },
      { env: {}, redactor: new Redactor() },
    );
    const err = await Gateway.open({ config, logger: silentLogger, canaryLoop: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayConfigError);
    const problems = (err as GatewayConfigError).problems;
    // svc-gateway(5): every problem is `json-pointer: message`, these too.
    expect(problems).toEqual([
      expect.stringMatching(/^\/connectors\/0\/tools\/bad\/statement: statement does not prepare: no such table: missing_table$/),
      '/connectors/0/tools/sneaky/statement: the statement writes; set writes: true',
      expect.stringMatching(/^\/connectors\/1\/root: .* is not a usable directory: ENOENT$/),
      expect.stringMatching(/^\/connectors\/2\/command: cannot start .*no-such-binary: ENOENT$/),
    ]);
    expect((err as Error).message).toMatch(/^gateway config \(inline\) has 4 problems:/);
  });

  it('allowed_hosts and a connector name that break their pattern say what they allow and the fix, not the regular expression (svc-gateway(5) CONFIGURATION)', () => {
    const problems = problemsOf(() =>
      loadGatewayConfig(
        { connectors: [{ name: 'Web API', type: 'http', allowed_hosts: ['127.0.0.1:20481', 'https://api.example.com/v1', 'api.example.com/v1', '[::1]:8080', 'bad host'] }] },
        { env: {}, redactor: new Redactor() },
      ),
    );
    const host = 'must be a host name alone (api.example.com, *.example.com for its subdomains, 127.0.0.1 or [::1])';
    expect(problems).toEqual([
      '/connectors/0/name: must start with a lowercase letter, then lowercase letters, digits, _ or - (at most 63 characters): it is the first half of every tool id',
      `/connectors/0/allowed_hosts/0: ${host}, without a port: write 127.0.0.1 (allowed_hosts does not limit ports; an input_schema pattern on url can)`,
      `/connectors/0/allowed_hosts/1: ${host}, not a URL: write api.example.com (a call's url carries the scheme)`,
      `/connectors/0/allowed_hosts/2: ${host}, without a path: write api.example.com (an input_schema pattern on url can hold calls to some paths)`,
      `/connectors/0/allowed_hosts/3: ${host}, without a port: write [::1] (allowed_hosts does not limit ports; an input_schema pattern on url can)`,
      `/connectors/0/allowed_hosts/4: ${host}`,
    ]);
    expect(problems.join('\n')).not.toContain('must match pattern');
  });

  it('a sqlite parameter no argument can fill, and a probe its tool would refuse, are problems at open (svc-gateway(5) CONFIGURATION, CANARIES)', async () => {
    // Found wiring a database from the docs alone: both loaded, and the probe "passed" with
    // rows: [] while binding NULL, so the canary checked nothing.
    const dbDir = join(dir, 'setup-probe');
    mkdirSync(dbDir, { recursive: true });
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(join(dbDir, 'b.db'));
    db.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)');
    db.close();
    const config = loadGatewayConfig(
      {
        data_dir: join(dbDir, 'data'),
        connectors: [
          {
            name: 'db',
            type: 'sqlite',
            path: join(dbDir, 'b.db'),
            tools: {
              renamed: {
                statement: 'SELECT * FROM customers WHERE id = :customer_id AND email = :email AND :now IS NOT NULL',
                input_schema: { type: 'object', additionalProperties: false, properties: { id: { type: 'integer' }, email: { type: 'string' } } },
              },
              // Open schemas, or patternProperties, let any name through: no problem.
              open: { statement: 'SELECT * FROM customers WHERE id = :x', input_schema: { type: 'object' } },
              patterned: { statement: 'SELECT * FROM customers WHERE id = :x', input_schema: { type: 'object', additionalProperties: false, patternProperties: { '^x$': { type: 'integer' } } } },
            },
          },
          { name: 'db2', type: 'sqlite', path: join(dbDir, 'b.db'), tools: { customer: { statement: 'SELECT * FROM customers WHERE id = :id' } }, probe: { tool: 'customer', args: { idd: 1 } } },
          { name: 'files', type: 'fs', root: dbDir, probe: { tool: 'files.read', args: {} } },
          { name: 'db3', type: 'sqlite', path: join(dbDir, 'b.db'), tools: { customer: { statement: 'SELECT * FROM customers WHERE id = :id' } }, probe: { tool: 'customer', args: { id: 1 } } },
        ],
      },
      { env: {}, redactor: new Redactor() },
    );
    const err = await Gateway.open({ config, logger: silentLogger, canaryLoop: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayConfigError);
    expect((err as GatewayConfigError).problems).toEqual([
      "/connectors/0/tools/renamed/input_schema: the statement's :customer_id is not a property of the input schema, which allows no other (additionalProperties: false), so it would always bind NULL; add it to properties or rename the parameter",
      '/connectors/1/probe/args: do not match the input schema of db2.customer (/id is required; /idd is not allowed); the probe would never reach the upstream',
      '/connectors/2/probe/args: do not match the input schema of files.read (/path is required); the probe would never reach the upstream',
    ]);
  });
});


describe('a gateway that fails to open leaves nothing behind (svcd(8) exit 1 on a bad start)', () => {
  it("a canary state the store cannot read: the error, the connectors' processes ended, and the data directory opens again", async () => {
    const dataDir = join(dir, 'canary-init');
    const pidFile = join(dir, 'mcp.pid');
    const server = join(ROOT, 'fixtures/gateway/hostile-mcp.mjs');
    const command = [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); import(${JSON.stringify(server)})`];
    const config = loadGatewayConfig({ data_dir: dataDir, connectors: [{ name: 'srv', type: 'mcp', command }] }, { env: {}, redactor: new Redactor() });
    const read = vi.spyOn(IdempotencyStore.prototype, 'quarantined').mockRejectedValueOnce(new Error('disk I/O error'));
    let pid = 0;
    try {
      await expect(Gateway.open({ config, logger: silentLogger, canaryLoop: false })).rejects.toThrow('disk I/O error');
      pid = Number(readFileSync(pidFile, 'utf8'));
      const end = Date.now() + 3000;
      while (isAlive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(isAlive(pid)).toBe(false);
    } finally {
      read.mockRestore();
      if (pid && isAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    const again = await Gateway.open({ config, logger: silentLogger, canaryLoop: false });
    await again.close();
  });
});

describe("fs connector directory (interface 2.10: `path` is the connector definition's location key)", () => {
  const fs = (extra: Record<string, unknown>) => loadGatewayConfig({ connectors: [{ name: 'files', type: 'fs', ...extra }] }, { env: {}, baseDir: dir });
  it('is root, or path as another name for it, resolved against the base directory', () => {
    for (const c of [fs({ root: './files' }), fs({ path: './files' }), fs({ root: './files', path: './files' }), fs({ root: './files', path: join(dir, 'files') })]) {
      expect(c.connectors[0]!.type === 'fs' && c.connectors[0]!.root).toBe(join(dir, 'files'));
    }
  });
  it('neither, or two different directories, is a problem naming the key', () => {
    expect(problemsOf(() => fs({}))).toEqual(['/connectors/0/root: is required (the directory every path stays under; path is another name for it)']);
    expect(problemsOf(() => fs({ root: './a', path: './b' }))).toEqual(['/connectors/0/path: names another directory than root; give one of them']);
    expect(problemsOf(() => fs({ path: '' }))).toEqual(['/connectors/0/path: must not be empty']);
  });
});

describe('files (interface 2.10: YAML or JSON)', () => {
  it('a file that cannot be read is one problem in words, naming the file', () => {
    const missing = join(dir, 'no-such-gateway.yaml');
    const err = (() => {
      try {
        loadGatewayConfigFile(missing, { env: {}, redactor: new Redactor() });
      } catch (e) {
        return e as GatewayConfigError;
      }
      throw new Error('expected a GatewayConfigError');
    })();
    expect(err).toBeInstanceOf(GatewayConfigError);
    expect(err.problems).toEqual(['cannot read the file: no such file']);
    expect(err.message).toContain(missing);
    expect(problemsOf(() => loadGatewayConfigFile(dir, { env: {}, redactor: new Redactor() }))).toEqual(['cannot read the file: is a directory']);
  });

  it('loads YAML and JSON; relative paths resolve against the file', () => {
    const yamlFile = join(dir, 'gw.yaml');
    writeFileSync(yamlFile, 'connectors:\n  - name: files\n    type: fs\n    root: ./files\ndata_dir: ./state\n');
    const y = loadGatewayConfigFile(yamlFile, { env: {}, redactor: new Redactor() });
    expect(y.connectors[0]!.type === 'fs' && y.connectors[0]!.root).toBe(join(dir, 'files'));
    expect(y.data_dir).toBe(join(dir, 'state'));
    const jsonFile = join(dir, 'gw.json');
    writeFileSync(jsonFile, JSON.stringify({ canary: { auto_release: true } }));
    expect(loadGatewayConfigFile(jsonFile, { env: {}, redactor: new Redactor() }).canary.auto_release).toBe(true);
    // svc-gateway(5) mcp: a relative cwd is the file's directory; command's words pass as written.
    const mcpFile = join(dir, 'gw-mcp.yaml');
    writeFileSync(mcpFile, 'connectors:\n  - name: srv\n    type: mcp\n    command: [node, ./server.js]\n    cwd: .\n  - name: other\n    type: mcp\n    command: [node, ./server.js]\n');
    const m = loadGatewayConfigFile(mcpFile, { env: {}, redactor: new Redactor() }).connectors;
    expect(m.map((c) => c.type === 'mcp' && [c.command, c.cwd])).toEqual([
      [['node', './server.js'], dir],
      [['node', './server.js'], null],
    ]);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'connectors: [\n');
    expect(problemsOf(() => loadGatewayConfigFile(bad, { env: {} }))[0]).toMatch(/not valid YAML or JSON/);
  });
});

describe("a tool's input_schema (decisions §9: args against input_schema)", () => {
  it('multipleOf holds for decimals binary floating point cannot divide exactly, and still refuses what is off', () => {
    const validate = compileInputSchema({ type: 'object', properties: { amount: { type: 'number', multipleOf: 0.01 } } });
    for (const amount of [19.99, 0.07, 4.35, 1234567.89, 12345678901.23, 0, -3.3]) expect(validate({ amount }), String(amount)).toBe(true);
    expect(validate({ amount: 19.995 })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({ instancePath: '/amount', message: 'must be multiple of 0.01' });
    // Relative to the quotient, not an absolute slack: a millionth off a whole step is off.
    const whole = compileInputSchema({ type: 'number', multipleOf: 1 });
    expect([3, 1.0000001, 3.0000009, 1e-7].map((x) => whole(x))).toEqual([true, false, false, false]);
    expect(compileInputSchema({ type: 'number', multipleOf: 1000 })(1000.0009)).toBe(false);
    // Large numbers too: compared as decimals, not with a slack that grows with them.
    const two = compileInputSchema({ type: 'number', multipleOf: 2 });
    expect([2000000000000001, 2000000000000002, 1e21].map((x) => two(x))).toEqual([false, true, true]);
    expect(whole(1e15 + 0.5)).toBe(false);
    expect(validate({ amount: 12345678901234.57 })).toBe(true);
    // Cent amounts across the range, as decimals: every one a multiple of 0.01.
    for (let i = 0; i < 20_000; i++) {
      const cents = Math.floor(Math.random() * 1e13);
      const amount = Number(`${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`);
      if (!validate({ amount })) throw new Error(`${amount} refused as a multiple of 0.01`);
    }
  });

  it('reads the dialect its $schema names: a draft-07 tuple as draft-07, a 2020-12 one as 2020-12, an unnamed draft-07 one too', () => {
    const point07 = { type: 'object', properties: { point: { type: 'array', items: [{ type: 'number' }, { type: 'number' }], additionalItems: false } }, required: ['point'] };
    for (const schema of [{ $schema: 'http://json-schema.org/draft-07/schema#', ...point07 }, point07]) {
      const v = compileInputSchema(schema);
      expect([{ point: [1, 2] }, { point: ['a', 2] }, { point: [1, 2, 3] }].map((x) => v(x))).toEqual([true, false, false]);
    }
    const point2020 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', prefixItems: [{ type: 'number' }, { type: 'string' }], items: false };
    const v = compileInputSchema(point2020);
    expect([[1, 'a'], ['a', 1], [1, 'a', 2]].map((x) => v(x))).toEqual([true, false, false]);
    // A 2020-12 schema read as 2020-12: a draft-07 tuple under it is no schema of that dialect.
    expect(() => compileInputSchema({ $schema: 'https://json-schema.org/draft/2020-12/schema', ...point07 })).toThrow();
  });
});
