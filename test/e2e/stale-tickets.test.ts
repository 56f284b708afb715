// The stale-tickets example (fixtures/examples/stale-tickets) end to end with real processes:
// the built svcd with all four connector types (sqlite helpdesk, http notify with a ${NOTIFY_TOKEN}
// header, fs archive, the MCP server-everything), the example's notify server, the built
// `svc worker` and the built `svc` CLI, as its README runs it by hand. Interface 2.10 (config
// secrets), 3 (approval and abandon rows), 4.1, 5.3, 5.4 (delegation narrows); decisions 5.3
// (policy test), 5.4, §6 (abandon), §7 (replay).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { runSvc, type CliResult } from '../helpers/cli.js';
import { ROOT, spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { events, http, ok, spawnWorker, waitOutput, waitRun, type WorkerProcess } from './helpers.js';

const EX = join(ROOT, 'fixtures/examples/stale-tickets');
const KEY = join(ROOT, 'fixtures/keys/demo-publisher.json');
const DEMO_KEY = JSON.parse(readFileSync(KEY, 'utf8')) as { key_id: string; public_key: string };
/** A fresh value each run, so a leak cannot hide behind a value some other output happens to hold. */
const NOTIFY_TOKEN = `ntk-${randomBytes(12).toString('hex')}`;
const LEAD = 'lee:support-lead';
const CUTOFF = '2026-10-01T00:00:00Z';

/** The helpdesk database from the example's tickets.sql, as its README builds it. */
function createTicketsDb(path: string): void {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(readFileSync(join(EX, 'tickets.sql'), 'utf8'));
  } finally {
    db.close();
  }
}

/**
 * The committed gateway.yaml with its three data paths (run/ beside the file) moved into `dir`,
 * and the MCP server's cwd pinned to the example's directory, where its relative argv points
 * into the checkout's node_modules. Everything else is the file as committed.
 */
function gatewayCopy(dir: string): string {
  const cfg = parseYaml(readFileSync(join(EX, 'gateway.yaml'), 'utf8')) as Record<string, any>;
  cfg.data_dir = join(dir, 'gateway-data');
  const conn = (name: string) => cfg.connectors.find((c: any) => c.name === name);
  conn('helpdesk').path = join(dir, 'tickets.db');
  conn('archive').root = join(dir, 'archive');
  expect(conn('everything').cwd).toBe('.');
  conn('everything').cwd = EX;
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringifyYaml(cfg));
  return file;
}

interface Notify {
  child: ChildProcess;
  port: number;
  requests: Array<{ method: string; path: string; authorized: boolean; body: string }>;
  stop(): Promise<void>;
}

/** The example's notify-server.mjs on a free port. */
async function startNotify(): Promise<Notify> {
  const child = spawn(process.execPath, [join(EX, 'notify-server.mjs')], { env: { ...process.env, NOTIFY_TOKEN, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const requests: Notify['requests'] = [];
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const port = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error('notify server did not start')), 10_000);
    createInterface({ input: child.stdout! }).on('line', (l) => {
      const j = JSON.parse(l);
      if (typeof j.port === 'number') {
        clearTimeout(timer);
        res(j.port);
      } else requests.push(j);
    });
  });
  return {
    child,
    port,
    requests,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Every file under `dir` whose bytes hold `text`. */
function filesHolding(dir: string, text: string): string[] {
  const found: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && readFileSync(p).includes(text)) found.push(p);
    }
  };
  walk(dir);
  return found;
}

describe('e2e: the stale-tickets example, all four connector types (fixtures/examples/stale-tickets; I 2.10, 3, 4.1, 5.3, 5.4; D 5.3, 5.4, §6)', () => {
  let dir: string;
  let dbPath: string;
  let archive: string;
  let svcd: SpawnedSvcd;
  let notify: Notify;
  let worker: WorkerProcess;
  let env: Record<string, string>;
  let parent: string;
  let parentToken: string;
  /** Every CLI output and HTTP answer the test saw, for the secret check at the end. */
  const seen: string[] = [];
  const runIds: string[] = [];

  const svc = async (...args: string[]): Promise<CliResult> => {
    const r = await runSvc(args, env);
    seen.push(r.stdout, r.stderr);
    return r;
  };
  const svcJson = async (...args: string[]): Promise<any> => {
    const r = await svc('--json', ...args);
    if (r.code !== 0) throw new Error(`svc ${args.join(' ')} → ${r.code}\n${r.stdout}${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const ticket = (id: string) => {
    const db = new Database(dbPath, { readonly: true });
    try {
      return db.prepare('SELECT id, status, close_reason FROM tickets WHERE id = ?').get(id);
    } finally {
      db.close();
    }
  };
  const diag = () => `worker:\n${worker.stderr().slice(-3000)}\nsvcd:\n${svcd.stderr().slice(-3000)}`;
  const runState = async (runId: string, pred: (s: any) => boolean) => {
    const s = await waitRun(svcd.kernelUrl!, runId, pred, 15_000, diag);
    seen.push(JSON.stringify(s));
    return s;
  };
  /** A remit for one run: derived from the support lead's parent with a smaller budget. */
  const childRemit = async () => (await svcJson('remit', 'derive', parent, '--spend-usd', '0.5', '--spend-tokens', '5000')).remit_id as string;
  const startRun = async (remit: string) => {
    const input = JSON.stringify({ cutoff: CUTOFF, notify_url: `http://127.0.0.1:${notify.port}/notify` });
    const r = await svc('run', 'start', 'stale-tickets@1.1.0', 'close_stale', '--remit', remit, '--input', input);
    expect(r.code, r.stderr).toBe(0);
    const runId = r.stdout.trim();
    expect(runId).toMatch(/^run_[0-9A-Z]{26}$/);
    runIds.push(runId);
    return runId;
  };

  beforeAll(async () => {
    dir = realpathSync(tempDir('svc-e2e-stale-'));
    dbPath = join(dir, 'tickets.db');
    archive = join(dir, 'archive');
    createTicketsDb(dbPath);
    mkdirSync(archive);
    notify = await startNotify();
    svcd = await spawnSvcd(
      ['--data-dir', join(dir, 'kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', gatewayCopy(dir), '--publisher', `${DEMO_KEY.key_id}:${DEMO_KEY.public_key}`],
      { NOTIFY_TOKEN },
    );
    env = { SVC_KERNEL_URL: svcd.kernelUrl!, SVC_GATEWAY_URL: svcd.gatewayUrl! };
    worker = spawnWorker({ kernelUrl: svcd.kernelUrl!, gatewayUrl: svcd.gatewayUrl! }, ['--worker-id', 'stale-w1', '--ttl-seconds', '5']);

    const pushed = await svc('bundle', 'push', join(EX, 'bundle.yaml'), '--key', KEY);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/^created: stale-tickets 1\.1\.0 bnd_/);
    const policy = await svc('policy', 'push', join(EX, 'tickets-v1.policy'), '--name', 'tickets', '--version', '1.0.0');
    expect(policy.code, policy.stderr).toBe(0);
    const minted = await svcJson(
      'remit', 'mint',
      '--tools', 'helpdesk.*,notify.post,everything.echo,archive.write',
      '--scopes', `sql:table:tickets,http:host:127.0.0.1,mcp:everything:*,fs:path:${archive}`,
      '--autonomy', 'supervised', '--requested-by', 'pat:support:support-lead',
      '--spend-usd', '2', '--spend-tokens', '20000', '--policy-set', 'tickets@1.0.0',
    );
    parent = minted.remit_id;
    parentToken = minted.token;
  }, 30_000);

  afterAll(async () => {
    await worker?.stop('SIGKILL');
    await svcd?.stop('SIGTERM');
    await notify?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a VIP close parks for role:support-lead (I 3; D 5.4), is approved through `svc approvals approve`, and the run completes through all four connectors; `svc run replay` verifies', { timeout: 30_000 }, async () => {
    const remit = await childRemit();
    // The run's remit is the parent's, narrowed to a smaller budget (I 5.4).
    const record = await ok(svcd.kernelUrl!, 'GET', `/remits/${remit}`);
    seen.push(JSON.stringify(record));
    expect(record).toMatchObject({ parent_id: parent, spend: { usd: 0.5, tokens: 5000 }, autonomy: 'supervised', tools: ['helpdesk.*', 'notify.post', 'everything.echo', 'archive.write'] });
    const runId = await startRun(remit);
    const parked = await runState(runId, (s) => s.state !== 'running');
    expect(parked).toMatchObject({ state: 'parked', parked_reason: 'human', current_step: 'close' });
    // Nothing is closed before the support lead says so.
    expect(ticket('T-101')).toMatchObject({ status: 'open' });
    expect(notify.requests).toEqual([]);

    const approvals = await svcJson('approvals', 'list', '--actor', LEAD);
    expect(approvals).toHaveLength(1);
    expect(approvals[0]).toMatchObject({ approval_id: parked.pending_approval_id, approver: 'role:support-lead', run_id: runId });
    const approved = await svc('approvals', 'approve', parked.pending_approval_id, '--actor', LEAD, '--reason', 'customer silent for 90 days');
    expect(approved.code, approved.stderr).toBe(0);

    // The approval resumes the run before its answer: from here any state but running is the end
    // (a notification refused for its key parks the run on a quarantined notify step).
    const done = await runState(runId, (s) => s.state !== 'running');
    expect(done.state, diag()).toBe('completed');
    // sqlite: the ticket is closed, with the model's reason.
    expect(ticket('T-101')).toEqual({ id: 'T-101', status: 'closed', close_reason: 'no reply for 90 days' });
    expect(ticket('T-100')).toMatchObject({ status: 'open' });
    // http: the notification reached the server with the right x-api-key (401 and authorized false otherwise).
    expect(notify.requests).toEqual([{ method: 'POST', path: '/notify', authorized: true, body: JSON.stringify({ ticket: 'T-101', status: 'closed' }) }]);
    expect(done.steps.notify.output).toMatchObject({ status: 200, json: { queued: true } });
    // fs: the archive note under the root (a template inside a longer string is the value's JSON text, svc-bundle(5)).
    expect(readFileSync(join(archive, 'closed.txt'), 'utf8')).toMatch(/^closed "T-101" at "\d{4}-\d\d-\d\dT[\d:.]+Z"$/);

    const log = await events(svcd.kernelUrl!, runId);
    seen.push(JSON.stringify(log));
    // mcp: the model step's echo went to server-everything and came back.
    const echo = log.filter((e) => e.kind === 'tool.called' && e.payload.tool === 'everything.echo');
    expect(echo).toHaveLength(1);
    expect(echo[0].payload.step).toBe('pick');
    expect(echo[0].payload).toMatchObject({ connector: 'everything', outcome: 'ok', scopes: ['mcp:everything:*'] });
    // The mock model asked for it (a template inside a longer string is the value's JSON text);
    // the log keeps the call's args hash and outcome, not the echo's answer.
    const asked = log.find((e) => e.kind === 'model.called' && e.payload.turn === 0);
    expect(asked.payload.response.calls).toEqual([{ id: 'mock_t0', tool: 'everything.echo', args: { message: `checking "${CUTOFF}"` } }]);
    expect(log.filter((e) => e.kind === 'tool.called').map((e) => e.payload.tool)).toEqual(['helpdesk.list_stale', 'everything.echo', 'helpdesk.close_ticket', 'notify.post', 'archive.write']);
    const decisions = log.filter((e) => e.kind === 'action.decided').map((e) => [e.payload.decision, e.payload.rule]);
    expect(decisions).toEqual([
      ['approval_required', 'tickets/close_vip'],
      ['allow', `approved:${parked.pending_approval_id}`],
    ]);

    // The MCP server answers through the gateway under the parent remit, as the worker's call did.
    const direct = await svcJson('gateway', 'call', 'everything.echo', '--args', JSON.stringify({ message: 'still there?' }), '--remit-token', parentToken);
    expect(JSON.stringify(direct)).toContain('Echo: still there?');

    const replay = await svcJson('run', 'replay', runId);
    expect(replay).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [], chain_errors: [] });
  });

  it('a second run abandoned after its close: the compensation reopens the ticket in the database (D §6 abandon)', { timeout: 30_000 }, async () => {
    // The customer wrote back: T-101 is open again, and the next sweep picks it once more.
    const db = new Database(dbPath);
    db.prepare(`UPDATE tickets SET status = 'open', closed_at = NULL, close_reason = NULL WHERE id = 'T-101'`).run();
    db.close();
    const runId = await startRun(await childRemit());
    const parked = await runState(runId, (s) => s.state !== 'running');
    expect(parked).toMatchObject({ state: 'parked', current_step: 'close' });
    // Hold the run after its close: from here only a worker for actions and compensations runs,
    // so the notify step waits while the run is abandoned.
    await worker.stop('SIGTERM');
    seen.push(worker.stderr());
    const decided = await ok(svcd.kernelUrl!, 'POST', `/approvals/${parked.pending_approval_id}`, { decision: 'approved', actor: { id: 'lee', role: 'support-lead' }, reason: 'ok' });
    seen.push(JSON.stringify(decided));
    expect(decided.run_id).toBe(runId);
    worker = spawnWorker({ kernelUrl: svcd.kernelUrl!, gatewayUrl: svcd.gatewayUrl! }, ['--worker-id', 'stale-w2', '--ttl-seconds', '5', '--kinds', 'action,compensation']);
    const closed = await runState(runId, (s) => s.steps.close.state === 'completed');
    expect(closed.state).toBe('running');
    expect(closed.steps.notify.state).toBe('pending');
    expect(ticket('T-101')).toMatchObject({ status: 'closed' });

    const abandon = await svc('--json', 'run', 'abandon', runId, '--actor', 'pat:support', '--reason', 'customer replied after all');
    expect(abandon.code, abandon.stderr).toBe(0);
    expect(JSON.parse(abandon.stdout)).toMatchObject({ compensations_scheduled: 1 });
    const end = await runState(runId, (s) => s.state === 'abandoned');
    expect(end.steps.close.state).toBe('compensated');
    expect(ticket('T-101')).toEqual({ id: 'T-101', status: 'open', close_reason: null });
    const log = await events(svcd.kernelUrl!, runId);
    seen.push(JSON.stringify(log));
    expect(log.filter((e) => e.kind === 'tool.called').map((e) => e.payload.tool)).toEqual(['helpdesk.list_stale', 'everything.echo', 'helpdesk.close_ticket', 'helpdesk.reopen_ticket']);
    expect(log.some((e) => e.kind === 'compensation.completed' && e.payload.step === 'close')).toBe(true);
    // The abandoned run never told the customer.
    expect(notify.requests).toHaveLength(1);
    expect(await waitOutput(worker.stderr, '"kind":"compensation"')).toContain('"kind":"compensation"');
  });

  it('a derived remit narrows (I 5.4): a read-only sub-agent may list stale tickets, not close or reopen them (I 5.3)', { timeout: 15_000 }, async () => {
    const sub = await svcJson('remit', 'derive', parent, '--tools', 'helpdesk.list_stale,helpdesk.reopen_ticket', '--scopes', 'sql:table:tickets', '--autonomy', 'propose', '--spend-usd', '0.1', '--spend-tokens', '1000');
    const read = await svcJson('gateway', 'call', 'helpdesk.list_stale', '--args', JSON.stringify({ cutoff: CUTOFF }), '--remit-token', sub.token);
    expect(read.result.rows.map((r: any) => r.id)).toEqual(['T-101', 'T-100']);
    const close = await svc('gateway', 'call', 'helpdesk.close_ticket', '--args', JSON.stringify({ ticket_id: 'T-100', reason: 'no reply at all' }), '--remit-token', sub.token);
    expect(close.code).toBe(1);
    expect(close.stderr).toContain('refused (tool_not_in_remit)');
    const reopen = await svc('gateway', 'call', 'helpdesk.reopen_ticket', '--args', JSON.stringify({ ticket_id: 'T-103' }), '--remit-token', sub.token);
    expect(reopen.code).toBe(1);
    expect(reopen.stderr).toContain('refused (autonomy_too_low)');
    expect(ticket('T-100')).toMatchObject({ status: 'open' });
    expect(ticket('T-103')).toMatchObject({ status: 'closed' });
    // Wider than the parent: refused.
    const wider = await http(svcd.kernelUrl!, 'POST', `/remits/${parent}/derive`, { autonomy: 'autonomous' });
    seen.push(JSON.stringify(wider));
    expect(wider.status).toBe(422);
    expect(wider.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'autonomy' } });
  });

  it('`svc policy test` of v1 against v2 over the corpus (D 5.3): a one-word reason now denied, an old VIP ticket now allowed', { timeout: 15_000 }, async () => {
    const corpus = join(EX, 'corpus.json');
    const r = await svcJson('policy', 'test', corpus, '--a', 'tickets@1.0.0', '--b', join(EX, 'tickets-v2.policy'));
    expect(r.cases).toBe(8);
    expect(r.flips).toEqual([
      { index: 1, a: 'allow', b: 'deny', rule_a: 'tickets/close_normal', rule_b: 'tickets/close_terse_reason' },
      { index: 3, a: 'approval_required', b: 'allow', rule_a: 'tickets/close_vip', rule_b: 'tickets/close_normal' },
    ]);
    const gate = await svc('policy', 'test', corpus, '--a', 'tickets@1.0.0', '--b', join(EX, 'tickets-v2.policy'), '--fail-on-flip');
    expect(gate.code).toBe(1);
    expect(gate.stdout.trim().split('\n').at(-1)).toMatch(/^2 flips in 8 cases: A = tickets@1\.0\.0, B = /);
  });

  it(`the notify token (I 2.10 "\${VAR} ... never appears in logs, responses or events") is nowhere: svcd's and the worker's output, the runs' events, the answers, the data directories`, { timeout: 15_000 }, async () => {
    expect(runIds).toHaveLength(2);
    for (const id of runIds) seen.push(JSON.stringify(await events(svcd.kernelUrl!, id)), JSON.stringify((await http(svcd.kernelUrl!, 'GET', `/runs/${id}`)).body));
    seen.push(JSON.stringify((await http(svcd.gatewayUrl!, 'GET', '/tools')).body));
    // The check can fail: the header did carry the token (the server said authorized).
    expect(notify.requests[0]!.authorized).toBe(true);
    expect(seen.join('\n')).not.toContain(NOTIFY_TOKEN);
    expect(svcd.stderr()).toContain('gateway ready');
    expect(svcd.stderr()).not.toContain(NOTIFY_TOKEN);
    expect(worker.stderr()).not.toContain(NOTIFY_TOKEN);
    expect(filesHolding(dir, NOTIFY_TOKEN)).toEqual([]);
  });
});
