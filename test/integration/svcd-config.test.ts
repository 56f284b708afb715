/**
 * svcd's own configuration (decisions §11; svcd(8) CONFIGURATION, EXIT STATUS): the `kernel:`
 * section of --config is checked like the gateway's — `${VAR}` substituted, one schema,
 * every problem listed, exit 1, never a stack or a 500 later — and flag or environment values
 * svcd cannot use are errors, not silent defaults.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, spawnSvcd, tempDir } from '../helpers/daemon.js';
import { readConfigFile } from '../../daemon/config.js';
import { Redactor } from '../../src/log/logger.js';

const SVCD = join(ROOT, 'dist/daemon/main.js');

function svcdExit(args: string[], env: Record<string, string> = {}): { code: number | null; stderr: string; stdout: string } {
  // In a temp directory: a config without data_dir would otherwise leave ./gateway-data here.
  const r = spawnSync(process.execPath, [SVCD, ...args], { cwd: tempDir(), env: { ...process.env, SVC_TOKEN: '', ...env }, encoding: 'utf8', timeout: 15_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe('the --config document itself (svcd(8) CONFIGURATION FILE), read in-process', () => {
  const write = (text: string) => {
    const file = join(tempDir(), 'svcd.yaml');
    writeFileSync(file, text);
    return file;
  };
  const read = (file: string, env: Record<string, string> = {}) => readConfigFile(file, env, new Redactor());

  it('is a mapping: a list or a scalar is refused naming the file; an empty file is no settings', () => {
    for (const text of ['- kernel\n', 'kernel\n', '42\n']) {
      const file = write(text);
      expect(() => read(file), text).toThrow(new Error(`config ${file} must be a mapping with kernel: and gateway: sections`));
    }
    expect(read(write(''))).toEqual({});
    expect(read(write('# nothing yet\n'))).toEqual({});
  });

  it('a file that cannot be read, or is not YAML, is named with what is wrong in words (not ENOENT)', () => {
    const dir = tempDir();
    expect(() => read(join(dir, 'missing.yaml'))).toThrow(new Error(`cannot read config ${join(dir, 'missing.yaml')}: no such file`));
    expect(() => read(dir)).toThrow(new Error(`cannot read config ${dir}: is a directory`));
    expect(() => read(join(dir, 'missing', 'x.yaml'))).toThrow(new Error(`cannot read config ${join(dir, 'missing', 'x.yaml')}: no such file`));
    const bad = write('kernel: [unclosed\n');
    expect(() => read(bad)).toThrow(new RegExp(`^config ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not valid YAML or JSON: `));
  });

  it('top-level keys other than kernel and gateway are refused, all named at once', () => {
    const one = write('kernel: {}\ngatway: {}\n');
    expect(() => read(one)).toThrow(new Error(`config ${one}: unknown top-level key "gatway" (expected kernel, gateway)`));
    const two = write('kernal: {}\nlisten: 127.0.0.1:0\ngateway: {}\n');
    expect(() => read(two)).toThrow(new Error(`config ${two}: unknown top-level keys "kernal", "listen" (expected kernel, gateway)`));
  });

  it('the kernel: section: ${VAR} substituted and registered for redaction, data_dir resolved against the file, a bad gateway_url port refused', () => {
    const file = write('kernel:\n  token: ${K_TOKEN}\n  data_dir: ./k\n  gateway_url: http://127.0.0.1:7402\ngateway: {listen: 127.0.0.1:0}\n');
    const redactor = new Redactor();
    const cfg = readConfigFile(file, { K_TOKEN: 'kernel-secret-31' }, redactor);
    expect(cfg).toEqual({ kernel: { token: 'kernel-secret-31', data_dir: join(file, '..', 'k'), gateway_url: 'http://127.0.0.1:7402' }, gateway: { listen: '127.0.0.1:0' } });
    expect(redactor.redact('token kernel-secret-31')).toBe('token [REDACTED]');
    const problemsOf = (file: string): string[] => {
      try {
        read(file);
      } catch (err) {
        return (err as { problems: string[] }).problems;
      }
      throw new Error('expected problems');
    };
    expect(problemsOf(write('kernel:\n  token: ${UNSET_TOKEN}\n  listen: 127.0.0.1:0\n'))).toEqual(['/token: environment variable UNSET_TOKEN is not set']);
    // Addresses are checked once the section's shape holds (as the gateway's passes are).
    expect(problemsOf(write('kernel:\n  gateway_url: http://127.0.0.1:6000\n  listen: 127.0.0.1:99999\n'))).toEqual([
      '/listen: listen address "127.0.0.1:99999": port out of range',
      expect.stringMatching(/^\/gateway_url: port 6000 is one that fetch refuses/),
    ]);
  });
});

describe('the kernel: section of --config (svcd(8))', () => {
  it('lists every problem at once and exits 1, without a stack or the token', () => {
    const dir = tempDir();
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, 'kernel:\n  lisen: 127.0.0.1:0\n  token: 12345\n  synchronous: SOMETIMES\n  clock_skew_seconds: soon\n  publishers: demo\n');
    const r = svcdExit(['--config', cfg, '--no-gateway']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`config ${cfg} (kernel:) has 5 problems`);
    for (const p of ['/lisen: is not a known key', '/token: must be a string or null', '/synchronous: must be one of "OFF", "NORMAL", "FULL", "EXTRA"', '/clock_skew_seconds: must be an integer', '/publishers: must be an array']) {
      expect(r.stderr).toContain(p);
    }
    expect(r.stderr).not.toContain('12345');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    writeFileSync(cfg, 'kernel:\n  listen: 7401\n');
    expect(svcdExit(['--config', cfg, '--no-gateway']).stderr).toContain('/listen: must be a string');
    // A file that cannot be read says why in words, not as Node's ENOENT/EISDIR text.
    const missing = join(dir, 'nope.yaml');
    expect(svcdExit(['--config', missing, '--no-gateway']).stderr).toBe(`svcd: cannot read config ${missing}: no such file\n`);
    expect(svcdExit(['--gateway-config', dir, '--no-kernel']).stderr).toBe(`svcd: gateway config ${dir} has 1 problem:\n  - cannot read the file: is a directory\n`);
    // A YAML syntax error is one line, where it is (not the parser's code frame and caret).
    writeFileSync(cfg, 'kernel:\n  listen: [\n');
    const yaml = svcdExit(['--config', cfg, '--no-gateway']);
    expect([yaml.code, yaml.stderr]).toEqual([1, expect.stringMatching(new RegExp(`^svcd: config ${cfg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not valid YAML or JSON: .* at line \\d+, column \\d+\n$`))]);
    const gw = join(dir, 'gateway.yaml');
    writeFileSync(gw, 'connectors: [\n  - name\n');
    const gwYaml = svcdExit(['--gateway-config', gw, '--no-kernel', '--gateway-listen', '127.0.0.1:0']);
    expect(gwYaml.code).toBe(1);
    expect(gwYaml.stderr).toMatch(/has 1 problem:\n {2}- not valid YAML or JSON: .* at line 2, column 3\n$/);
    writeFileSync(cfg, 'kernel:\n  listen: "localhost"\n');
    expect(svcdExit(['--config', cfg, '--no-gateway']).stderr).toContain('/listen: listen address "localhost" must be HOST:PORT');
    // A port fetch will not connect to: svcd's own clients could never reach it.
    const badPort = svcdExit(['--kernel-listen', '127.0.0.1:6666', '--no-gateway', '--data-dir', tempDir()]);
    expect(badPort.code).not.toBe(0);
    expect(badPort.stderr).toContain('listen address "127.0.0.1:6666": port 6666 is one that fetch refuses to connect to');
    // …and so for the kernel's link to a gateway running apart, from the file or the variable.
    writeFileSync(cfg, 'kernel:\n  listen: 127.0.0.1:0\n  gateway_url: http://127.0.0.1:10080\n');
    expect(svcdExit(['--config', cfg, '--no-gateway']).stderr).toContain('/gateway_url: port 10080 is one that fetch refuses to connect to');
    const fromEnv = svcdExit(['--kernel-listen', '127.0.0.1:0', '--no-gateway', '--data-dir', tempDir()], { SVC_GATEWAY_URL: 'http://127.0.0.1:6000' });
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.stderr).toBe('svcd: SVC_GATEWAY_URL: port 6000 is one that fetch refuses to connect to (a "bad port" of the Fetch standard); use another port\n');
  });

  it('substitutes ${VAR} (the value never logged) and reads data_dir relative to the config file', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'etc'));
    const cfg = join(dir, 'etc', 'svcd.yaml');
    writeFileSync(cfg, 'kernel:\n  listen: 127.0.0.1:0\n  token: ${MY_KTOKEN}\n  data_dir: ./kdata\n');
    const secret = 'realtok-7f3a9c';
    const svcd = await spawnSvcd(['--config', cfg, '--no-gateway'], { MY_KTOKEN: secret, SVC_TOKEN: '', SVC_LOG_LEVEL: 'debug' });
    try {
      expect((await fetch(`${svcd.kernelUrl}/v1/health`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
      expect((await fetch(`${svcd.kernelUrl}/v1/health`, { headers: { authorization: 'Bearer ${MY_KTOKEN}' } })).status).toBe(401);
      expect(existsSync(join(dir, 'etc', 'kdata', 'kernel.db'))).toBe(true);
    } finally {
      expect(await svcd.stop()).toBe(0);
    }
    expect(svcd.stderr()).not.toContain(secret);
    writeFileSync(cfg, 'kernel:\n  token: ${NOT_SET_ANYWHERE_42}\n');
    const missing = svcdExit(['--config', cfg, '--no-gateway']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('/token: environment variable NOT_SET_ANYWHERE_42 is not set');
  }, 30_000);

  it('kernel.token guards the kernel alone: the gateway stays loopback-only, and svcd says so at start (svcd(8) SVC_TOKEN)', async () => {
    const dir = tempDir();
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, `kernel:\n  token: kernel-only-token\n  data_dir: ${JSON.stringify(join(dir, 'k'))}\ngateway:\n  data_dir: ${JSON.stringify(join(dir, 'g'))}\n`);
    const svcd = await spawnSvcd(['--config', cfg, '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_TOKEN: '' });
    try {
      expect((await fetch(`${svcd.kernelUrl}/v1/health`)).status).toBe(401);
      expect((await fetch(`${svcd.gatewayUrl}/v1/health`)).status).toBe(200);
      const lines = svcd.stderr().trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.find((l) => l.msg === 'gateway ready')).toMatchObject({ auth: 'loopback clients only' });
      expect(lines.find((l) => l.msg === 'kernel ready')).toMatchObject({ auth: 'bearer token' });
      expect(lines.find((l) => l.level === 'warn' && String(l.msg).includes('the gateway does not'))).toBeDefined();
      expect(svcd.stderr()).not.toContain('kernel-only-token');
    } finally {
      expect(await svcd.stop()).toBe(0);
    }
    // A gateway alone under the same config: no kernel runs there, so nothing to warn of.
    const alone = await spawnSvcd(['--config', cfg, '--no-kernel', '--gateway-listen', '127.0.0.1:0'], { SVC_TOKEN: '' });
    try {
      expect(alone.stderr()).not.toContain('the gateway does not');
    } finally {
      expect(await alone.stop()).toBe(0);
    }
    // SVC_TOKEN guards both, and nothing is warned.
    const both = await spawnSvcd(['--data-dir', join(dir, 'k2'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_TOKEN: 'both-listeners-token', SVC_GATEWAY_DATA: join(dir, 'g2') });
    try {
      expect((await fetch(`${both.gatewayUrl}/v1/health`)).status).toBe(401);
      expect(both.stderr()).not.toContain('the gateway does not');
    } finally {
      expect(await both.stop()).toBe(0);
    }
  }, 30_000);

  it("svcd(8)'s sample config loads as printed, its publisher placeholder filled with a real key", async () => {
    const man = readFileSync(join(ROOT, 'man/svcd.8'), 'utf8');
    const block = /\.SH CONFIGURATION FILE[\s\S]*?\.RS\n([\s\S]*?)\n\.RE/.exec(man)![1]!.replace(/\\-/g, '-');
    expect(block).toContain('gateway_url: null'); // each default shown, as a reader would copy it
    const key = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/demo-publisher.json'), 'utf8')) as { key_id: string; public_key: string };
    const sample = block.replace(/\{key_id: pub-3q2x\.\.\., public_key: 8V1m\.\.\.\}/, `{key_id: ${key.key_id}, public_key: ${key.public_key}}`);
    expect(sample).toContain(key.public_key);
    const dir = tempDir();
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, sample);
    const svcd = await spawnSvcd(['--config', cfg, '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_TOKEN: '', SVC_GATEWAY_URL: '' });
    try {
      expect((await fetch(`${svcd.kernelUrl}/v1/health`)).status).toBe(200);
      expect(existsSync(join(dir, 'svc-data', 'kernel.db'))).toBe(true); // data_dir relative to the file
    } finally {
      expect(await svcd.stop('SIGTERM')).toBe(0);
    }
  }, 30_000);
});

describe('flags and environment svcd cannot use (svcd(8) EXIT STATUS)', () => {
  it('SVC_GATEWAY_URL is checked at start like the file\'s gateway_url: not a URL, or one with credentials, is 1', () => {
    const bad = svcdExit(['--data-dir', join(tempDir(), 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_GATEWAY_URL: 'notaurl' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('svcd: SVC_GATEWAY_URL "notaurl" must be an http:// or https:// URL\n');
    const creds = svcdExit(['--data-dir', join(tempDir(), 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_GATEWAY_URL: 'http://user:hunter22@127.0.0.1:7402' });
    expect(creds.code).toBe(1);
    expect(creds.stderr).toContain('SVC_GATEWAY_URL must not carry credentials');
    expect(creds.stderr).not.toContain('hunter22');
  });

  it('a token no client could send (surrounding whitespace, a control character) stops svcd with 1, never shown, and the gateway config names /token', () => {
    for (const [env, what] of [
      [{ SVC_TOKEN: 'tok-secret-9931\n' }, 'begins or ends with whitespace'],
      [{ SVC_TOKEN: ' tok-secret-9931' }, 'begins or ends with whitespace'],
      [{ SVC_TOKEN: 'tok-secret\u00019931' }, 'holds a character a header cannot carry'],
    ] as const) {
      // With the gateway too: the kernel's check comes first, naming SVC_TOKEN.
      const r = svcdExit(['--data-dir', join(tempDir(), 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], env);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the kernel's token (SVC_TOKEN) ${what}`);
      expect(r.stderr + r.stdout).not.toContain('9931');
    }
    const dir = tempDir();
    const gw = join(dir, 'gw.yaml');
    writeFileSync(gw, 'token: "tok-secret-9931 "\n');
    const g = svcdExit(['--no-kernel', '--gateway-config', gw, '--gateway-listen', '127.0.0.1:0']);
    expect(g.code, g.stderr).toBe(1);
    expect(g.stderr).toContain('/token: begins or ends with whitespace');
    expect(g.stderr + g.stdout).not.toContain('9931');
  });

  it('a flag given an empty value (an unset shell variable) is refused with 1, and nothing is written where svcd runs', () => {
    for (const flag of ['--data-dir', '--config', '--gateway-config', '--drain-seconds']) {
      const cwd = tempDir();
      const r = spawnSync(process.execPath, [SVCD, flag, '', '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { cwd, env: { ...process.env, SVC_TOKEN: '' }, encoding: 'utf8', timeout: 15_000 });
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toBe(`svcd: ${flag} is empty (an unset shell variable?); give a value or leave the flag out\n`);
      expect(readdirSync(cwd)).toEqual([]);
    }
    const rotate = svcdExit(['keys', 'rotate', '--data-dir', '']);
    expect(rotate.code).toBe(1);
    expect(rotate.stderr).toContain('--data-dir is empty');
  });

  it('a bad --log-level or nothing to run is a usage error (2); a bad SVC_LOG_LEVEL or SVC_CLOCK_SKEW_SECONDS is 1', () => {
    const loud = svcdExit(['--log-level', 'loud', '--no-gateway']);
    expect(loud.code).toBe(2);
    expect(loud.stderr).toContain('Allowed choices are debug, info, warn, error');
    const nothing = svcdExit(['--no-kernel', '--no-gateway']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toBe('svcd: --no-kernel and --no-gateway together leave nothing to run (run with --help for usage)\n');
    expect(nothing.stdout).toBe('');
    // Unknown flags and subcommands: one "svcd:" line too.
    const misspelt: [string[], string] = [['--kernel-lisen', 'x'], "unknown option '--kernel-lisen' (Did you mean --kernel-listen?)"];
    for (const [args, text] of [[['--bogus'], "unknown option '--bogus'"], [['keys', 'bogus'], "unknown command 'bogus'"], misspelt] as const) {
      const r = svcdExit([...args]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`svcd: ${text} (run with --help for usage)\n`);
    }
    // A config problem whose path names a key spelt with a ${VAR} value: the value stays hidden.
    const dir = tempDir();
    const cfg = join(dir, 'gw.json');
    writeFileSync(cfg, JSON.stringify({ connectors: [{ name: 'web', type: 'http', allowed_hosts: ['h'], headers: { '${KEY_SECRET}': 5 } }] }));
    const leaky = svcdExit(['--no-kernel', '--gateway-config', cfg, '--gateway-listen', '127.0.0.1:0'], { KEY_SECRET: 's3cr3t-KEY-909' });
    expect(leaky.code).toBe(1);
    expect(leaky.stderr).toContain('/connectors/0/headers/[REDACTED]: must be a string');
    expect(leaky.stderr).not.toContain('s3cr3t-KEY-909');
    // A connector that cannot be set up stops svcd before either listener accepts a connection
    // (svc-gateway(5)): the kernel opens first but listens only once the gateway has opened.
    const db = join(dir, 'app.db');
    writeFileSync(db, '');
    const badSql = join(dir, 'bad-sql.json');
    writeFileSync(badSql, JSON.stringify({ connectors: [{ name: 'b', type: 'sqlite', path: db, tools: { x: { description: 'x', writes: false, statement: 'SELEKT 1' } } }] }));
    const both = svcdExit(['--data-dir', join(dir, 'kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-config', badSql, '--gateway-listen', '127.0.0.1:0']);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain(`gateway config ${badSql} has 1 problem:`);
    expect(both.stderr).toContain('/connectors/0/tools/x/statement: statement does not prepare');
    expect(both.stderr).not.toContain('kernel ready');
    expect(both.stdout).toBe('');
    // A flag value svcd cannot use is bad configuration (1), named in one line.
    const listen = svcdExit(['--kernel-listen', 'nonsense', '--no-gateway']);
    expect(listen.code).toBe(1);
    expect(listen.stderr).toMatch(/^svcd: .*nonsense/);
    const verbose = svcdExit(['--no-gateway', '--kernel-listen', '127.0.0.1:0'], { SVC_LOG_LEVEL: 'verbose' });
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toContain('SVC_LOG_LEVEL "verbose" must be one of debug, info, warn, error');
    // Without a gateway file the problem is the environment's, and the message says so.
    const canary = svcdExit(['--data-dir', join(tempDir(), 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_CANARY_INTERVAL: 'soon' });
    expect(canary.code).toBe(1);
    expect(canary.stderr).toBe('svcd: gateway config (no file: defaults and the SVC_* environment) has 1 problem:\n  - SVC_CANARY_INTERVAL: must be a number of seconds above 0 and at most 2147483 (24.8 days), got "soon"\n');
    const skew = svcdExit(['--no-gateway', '--kernel-listen', '127.0.0.1:0'], { SVC_CLOCK_SKEW_SECONDS: 'soon' });
    expect(skew.code).toBe(1);
    expect(skew.stderr).toContain('SVC_CLOCK_SKEW_SECONDS "soon" must be a whole number of seconds');
  });

  it('a port already taken: exit 1 naming the listener and its flag, with no "ready" line before it; --gateway-config over a gateway: section is warned about', async () => {
    const { createServer } = await import('node:net');
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as { port: number }).port;
    try {
      const dir = tempDir();
      const r = svcdExit(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', `127.0.0.1:${port}`]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`svcd: the gateway listener's address 127.0.0.1:${port} is already in use (another svcd?); choose another with --gateway-listen (or listen in the gateway config), or port 0 for a free one`);
      expect(r.stderr).not.toMatch(/(kernel|gateway) ready/);
      expect(r.stdout).toBe('');
      const k = svcdExit(['--data-dir', join(dir, 'k2'), '--kernel-listen', `127.0.0.1:${port}`, '--gateway-listen', '127.0.0.1:0']);
      expect(k.code).toBe(1);
      expect(k.stderr).toContain(`svcd: the kernel listener's address 127.0.0.1:${port} is already in use (another svcd?); choose another with --kernel-listen (or kernel.listen), or port 0 for a free one`);
      expect(k.stderr).not.toMatch(/(kernel|gateway) ready/);
    } finally {
      taken.close();
    }
    const dir = tempDir();
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, 'gateway:\n  connectors: []\n');
    const gw = join(dir, 'gateway.yaml');
    writeFileSync(gw, `data_dir: ${JSON.stringify(join(dir, 'g'))}\n`);
    const svcd = await spawnSvcd(['--config', cfg, '--gateway-config', gw, '--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_TOKEN: '' });
    try {
      await expect.poll(() => svcd.stderr(), { timeout: 5000 }).toContain('--gateway-config is given: the gateway: section of --config is not used');
    } finally {
      await svcd[Symbol.asyncDispose]();
    }
  });

  it.runIf(existsSync('/proc/self'))('a data dir svcd cannot make (/proc/…) is exit 1 at once, not a spin in mkdir', () => {
    const r = svcdExit(['--data-dir', '/proc/svc-nope', '--no-gateway', '--kernel-listen', '127.0.0.1:0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('/proc/svc-nope');
  });

  it('a data dir that is a file, or under one, says so in words and names the directory', () => {
    const file = join(tempDir(), 'afile');
    writeFileSync(file, 'x');
    for (const [dir, why] of [[file, 'a file of that name is in the way'], [join(file, 'sub'), 'a part of the path is a file, not a directory']] as const) {
      const r = svcdExit(['--data-dir', dir, '--no-gateway', '--kernel-listen', '127.0.0.1:0']);
      expect([r.code, r.stderr]).toEqual([1, `svcd: kernel data directory ${dir} cannot be made: ${why}\n`]);
    }
  });

  it('keys rotate refuses a data dir with no key, and SVC_SIGNING_KEY', () => {
    const empty = tempDir();
    const r = svcdExit(['keys', 'rotate', '--data-dir', empty]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no control-plane key to rotate');
    expect(existsSync(join(empty, 'keys'))).toBe(false);
    const withEnv = svcdExit(['keys', 'rotate', '--data-dir', empty], { SVC_SIGNING_KEY: Buffer.alloc(32, 7).toString('base64url') });
    expect(withEnv.code).toBe(1);
    expect(withEnv.stderr).toContain('SVC_SIGNING_KEY is set');
  });
});

/** True when the process calls itself svcd (daemon/main.ts sets it once the signals are held). */
function titled(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('svcd ');
  } catch {
    return false;
  }
}

async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('a signal while svcd starts (svcd(8) STARTUP AND SIGNALS)', () => {
  it('SIGTERM before the listeners are up: svcd finishes starting, drains and exits 0', async () => {
    const dir = tempDir();
    const everything = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
    // An MCP server that says so on stderr, then takes 1.5 s to start: svcd is mid-startup.
    const slow = join(dir, 'slow-server.mjs');
    writeFileSync(slow, `process.stderr.write('booting\\n'); process.argv.push('stdio'); setTimeout(() => import(${JSON.stringify(everything)}), 1500);\n`);
    const cfg = join(dir, 'gateway.yaml');
    writeFileSync(cfg, `connectors:\n  - {name: slow, type: mcp, command: [node, ${JSON.stringify(slow)}]}\n`);
    const child = spawn(process.execPath, [SVCD, '--no-kernel', '--gateway-config', cfg, '--gateway-listen', '127.0.0.1:0'], {
      env: { ...process.env, SVC_TOKEN: '', SVC_GATEWAY_DATA: join(dir, 'g') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server never booted: ${stderr}`)), 15_000);
      child.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('booting')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(stdout).toBe(''); // not started yet
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stdout).toContain('"gateway":"http://127.0.0.1:');
    expect(stderr).toContain('"msg":"draining"');
  }, 30_000);
  it('a second signal while svcd is still loading stops it at once, exit 0, with nothing started', async () => {
    const dir = tempDir();
    const child = spawn(process.execPath, [SVCD, '--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { env: { ...process.env, SVC_TOKEN: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<[number | null, string | null]>((r) => child.on('exit', (code, signal) => r([code, signal])));
    await until(() => titled(child.pid!), 10_000, 'the process title');
    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 30)); // two at once would be one: signals do not queue
    child.kill('SIGINT');
    expect(await exited).toEqual([0, null]);
    expect(stdout).toBe('');
    expect(existsSync(join(dir, 'k'))).toBe(false);
  }, 30_000);

  it('svcd backup stopped by a signal while it loads says so and exits 1: no backup was made (svcd(8) EXIT STATUS)', async () => {
    const dir = tempDir();
    const dest = join(dir, 'backup');
    const child = spawn(process.execPath, [SVCD, 'backup', dest, '--data-dir', join(dir, 'k')], { env: { ...process.env, SVC_GATEWAY_DATA: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    await until(() => titled(child.pid!), 10_000, 'the process title');
    child.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(stderr).toBe('svcd: stopped by SIGTERM before anything was backed up\n');
    expect(existsSync(dest)).toBe(false);
  }, 30_000);

  it('SIGHUP (the terminal closed) drains and exits 0 like SIGTERM', async () => {
    const dir = tempDir();
    const svcd = await spawnSvcd(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], { SVC_TOKEN: '', SVC_GATEWAY_DATA: join(dir, 'g') });
    expect(await svcd.stop('SIGHUP')).toBe(0);
    expect(svcd.stderr()).toMatch(/"msg":"draining".*"signal":"SIGHUP"/);
  }, 30_000);

  it('SIGTERM while svcd is still loading its code (its first ~0.6 s): exit 0, not 143 (D §11)', async () => {
    const dir = tempDir();
    for (const when of [0, 150]) {
      const child = spawn(process.execPath, [SVCD, '--data-dir', join(dir, `d${when}`), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], {
        env: { ...process.env, SVC_TOKEN: '', SVC_GATEWAY_DATA: join(dir, `g${when}`) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<[number | null, string | null]>((r) => child.on('exit', (code, signal) => r([code, signal])));
      // Once node has run the entry's first lines (its signal hold, then the process title
      // `ps` shows), plus `when`; before them any node process dies of it.
      await until(() => titled(child.pid!), 10_000, 'the process title');
      await new Promise((r) => setTimeout(r, when));
      child.kill('SIGTERM');
      expect(await exited, `${when} ms`).toEqual([0, null]);
    }
  }, 30_000);
});
