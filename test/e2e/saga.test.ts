// A saga end to end with real processes (decisions §6 abandon and compensations, §9 idempotency):
// the built svcd over a real SQLite ledger and an http payment upstream that records every
// request, the built `svc worker` and the built `svc` CLI. Four writes, each with a compensation
// that reads its own step's output; the systems of record are counted at the end.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { signBundle, type PublisherKeyFile } from '../../src/bundle/sign.js';
import { runSvc } from '../helpers/cli.js';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { DEMO_KEY, events, http, ok, spawnWorker, waitRun, type WorkerProcess } from './helpers.js';

const REQUESTER = { id: 'ana', role: 'ops', manager: 'lead' };
const ACTOR = 'ops-1:ops';

const SCHEMA = `
CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'open');
CREATE TABLE holds (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, amount REAL NOT NULL, status TEXT NOT NULL DEFAULT 'held');
CREATE TABLE shipments (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, charge_id TEXT);
-- ref is TEXT: the compensations match it as text against the ids they were given
CREATE TABLE undo (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, ref TEXT NOT NULL);
CREATE TABLE switches (name TEXT PRIMARY KEY, on_ INTEGER NOT NULL);
INSERT INTO switches VALUES ('ship', 0), ('slow', 0);
CREATE TRIGGER undo_order AFTER INSERT ON undo WHEN NEW.kind = 'order' BEGIN UPDATE orders SET status = 'cancelled' WHERE CAST(id AS TEXT) = NEW.ref; END;
CREATE TRIGGER undo_hold AFTER INSERT ON undo WHEN NEW.kind = 'hold' BEGIN UPDATE holds SET status = 'released' WHERE CAST(id AS TEXT) = NEW.ref; END;
CREATE TRIGGER ship_switch BEFORE INSERT ON shipments BEGIN SELECT RAISE(ABORT, 'ship switched off') WHERE (SELECT on_ FROM switches WHERE name = 'ship') = 1; END;
CREATE TRIGGER slow_order AFTER INSERT ON orders WHEN (SELECT on_ FROM switches WHERE name = 'slow') = 1 BEGIN
  SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000000) SELECT x FROM c); END;
`;

const RETRY = { max_attempts: 3, initial_delay_ms: 200, max_delay_ms: 1000 };
const BUNDLE = {
  name: 'saga',
  version: '1.0.0',
  department: 'ops',
  systems_of_record: ['ledger', 'pay'],
  tools: { 'ledger.create_order': { writes: true }, 'ledger.hold': { writes: true }, 'ledger.ship': { writes: true }, 'ledger.undo': { writes: true }, 'pay.post': { writes: true } },
  workflows: {
    order: {
      input_schema: { type: 'object', required: ['item', 'amount', 'pay_url', 'refund_url'], properties: { item: { type: 'string' }, amount: { type: 'number' }, pay_url: { type: 'string' }, refund_url: { type: 'string' } } },
      steps: [
        { id: 'create', kind: 'tool', tool: 'ledger.create_order', args: { item: '{{input.item}}' }, compensate: { tool: 'ledger.undo', args: { kind: 'order', ref: '{{steps.create.output.id}}' } }, retry: RETRY },
        { id: 'hold', kind: 'tool', tool: 'ledger.hold', args: { order_id: '{{steps.create.output.id}}', amount: '{{input.amount}}' }, compensate: { tool: 'ledger.undo', args: { kind: 'hold', ref: '{{steps.hold.output.id}}' } }, retry: RETRY },
        {
          id: 'charge',
          kind: 'action',
          tool: 'pay.post',
          args: { url: '{{input.pay_url}}', json: { order: '{{steps.create.output.id}}', amount: '{{input.amount}}' } },
          compensate: { tool: 'pay.post', args: { url: '{{input.refund_url}}', json: { charge_id: '{{steps.charge.output.json.charge_id}}' } } },
          output_schema: { type: 'object', required: ['status'], properties: { status: { const: 200 } } },
          retry: RETRY,
        },
        { id: 'ship', kind: 'tool', tool: 'ledger.ship', args: { order_id: '{{steps.create.output.id}}', charge_id: '{{steps.charge.output.json.charge_id}}' }, retry: RETRY },
      ],
    },
  },
};

let dir: string;
let svcd: SpawnedSvcd;
let pay: Server;
let payUrl: string;
const payRequests: Array<{ path: string; body: any }> = [];
/** While true the pay upstream answers /refund with 503 (and counts it). */
let refundsDown = false;
let refundsRefused = 0;
const workers: WorkerProcess[] = [];

const ledger = <T = any>(sql: string): T[] => {
  const db = new Database(join(dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
};
const setSwitch = (name: string, on: boolean) => {
  const db = new Database(join(dir, 'ledger.db'));
  try {
    db.prepare('UPDATE switches SET on_ = ? WHERE name = ?').run(on ? 1 : 0, name);
  } finally {
    db.close();
  }
};
const svc = (...args: string[]) => runSvc(['--kernel-url', svcd.kernelUrl!, '--actor', ACTOR, ...args]);

async function startRun(): Promise<string> {
  const remit = await ok(svcd.kernelUrl!, 'POST', '/remits', {
    tools: ['ledger.*', 'pay.*'],
    scopes: ['sql:table:*', 'http:host:127.0.0.1'],
    grants: [],
    spend: { tokens: 1000, usd: 1 },
    autonomy: 'autonomous',
    ttl_seconds: 3600,
    policy_set: [],
    requested_by: REQUESTER,
  });
  const bundle = await ok(svcd.kernelUrl!, 'POST', '/bundles', { bundle: BUNDLE, signature: signBundle(BUNDLE, DEMO_KEY as PublisherKeyFile) });
  const input = { item: 'widget', amount: 42, pay_url: `${payUrl}/charge`, refund_url: `${payUrl}/refund` };
  return (await ok(svcd.kernelUrl!, 'POST', '/runs', { bundle_id: bundle.bundle_id, workflow: 'order', input, remit_id: remit.remit_id, requested_by: REQUESTER })).run_id;
}

beforeAll(async () => {
  dir = tempDir('svc-saga-');
  const db = new Database(join(dir, 'ledger.db'));
  db.exec(SCHEMA);
  db.close();
  let charges = 0;
  pay = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const json = body ? JSON.parse(body) : null;
      if (refundsDown && req.url === '/refund') {
        refundsRefused += 1;
        res.writeHead(503).end(); // the upstream is down: nothing is refunded
        return;
      }
      payRequests.push({ path: req.url ?? '', body: json });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/charge' ? { charge_id: `ch_${++charges}` } : { refunded: json?.charge_id }));
    });
  });
  await new Promise<void>((r) => pay.listen(0, '127.0.0.1', r));
  payUrl = `http://127.0.0.1:${(pay.address() as AddressInfo).port}`;
  const statements = {
    create_order: { writes: true, statement: 'INSERT INTO orders (item) VALUES (:item) RETURNING id, item, status' },
    hold: { writes: true, statement: 'INSERT INTO holds (order_id, amount) VALUES (:order_id, :amount) RETURNING id, order_id, amount, status' },
    ship: { writes: true, statement: 'INSERT INTO shipments (order_id, charge_id) VALUES (:order_id, :charge_id) RETURNING id' },
    undo: { writes: true, statement: 'INSERT INTO undo (kind, ref) VALUES (:kind, :ref) RETURNING id, kind, ref' },
  };
  writeFileSync(
    join(dir, 'gateway.yaml'),
    stringifyYaml({
      data_dir: join(dir, 'gateway-data'),
      connectors: [
        { name: 'ledger', type: 'sqlite', path: join(dir, 'ledger.db'), timeout_ms: 1000, tools: statements },
        { name: 'pay', type: 'http', allowed_hosts: ['127.0.0.1'] },
      ],
    }),
  );
  svcd = await spawnSvcd(['--data-dir', join(dir, 'kernel'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', join(dir, 'gateway.yaml'), '--publisher', `${DEMO_KEY.key_id}:${DEMO_KEY.public_key}`]);
});

afterAll(async () => {
  for (const w of workers) await w.stop('SIGKILL');
  await svcd?.stop('SIGTERM');
  await new Promise<void>((r) => (pay ? pay.close(() => r()) : r()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a four-write saga against a real sqlite ledger and http upstream (decisions §6, §9)', () => {
  it('abandoned while parked at its last write: each completed write is compensated once, last first, with arguments from its own output; replay checks out', async () => {
    setSwitch('ship', true);
    const w = spawnWorker(svcd as any as { kernelUrl: string; gatewayUrl: string }, ['--kinds', 'tool,action']);
    workers.push(w);
    const runId = await startRun();
    await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'parked', 20_000, w.stderr);
    await w.stop('SIGTERM');
    setSwitch('ship', false);

    const ab = await svc('run', 'abandon', runId, '--reason', 'customer withdrew');
    expect(ab.code, ab.stderr).toBe(0);
    expect(ab.stdout).toContain('3 compensation(s) scheduled');
    const comp = spawnWorker(svcd as any as { kernelUrl: string; gatewayUrl: string }, ['--kinds', 'compensation']);
    workers.push(comp);
    const run = await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'abandoned', 20_000, comp.stderr);
    await comp.stop('SIGTERM');
    expect(run.error).toBeNull();
    expect(run.steps).toMatchObject({ create: { state: 'compensated' }, hold: { state: 'compensated' }, charge: { state: 'compensated' }, ship: { state: 'quarantined' } });

    // The systems of record: one refund of the one charge; the hold and the order undone once each,
    // the ids matched as text (an integer bound as a REAL was stored as '1.0' and matched nothing).
    const charge = payRequests.filter((r) => r.path === '/charge');
    expect(charge).toHaveLength(1);
    expect(payRequests.filter((r) => r.path === '/refund')).toEqual([{ path: '/refund', body: { charge_id: 'ch_1' } }]);
    expect(ledger('SELECT kind, ref FROM undo ORDER BY id')).toEqual([
      { kind: 'hold', ref: '1' },
      { kind: 'order', ref: '1' },
    ]);
    expect(ledger('SELECT status FROM orders')).toEqual([{ status: 'cancelled' }]);
    expect(ledger('SELECT status FROM holds')).toEqual([{ status: 'released' }]);
    expect(ledger('SELECT * FROM shipments')).toEqual([]);

    const log = await events(svcd.kernelUrl!, runId);
    const after = log.slice(log.findIndex((e) => e.kind === 'run.abandon_requested'));
    expect(after.filter((e) => e.kind === 'compensation.completed').map((e) => e.payload.step)).toEqual(['charge', 'hold', 'create']);
    expect(after.at(-1)).toMatchObject({ kind: 'run.abandoned', payload: { compensated: ['charge', 'hold', 'create'], failed: [] } });
    const replay = await ok(svcd.kernelUrl!, 'POST', `/runs/${runId}/replay`);
    expect(replay).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [], chain_errors: [] });
    const again = await http(svcd.kernelUrl!, 'POST', `/runs/${runId}/abandon`, { reason: 'again', actor: { id: 'ops-1', role: 'ops' } });
    expect(again.status).toBe(409);
  });

  it('a write that timed out with its outcome unknown, resumed twice, is one uncompensated write on abandon, not one per attempt (decisions §9, §6)', async () => {
    setSwitch('slow', true);
    const w = spawnWorker(svcd as any as { kernelUrl: string; gatewayUrl: string }, ['--kinds', 'tool,action']);
    workers.push(w);
    try {
      const runId = await startRun();
      const parked = await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'parked', 30_000, w.stderr);
      expect(parked.steps.create.error.code).toBe('idempotency_outcome_unknown');
      for (let i = 0; i < 2; i++) {
        const before = (await http(svcd.kernelUrl!, 'GET', `/runs/${runId}`)).body.last_seq;
        expect((await svc('run', 'resume', runId)).code).toBe(0);
        await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'parked' && s.last_seq > before + 2, 20_000, w.stderr);
      }
      const log = await events(svcd.kernelUrl!, runId);
      const calls = log.filter((e) => e.kind === 'tool.called').map((e) => e.payload.outcome);
      expect(calls[0]).toBe('upstream_error');
      expect(calls.filter((o) => o === 'idempotency_outcome_unknown').length).toBeGreaterThanOrEqual(2);

      const ab = await http(svcd.kernelUrl!, 'POST', `/runs/${runId}/abandon`, { reason: 'reconcile by hand', actor: { id: 'ops-1', role: 'ops' } });
      expect(ab.status).toBe(202);
      const first = log.find((e) => e.kind === 'tool.called')!;
      expect(ab.body.uncompensated_writes).toEqual([{ seq: first.seq, kind: 'tool.called', step: 'create', tool: 'ledger.create_order', outcome: 'upstream_error' }]);
      expect(ab.body.uncompensated_writes_total).toBe(1);
      // SQLite rolled the cut-off statement back: nothing was written, nothing ran twice.
      expect(ledger('SELECT count(*) AS n FROM orders WHERE id > 1')).toEqual([{ n: 0 }]);
    } finally {
      setSwitch('slow', false);
      await w.stop('SIGTERM');
    }
  });

  it("the refund's compensation fails for good while the pay upstream is down; once it is back, svc run retry-compensations refunds it once (docs/design.md Retrying compensations)", async () => {
    setSwitch('ship', true);
    const w = spawnWorker(svcd as any as { kernelUrl: string; gatewayUrl: string }, ['--kinds', 'tool,action']);
    workers.push(w);
    const runId = await startRun();
    const parked = await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'parked', 20_000, w.stderr);
    await w.stop('SIGTERM');
    setSwitch('ship', false);
    const chargeId = parked.steps.charge.output.json.charge_id;

    refundsDown = true;
    expect((await svc('run', 'abandon', runId, '--reason', 'customer withdrew')).code).toBe(0);
    const comp = spawnWorker(svcd as any as { kernelUrl: string; gatewayUrl: string }, ['--kinds', 'compensation']);
    workers.push(comp);
    try {
      // Three attempts against the 503s, then the refund is given up; the hold and the order are still undone.
      const given = await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'abandoned', 30_000, comp.stderr);
      expect(given.error).toMatchObject({ code: 'compensation_failed', message: 'compensation failed for step(s) charge' });
      expect(given.steps).toMatchObject({ create: { state: 'compensated' }, hold: { state: 'compensated' }, charge: { state: 'failed', error: { code: 'upstream_error' } } });
      expect(refundsRefused).toBe(RETRY.max_attempts);
      expect(payRequests.filter((r) => r.path === '/refund' && r.body?.charge_id === chargeId)).toEqual([]);
      const show = await svc('run', 'show', runId);
      expect(show.stderr).toContain(`svc run retry-compensations ${runId} --reason TEXT --actor ID:ROLE runs them again`);

      // The upstream is repaired; the operator retries through svc.
      refundsDown = false;
      const retried = await svc('run', 'retry-compensations', runId, '--reason', 'pay upstream back');
      expect(retried.code, retried.stderr).toBe(0);
      expect(retried.stdout).toContain('1 compensation(s) scheduled again (charge)');
      const done = await waitRun(svcd.kernelUrl!, runId, (s) => s.state === 'abandoned' && s.error === null, 20_000, comp.stderr);
      expect(done.steps.charge.state).toBe('compensated');
    } finally {
      refundsDown = false;
      await comp.stop('SIGTERM');
    }
    expect(payRequests.filter((r) => r.path === '/refund' && r.body?.charge_id === chargeId)).toHaveLength(1);
    const log = await events(svcd.kernelUrl!, runId);
    const retry = log.findIndex((e) => e.kind === 'compensation.retry_requested');
    expect(log[retry]).toMatchObject({ actor: { id: 'ops-1', role: 'ops' }, payload: { reason: 'pay upstream back', steps: ['charge'], from_state: 'abandoned' } });
    // The gateway's tool.called may arrive through its outbox at any point: the kernel's own kinds, in order.
    expect(log.slice(retry).map((e) => e.kind).filter((k) => k !== 'tool.called')).toEqual(['compensation.retry_requested', 'step.leased', 'compensation.completed', 'run.abandoned']);
    expect(log.at(-1)).toMatchObject({ payload: { compensated: ['hold', 'create', 'charge'], failed: [] } });
    expect((await svc('run', 'replay', runId)).code).toBe(0);
  });
});
