/**
 * The mistakes a newcomer makes first, against the built binary (decisions §11; exit codes of
 * cli/exit.ts: 0 ok, 1 refused or failed, 2 usage, 3 unreachable): a malformed daemon address,
 * an unreachable daemon, a file that does not exist, and help that says what is required.
 * Run `npx tsc -p tsconfig.json` first.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeDecided } from '../../cli/commands/approvals.js';
import { abandonHuman, eventLine } from '../../cli/commands/run.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Redactor } from '../../src/log/logger.js';
import { closedPortUrl, ROOT, startTestDaemon, tempDir } from '../helpers/daemon.js';

const oneLine = (s: string) => s.trimEnd().split('\n');

describe('daemon addresses (D §11 --kernel-url / SVC_KERNEL_URL)', () => {
  it('a --kernel-url that is not an http(s) URL is a usage error naming the flag, not "unreachable"', async () => {
    const r = await runSvc(['--kernel-url', 'nonsense', 'run', 'list']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toEqual(['svc: --kernel-url must be an http:// or https:// URL, got "nonsense"']);
    // A query or fragment would land before the /v1 path the client appends.
    for (const url of ['http://127.0.0.1:7401/?x=1', 'http://127.0.0.1:7401#v1', 'http://127.0.0.1:7401/?']) {
      const q = await runSvc(['--kernel-url', url, 'run', 'list']);
      expect(q.code, url).toBe(2);
      expect(oneLine(q.stderr)).toEqual([`svc: --kernel-url must be svcd's address without a query or fragment (http://host:port), got "${url}"`]);
    }
  });

  it('a malformed SVC_KERNEL_URL / --gateway-url names where it came from', async () => {
    const env = await runSvc(['keys', 'show'], { SVC_KERNEL_URL: 'ftp://example' });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('SVC_KERNEL_URL must be an http:// or https:// URL, got "ftp://example"');
    const gw = await runSvc(['--gateway-url', 'nope', 'gateway', 'tools']);
    expect(gw.code).toBe(2);
    expect(gw.stderr).toContain('--gateway-url must be an http:// or https:// URL');
  });

  it('an address with a user or password is a usage error that does not echo it (fetch refuses such URLs)', async () => {
    const r = await runSvc(['--kernel-url', 'http://ops:hunter22@127.0.0.1:7401', 'run', 'list']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toEqual(['svc: --kernel-url must not carry a user name or password (user:password@host); pass the token with --token or SVC_TOKEN']);
    const gw = await runSvc(['gateway', 'tools'], { SVC_GATEWAY_URL: 'http://:hunter22@127.0.0.1:7402' });
    expect(gw.code).toBe(2);
    expect(gw.stderr).toContain('SVC_GATEWAY_URL must not carry a user name or password');
    expect(r.stderr + gw.stderr).not.toContain('hunter22');
  });

  it('offline commands do not care about the daemon address', async () => {
    const r = await runSvc(['bundle', 'validate', join(ROOT, 'fixtures/bundles/refunds.yaml')], { SVC_KERNEL_URL: 'nonsense' });
    expect(r.code).toBe(0);
  });

  it('a URL that answers but is not svcd, or is its other listener: one line saying so, nothing on stdout', async () => {
    const { createServer } = await import('node:http');
    const page = '<!DOCTYPE HTML>\n<html>\n<body>\n<h1>Not Found</h1>\n</body>\n</html>\n';
    const server = createServer((req, res) => {
      const url = req.url ?? '';
      if (url.includes('weird')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"weird":1}'); // JSON, 2xx, in no shape svcd sends
      } else if (url.includes('json')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":"Not Found","statusCode":404}'); // another framework's own envelope
      } else if (url.includes('coded')) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"code":"x","message":{"a":1}}}'); // svcd's shape, almost: no message text
      } else {
        res.writeHead(url.includes('empty') ? 502 : url.includes('fine') ? 200 : 404, { 'content-type': 'text/html' });
        res.end(url.includes('empty') ? '' : page);
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const cases = [['run', 'show', 'coded'], ['run', 'list'], ['--json', 'run', 'list'], ['--json', 'run', 'show', 'empty'], ['--json', 'run', 'show', 'json'], ['run', 'show', 'fine'], ['--json', 'run', 'show', 'fine'], ['approvals', 'list', '--actor', 'fin-1:finance']];
      for (const args of cases) {
        const r = await runSvc(['--kernel-url', url, ...args]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(oneLine(r.stderr)).toEqual([expect.stringMatching(new RegExp(`^svc: HTTP (200|400|404|502) from ${url} is not an svcd answer; is the URL svcd's\\?$`))]);
        expect(r.stdout).toBe('');
      }
      // A 2xx JSON answer in another shape: one line, exit 1, never "[]" or a TypeError's stack.
      const weird = `${url}/weird`;
      // …and an answer of {} to the writes, whose fields were printed as "undefined" with exit 0.
      const writes = [
        ['remit', 'mint', '--tools', 'a.*', '--scopes', 'a:*', '--spend-tokens', '1', '--spend-usd', '1', '--autonomy', 'observe', '--requested-by', 'a:b:c'],
        ['approvals', 'approve', 'apr_x', '--actor', 'fin-1:finance'],
        ['run', 'abandon', 'run_x', '--actor', 'ops:ops', '--reason', 'x'],
        ['run', 'resume', 'run_x', '--actor', 'ops:ops'],
      ];
      for (const args of [['keys', 'show'], ['run', 'list'], ['--json', 'approvals', 'list', '--actor', 'fin-1:finance'], ['approvals', 'list', '--actor', 'fin-1:finance'], ['gateway', 'canaries'], ['--json', 'gateway', 'canaries'], ['gateway', 'tools'], ...writes]) {
        const r = await runSvc(['--kernel-url', weird, '--gateway-url', weird, ...args]);
        expect([args.join(' '), r.code, r.stdout]).toEqual([args.join(' '), 1, '']);
        expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^svc: (HTTP 200 from .* is not an svcd answer; is the URL svcd's\?|the answer is not one svcd sends \(.*\); is the URL svcd's\? \(SVC_LOG_LEVEL=debug shows where it failed\))$/)]);
      }
    } finally {
      server.close();
    }
    // The gateway's listener given as the kernel's: svcd's 404 for an unknown route, with a hint.
    await using d = await startTestDaemon({ gateway: { config: loadGatewayConfig({ data_dir: join(tempDir(), 'gw') }, { env: {}, redactor: new Redactor() }), listen: '127.0.0.1:0', canaryLoop: false } });
    const r = await runSvc(['--kernel-url', d.gatewayUrl!, 'run', 'list']);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^svc: not_found: no route GET \/v1\/runs; is http:\/\/127\.0\.0\.1:\d+ the right listener\?$/)]);
  });

  it('2xx JSON in a shape svcd never sends (a list of numbers, a list of the wrong things, a time that is none): one line, exit 1', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => {
      const url = req.url ?? '';
      res.writeHead(200, { 'content-type': 'application/json' });
      if (url.startsWith('/numbers')) res.end('[1,2,3]');
      else if (url.startsWith('/rows')) res.end('{"runs":[{"x":1}],"approvals":[{"x":1}]}');
      else res.end('{"rid":"rmt_x","tools":[],"scopes":[],"iat":"later","exp":"soon","nbf":"never"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const cases: Array<[string, string[]]> = [
        ['numbers', ['approvals', 'list', '--actor', 'fin-1:finance']],
        ['numbers', ['gateway', 'tools']],
        ['rows', ['approvals', 'list', '--actor', 'fin-1:finance']],
        ['rows', ['run', 'start', 'refunds', 'refund', '--remit', 'rmt_x', '--input', '{}']],
        ['time', ['remit', 'show', 'rmt_x']],
      ];
      for (const [path, args] of cases) {
        const r = await runSvc(['--kernel-url', `${base}/${path}`, '--gateway-url', `${base}/${path}`, ...args]);
        expect([args.join(' '), r.code, r.stdout]).toEqual([args.join(' '), 1, '']);
        expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^svc: (HTTP 200 from .* is not an svcd answer; is the URL svcd's\?|the answer is not one svcd sends \(.*\); is the URL svcd's\? \(SVC_LOG_LEVEL=debug shows where it failed\))$/)]);
      }
    } finally {
      server.close();
    }
  });

  it('an empty id or name is a usage error naming the argument, never a request (a failed RUN=$(svc run start …))', async () => {
    const cases: Array<[string[], string]> = [
      [['run', 'show', ''], 'run show: <id>'],
      [['run', 'events', ' '], 'run events: <id>'],
      [['remit', 'show', ''], 'remit show: <id>'],
      [['approvals', 'approve', '', '--actor', 'fin-1:finance'], 'approvals approve: <id>'],
      [['bundle', 'show', ''], 'bundle show: <bundle>'],
      [['gateway', 'probe', ''], 'gateway probe: <connector>'],
      [['run', 'start', 'refunds', '', '--remit', 'rmt_x'], 'run start: <workflow>'],
    ];
    for (const [args, named] of cases) {
      const r = await runSvc(['--kernel-url', NO_DAEMON, '--gateway-url', NO_DAEMON, ...args]);
      expect([args.join(' '), r.code, r.stderr, r.stdout]).toEqual([args.join(' '), 2, `svc: ${named} must not be empty\n`, '']);
    }
  });

  it('no daemon: exit 3 with one line naming the URL', async () => {
    const url = await closedPortUrl();
    const r = await runSvc(['--kernel-url', url, 'run', 'show', 'run_x']);
    expect(r.code).toBe(3);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr).toBe(`svc: cannot reach svcd at ${url} (ECONNREFUSED); is it running?\n`);
  });

  it('a listener that accepts and never answers: exit 3 after --timeout / SVC_TIMEOUT (default 60 s), not a hang', async () => {
    const { createServer } = await import('node:net');
    const silent = createServer(() => undefined); // takes the connection, says nothing
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const t0 = Date.now();
      const r = await runSvc(['--kernel-url', url, '--timeout', '0.5', 'keys', 'show']);
      expect(r.code).toBe(3);
      expect(r.stderr).toBe(`svc: no answer from ${url} within 0.5 s; is that svcd, and is it well? (--timeout or SVC_TIMEOUT waits longer, 0 for ever)\n`);
      expect(Date.now() - t0).toBeLessThan(10_000);
      const viaEnv = await runSvc(['--kernel-url', url, 'approvals', 'list'], { SVC_TIMEOUT: '0.5' });
      expect([viaEnv.code, viaEnv.stderr]).toEqual([3, expect.stringContaining('within 0.5 s')]);
      // A request that changes something may have been carried out: said so, not "is that svcd?".
      const post = await runSvc(['--kernel-url', url, '--timeout', '0.5', 'run', 'resume', 'run_x', '--actor', 'ops-1:ops']);
      expect([post.code, post.stderr]).toEqual([3, `svc: no answer from ${url} within 0.5 s; it may still carry out the POST: look before repeating it (--timeout or SVC_TIMEOUT waits longer, 0 for ever)\n`]);
      for (const [args, env, source] of [
        [['--timeout', '-1'], {}, '--timeout'],
        [['--timeout', 'soon'], {}, '--timeout'],
        [['--timeout', '0x10'], {}, '--timeout'], // Number() would read 16 seconds
        [[], { SVC_TIMEOUT: '1e3' }, 'SVC_TIMEOUT'],
        [[], { SVC_TIMEOUT: '90000' }, 'SVC_TIMEOUT'],
      ] as const) {
        const bad = await runSvc([...args, '--kernel-url', url, 'keys', 'show'], env);
        expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(new RegExp(`^svc: ${source} ".*" must be a number of seconds from 0 \\(no limit\\) to 86400\\n$`))]);
      }
    } finally {
      silent.close();
    }
  });

  it('a port fetch refuses (a Fetch "bad port", e.g. 6666) is a usage error naming the cause, before any request', async () => {
    const r = await runSvc(['--kernel-url', 'http://127.0.0.1:6666', 'run', 'show', 'run_x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('svc: --kernel-url "http://127.0.0.1:6666": port 6666 is one that fetch refuses to connect to (a "bad port" of the Fetch standard); use another port\n');
    const worker = await runSvc(['worker'], { SVC_KERNEL_URL: 'http://127.0.0.1:7401', SVC_GATEWAY_URL: 'http://127.0.0.1:6000' });
    expect(worker.code).toBe(2);
    expect(worker.stderr).toContain('svc: SVC_GATEWAY_URL "http://127.0.0.1:6000": port 6000 is one that fetch refuses to connect to');
  });
});

describe('usage errors (svc(1) EXIT STATUS: one line each)', () => {
  it('a missing argument, an unknown command or option: one "svc:" line with the hint, exit 2', async () => {
    for (const [args, text] of [
      [['run', 'show'], "missing required argument 'id'"],
      // The missing argument is named before a missing required option.
      [['run', 'start', 'refunds'], "missing required argument 'workflow'"],
      [['run', 'start', 'refunds', 'refund'], "required option '--remit <id>' not specified"],
      [['nosuch'], "unknown command 'nosuch'"],
      [['run', 'list', '--bogus'], "unknown option '--bogus'"],
      [['run', 'list', '--limt', '3'], "unknown option '--limt' (Did you mean --limit?)"],
    ] as const) {
      const r = await runSvc([...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(oneLine(r.stderr)).toEqual([`svc: ${text} (run with --help for usage)`]);
    }
  });

  it('an actor that is not ID:ROLE names where it came from; an id may hold a colon, a role may not (D §11 --actor / SVC_ACTOR)', async () => {
    for (const [args, env, text] of [
      [['--actor', 'nobody'], {}, 'svc: --actor must be ID:ROLE, got "nobody"'],
      [['--actor', 'ops-1:'], {}, 'svc: --actor must be ID:ROLE, got "ops-1:"'],
      [[], { SVC_ACTOR: 'bad' }, 'svc: SVC_ACTOR must be ID:ROLE, got "bad"'],
      // Approvers are printed role:ROLE, so this is typed: it would act as the id "fin-1:role".
      [['--actor', 'fin-1:role:finance'], {}, 'svc: --actor must be ID:ROLE, e.g. fin-1:finance; "fin-1:role:finance" would be the id "fin-1:role" (an approver is shown as role:ROLE, an actor names the role alone)'],
      [[], { SVC_ACTOR: 'role:finance' }, 'svc: SVC_ACTOR must be ID:ROLE, e.g. fin-1:finance; "role:finance" would be the id "role" (an approver is shown as role:ROLE, an actor names the role alone)'],
    ] as const) {
      const r = await runSvc(['--kernel-url', NO_DAEMON, 'run', 'resume', 'run_x', ...args], env);
      expect([r.code, oneLine(r.stderr)]).toEqual([2, [text]]);
    }
    // `user:42:ops` is id `user:42`, role `ops`: past the usage check, to the (absent) daemon.
    expect((await runSvc(['--kernel-url', NO_DAEMON, 'run', 'resume', 'run_x', '--actor', 'user:42:ops'])).code).toBe(3);
    // A role with whitespace can never decide (no approver role:ROLE can name it): refused for
    // approvals, while an abandon or a resume, which only record the actor, take it.
    const decide = await runSvc(['--kernel-url', NO_DAEMON, 'approvals', 'approve', 'apr_x', '--actor', 'fin 1:fin ance']);
    expect([decide.code, oneLine(decide.stderr)]).toEqual([2, ['svc: --actor "fin 1:fin ance": a role holds no whitespace, as no approver role:ROLE in a policy can']]);
    expect((await runSvc(['--kernel-url', NO_DAEMON, 'run', 'resume', 'run_x', '--actor', 'ana:support lead'])).code).toBe(3);
  });

  it('a kernel that wants a token says how to pass one (I 5.1: 401 unauthorized)', async () => {
    await using d = await startTestDaemon({ token: 'tok-s3cret' });
    const r = await runSvc(['--kernel-url', d.kernelUrl!, 'run', 'list']);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^svc: unauthorized: .*; pass the token svcd was started with as --token or SVC_TOKEN$/)]);
    expect((await runSvc(['--kernel-url', d.kernelUrl!, '--token', 'tok-s3cret', 'run', 'list'])).code).toBe(0);
  });
});

describe('a remit token where a remit id is asked for, and the other way round (I 2.1, D §3)', () => {
  it('says which is which and what prints the other, before asking the daemon (exit 2)', async () => {
    const token = 'krt1.k1.eyJyaWQiOiJybXRfMSJ9.c2ln';
    const hint = 'takes a remit id (rmt_…), not a token: `svc --json remit mint` prints both (remit_id), and `svc remit decode TOKEN` shows a token\'s rid';
    for (const [args, what] of [
      [['run', 'start', 'refunds', 'refund', '--remit', token], '--remit'],
      [['remit', 'show', token], 'remit show'],
      [['remit', 'derive', token, '--ttl', '60'], 'remit derive'],
    ] as const) {
      const r = await runSvc(['--kernel-url', NO_DAEMON, ...args]);
      expect([r.code, oneLine(r.stderr)], args.join(' ')).toEqual([2, [`svc: ${what} ${hint}`]]);
    }
    const d = await runSvc(['--kernel-url', NO_DAEMON, 'remit', 'decode', 'rmt_01JTEST0000000000000000']);
    expect([d.code, oneLine(d.stderr)]).toEqual([2, ['svc: "rmt_01JTEST0000000000000000" is a remit id, not a token: `svc remit show ID` prints its record']]);
  });
});

describe('files that are not there', () => {
  it('says "no such file" in words (exit 1), never a stack or an errno alone', async () => {
    for (const args of [['bundle', 'validate', '/nonexistent/x.yaml'], ['policy', 'lint', '/nonexistent/x.policy']]) {
      const r = await runSvc(args);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toEqual([`svc: cannot read ${args[2]}: no such file`]);
    }
  });

  it('an --input or --args @FILE that is missing fails like any other file (exit 1); bad inline JSON is usage (exit 2)', async () => {
    const gw = ['--gateway-url', NO_DAEMON, 'gateway', 'call', 'test.echo', '--remit-token', 'krt1.x.y.z'];
    const missing = [
      ['--kernel-url', NO_DAEMON, 'run', 'start', 'b', 'w', '--remit', 'rmt_x', '--input', '@/nonexistent/in.json'],
      [...gw, '--args', '@/nonexistent/args.json'],
    ];
    for (const args of missing) {
      const r = await runSvc(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^svc: cannot read \/nonexistent\/\w+\.json: no such file$/)]);
    }
    const inline = await runSvc([...gw, '--args', '{not json']);
    expect(inline.code).toBe(2);
    expect(inline.stderr).toMatch(/^svc: --args is not JSON/);
    const notObject = await runSvc([...gw, '--args', '[1]']);
    expect(notObject.code).toBe(2);
    expect(notObject.stderr).toContain('--args must be a JSON object');
    const bare = await runSvc(['--kernel-url', NO_DAEMON, 'run', 'start', 'b', 'w', '--remit', 'rmt_x', '--input', '@']);
    expect([bare.code, oneLine(bare.stderr)]).toEqual([2, ['svc: --input @ needs a file name after the @ (@FILE, or @- for standard input)']]);
  });
});

describe('help a newcomer can act on', () => {
  it('marks required options and describes every argument', async () => {
    const start = await runSvc(['run', 'start', '--help']);
    expect(start.code).toBe(0);
    expect(start.stdout).toMatch(/--remit <id>\s+the remit the run uses; it is bound to the\s+run \(required\)/);
    expect(start.stdout).toContain('Example:');
    const approve = await runSvc(['approvals', 'approve', '--help']);
    expect(approve.stdout).toMatch(/id\s+approval id \(apr_…\)/);
    expect(approve.stdout).not.toContain('(default: "")');
    const mint = await runSvc(['remit', 'mint', '--help']);
    expect(mint.stdout).toContain('Required: --tools, --scopes, --autonomy, --requested-by, --spend-tokens and --spend-usd.');
    // The approvals group opens the inbox by itself; its help says so, and `help` works there too.
    for (const args of [['approvals', '--help'], ['approvals', 'help']]) {
      const r = await runSvc(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toContain('With no subcommand, on a terminal, opens the inbox');
      expect(r.stdout).toContain('a approve, r reject');
    }
    expect((await runSvc(['approvals', 'help', 'reject'])).stdout).toContain('Usage: svc approvals reject');
    // `svc help WORDS…` names the command the words name, however deep; a word that is none is a usage error.
    for (const [args, usage] of [[['help', 'run', 'start'], 'Usage: svc run start'], [['help', 'approvals', 'reject'], 'Usage: svc approvals reject'], [['help', 'keys'], 'Usage: svc keys']] as const) {
      const r = await runSvc([...args]);
      expect([args.join(' '), r.code, r.stdout.split('\n')[0]]).toEqual([args.join(' '), 0, expect.stringContaining(usage)]);
    }
    // Global options may come first; `svc help help` is the program's help.
    expect((await runSvc(['--json', '--kernel-url', 'http://127.0.0.1:2', 'help', 'run', 'start'])).stdout.split('\n')[0]).toContain('Usage: svc run start');
    const helpHelp = await runSvc(['help', 'help']);
    expect([helpHelp.code, helpHelp.stdout.split('\n')[0]]).toEqual([0, expect.stringContaining('Usage: svc [options] [command]')]);
    const bogus = await runSvc(['help', 'run', 'bogus']);
    expect([bogus.code, bogus.stdout, bogus.stderr]).toEqual([2, '', "svc: unknown command 'run bogus' (svc --help lists the commands)\n"]);
    const top = await runSvc(['--help']);
    expect(top.stdout).toContain('Exit status: 0 ok, 1 refused or failed (by the service, or a');
    expect(top.stdout).toContain('2 usage error, 3 svcd unreachable');
  });

  it('approve without --reason still sends an empty reason (no commander default needed)', async () => {
    // The option lost its '' default in the help; the command must still reach the daemon.
    const r = await runSvc(['--kernel-url', NO_DAEMON, '--actor', 'fin-1:finance', 'approvals', 'approve', 'apr_x']);
    expect(r.code).toBe(3);
  });
});

describe('svc run events: redaction notes (svc-events(7) note {type: redaction})', () => {
  it('shows what was redacted and where, never the content', () => {
    const line = eventLine({
      seq: 6,
      hash: 'h',
      prev_hash: 'p',
      kind: 'note',
      payload: { type: 'redaction', class: 'pii', path: '/input/message', count: 1, source: 'worker', step: 'triage', call_index: 0 },
      actor: { id: 'w-1', role: 'worker' },
      at: '2026-01-01T00:00:00.000Z',
    });
    expect(line).toMatch(/note\s+w-1:worker\s+step=triage redacted 1 pii at \/input\/message$/);
  });
});

describe('svc run events: one actor form, no empty members', () => {
  const at = '2026-01-01T00:00:00.000Z';
  it('shows a lease\'s {worker_id} as ID:worker, like the worker\'s own {id, role} posts', () => {
    const leased = eventLine({ seq: 2, hash: 'h', prev_hash: 'p', kind: 'step.leased', payload: { step: 'lookup', attempt: 1 }, actor: { worker_id: 'w-1' }, at });
    expect(leased).toMatch(/step\.leased\s+w-1:worker\s+step=lookup attempt=1$/);
  });
  it('keeps two spaces after the longest kind and a long actor, so columns never run together', () => {
    const comp = eventLine({ seq: 21, hash: 'h', prev_hash: 'p', kind: 'compensation.completed', payload: { step: 'refund' }, actor: { id: 'gateway', role: 'gateway' }, at });
    expect(comp).toContain('compensation.completed  gateway:gateway   step=refund');
    const long = eventLine({ seq: 22, hash: 'h', prev_hash: 'p', kind: 'note', payload: { step: 'x' }, actor: { id: 'a-very-long-worker-name', role: 'worker' }, at });
    expect(long).toContain('a-very-long-worker-name:worker  step=x');
  });
  it('leaves out a member whose value is empty, such as an approval decided without a reason', () => {
    const decided = eventLine({ seq: 9, hash: 'h', prev_hash: 'p', kind: 'approval.decided', payload: { approval_id: 'apr_1', decision: 'approved', reason: '' }, actor: { id: 'fin-1', role: 'finance' }, at });
    expect(decided).toMatch(/approval\.decided\s+fin-1:finance\s+decision=approved approval_id=apr_1$/);
  });
  it('keeps an event on one line and lets no escape sequence through, whatever a reason holds', () => {
    const reason = 'dup\n   7  forged line\u001b[31m red\u001b[0m';
    const line = eventLine({ seq: 9, hash: 'h', prev_hash: 'p', kind: 'approval.decided', payload: { decision: 'rejected', reason }, actor: { id: 'fin-1', role: 'finance' }, at });
    expect(line).not.toMatch(/[\n\u001b]/);
    expect(line).toContain('dup    7  forged line?[31m red?[0m');
    const said = describeDecided('apr_1', { approval_id: 'apr_1', run_id: 'run_1', state: 'rejected', decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason, decided_at: at } as never);
    expect(said).not.toMatch(/[\n\u001b]/);
  });
});

describe('svc run abandon: the writes it cannot undo (svc(1), svc-events(7) run.abandon_requested)', () => {
  it('names each, and says how many more there are beyond the ones named', () => {
    const w = (seq: number) => ({ seq, kind: 'tool.called', step: 'refund', tool: 'billing.refund' });
    expect(abandonHuman('run_1', { compensations_scheduled: 2, state: 'abandoning', uncompensated_writes: [], uncompensated_writes_total: 0 })).toBe(
      'run run_1 abandoning: 2 compensation(s) scheduled',
    );
    expect(abandonHuman('run_1', { compensations_scheduled: 0, state: 'abandoned', uncompensated_writes: [w(7), w(9)], uncompensated_writes_total: 5 }).split('\n')).toEqual([
      'run run_1 abandoned: 0 compensation(s) scheduled',
      '5 write(s) of steps that never completed are not compensated; check them by hand:',
      '  step refund: billing.refund (event 7, tool.called)',
      '  step refund: billing.refund (event 9, tool.called)',
      '  … and 3 more (svc run events shows them all)',
    ]);
    const action = { seq: 4, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: 5, outcome: 'deterministic_failure' };
    const call = { seq: 8, kind: 'tool.called', step: 'notify', tool: 'crm.update', outcome: 'ok' };
    expect(abandonHuman('run_1', { compensations_scheduled: 0, state: 'abandoned', uncompensated_writes: [action, call], uncompensated_writes_total: 2 }).split('\n')).toEqual([
      'run run_1 abandoned: 0 compensation(s) scheduled',
      '2 write(s) of steps that never completed are not compensated; check them by hand:',
      // The gateway's outcome says where to look: a failure may have written, `ok` did.
      '  step refund: billing.refund (event 4, action.decided; the gateway called it at event 5: deterministic_failure)',
      '  step notify: crm.update (event 8, tool.called; outcome: ok)',
    ]);
    // Run again after a resume (a fresh key): the outcome shown is the last call's, and it says which.
    const again = { ...action, calls: 3, last_called_seq: 36, outcome: 'upstream_error' };
    expect(abandonHuman('run_1', { compensations_scheduled: 0, state: 'abandoned', uncompensated_writes: [again], uncompensated_writes_total: 1 }).split('\n')[2]).toBe(
      '  step refund: billing.refund (event 4, action.decided; the gateway called it at event 5, 3 times in all, last at event 36: upstream_error)',
    );
  });
});

describe('the installed commands (README: npx svc, npx svcd)', () => {
  it('are executable after a build, so `npx svc` works after `npm test` rebuilt dist/', async () => {
    const { readFileSync, statSync } = await import('node:fs');
    const { execFileSync } = await import('node:child_process');
    const { bin } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(Object.keys(bin).sort()).toEqual(['svc', 'svcd']);
    for (const rel of Object.values(bin)) {
      expect(statSync(join(ROOT, rel)).mode & 0o111, `${rel} is executable`).not.toBe(0);
      expect(readFileSync(join(ROOT, rel), 'utf8').startsWith('#!/usr/bin/env node\n'), `${rel} has a node shebang`).toBe(true);
    }
    // Run directly, as npm's bin link does (no `node` in front).
    expect(execFileSync(join(ROOT, bin.svc!), ['--version'], { encoding: 'utf8' }).trim()).toMatch(/^\d+\.\d+\.\d+/);
    // --json prints data as JSON, the version too (svc(1) GLOBAL OPTIONS).
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const args of [['--version', '--json'], ['--json', '-V']]) expect(JSON.parse(execFileSync(join(ROOT, bin.svc!), args, { encoding: 'utf8' }))).toEqual({ version });
  });
});
