/**
 * sqlite statements run in a child process per connector (docs/design.md, "Upstreams are
 * hostile peers too"; decisions §9 for the idempotency states): a statement past the
 * connector's `timeout_ms` is stopped by killing that process, the gateway answers other
 * calls meanwhile, a write stopped mid-run is an unknown outcome whose key never runs again,
 * and SQLite rolls back what the killed statement had not committed. Real SQLite files, the
 * real gateway over HTTP.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { StatementFailureError, StatementHost, type StatementHostOptions } from '../../src/gateway/connectors/sqlite-host.js';
import { UpstreamError } from '../../src/gateway/connectors/types.js';
import { isAlive, ROOT, tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { Redactor } from '../../src/log/logger.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

const signer = testSigner();
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const remit = () => mintToken(signer, remitPayload(signer, { tools: ['slow.*', 'fast.*'], scopes: ['sql:table:*'], autonomy: 'autonomous' }, Math.floor(clock.now() / 1000)));

const dir = tempDir('svc-sqlite-host-');
const slowDb = join(dir, 'slow.db');
const fastDb = join(dir, 'fast.db');
/** A value only this process's environment holds: the statement process must not see it. */
const ENV_SECRET = 'env-secret-7f3a9c1e5b';
// Counting to :n through a recursive CTE: CPU-bound, as long as :n asks, touching table t.
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n) SELECT count(*) AS n FROM c, (SELECT count(*) FROM t)';
let gw: TestGateway;
const redactor = new Redactor();
const log = capturedLogger(redactor);

const hostOf = (name: string): StatementHost => (gw.gateway as unknown as { connectors: Map<string, { host: StatementHost }> }).connectors.get(name)!.host;
async function until(what: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  for (const file of [slowDb, fastDb]) {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (v INTEGER)');
    db.close();
  }
  process.env.SVC_TEST_ENV_SECRET = ENV_SECRET;
  gw = await startGateway({
    keys: signer,
    clock,
    redactor,
    logger: log.logger,
    doc: {
      connectors: [
        {
          name: 'slow',
          type: 'sqlite',
          path: slowDb,
          timeout_ms: 1000,
          tools: {
            count: { statement: COUNT, input_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } },
            // Inserts :n rows one by one: killed midway, SQLite must roll back the rows it had written.
            fill: { writes: true, statement: 'INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n) SELECT x FROM c', input_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } },
            rows: { statement: 'SELECT count(*) AS n FROM t' },
          },
        },
        { name: 'fast', type: 'sqlite', path: fastDb, tools: { rows: { statement: 'SELECT count(*) AS n FROM t' } } },
      ],
    },
  });
});

afterAll(async () => {
  delete process.env.SVC_TEST_ENV_SECRET;
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('sqlite statements in a child process (docs/design.md "Upstreams are hostile peers too")', () => {
  it('a statement past timeout_ms is stopped: 502 upstream_error in about timeout_ms, its process killed, the next call served by a new one', async () => {
    const before = hostOf('slow').pid!;
    expect(isAlive(before)).toBe(true);
    const started = Date.now();
    const res = await gw.call({ remit_token: remit(), tool: 'slow.count', args: { n: 1e12 } });
    const took = Date.now() - started;
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'upstream_error', message: expect.stringMatching(/timed out after 1000 ms/) });
    expect(took).toBeLessThan(4000);
    await until(() => !isAlive(before));
    const next = await gw.call({ remit_token: remit(), tool: 'slow.count', args: { n: 10 } });
    expect(next.status).toBe(200);
    expect(next.body.result).toEqual({ rows: [{ n: 10 }] });
    expect(hostOf('slow').pid).not.toBe(before);
  });

  it('the gateway answers other calls while a statement runs; a call queued behind it on the same connector runs after the kill', async () => {
    const slow = gw.call({ remit_token: remit(), tool: 'slow.count', args: { n: 1e12 } });
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    const other = await gw.call({ remit_token: remit(), tool: 'fast.rows', args: {} });
    expect(other.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(700); // not held for the slow statement's 1000 ms
    // Queued halfway through: its own 1000 ms leave it half of them once the kill frees the connector.
    await new Promise((r) => setTimeout(r, Math.max(0, 500 - (Date.now() - t0))));
    const queued = gw.call({ remit_token: remit(), tool: 'slow.rows', args: {} });
    expect((await slow).status).toBe(502);
    const behind = await queued;
    expect(behind.status).toBe(200); // not failed with the statement that overran
    expect(behind.body.result).toEqual({ rows: [{ n: 0 }] });
  });

  it('a write stopped mid-run: 502 with details.outcome "unknown", SQLite rolled its rows back, and its key is 409 idempotency_outcome_unknown (decisions §9)', async () => {
    const res = await gw.call({ remit_token: remit(), tool: 'slow.fill', args: { n: 1e12 }, idempotency_key: 'fill-1' });
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'upstream_error', details: { outcome: 'unknown' } });
    expect(res.body.error.message).toMatch(/outcome is unknown/);
    // Logged for the operator who may have to reconcile it by hand.
    const warned = log.text().split('\n').filter((l) => l.includes('a write was stopped mid-run')).map((l) => JSON.parse(l));
    expect(warned).toEqual([expect.objectContaining({ level: 'warn', tool: 'slow.fill', idempotency_key: 'fill-1' })]);
    const again = await gw.call({ remit_token: remit(), tool: 'slow.fill', args: { n: 1e12 }, idempotency_key: 'fill-1' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('idempotency_outcome_unknown');
    // The killed statement's rows are not in the file.
    const count = await gw.call({ remit_token: remit(), tool: 'slow.rows', args: {} });
    expect(count.body.result).toEqual({ rows: [{ n: 0 }] });
    const direct = new Database(slowDb, { readonly: true });
    expect(direct.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 0 });
    direct.close();
    // A write that finishes in time is stored as usual.
    const ok = await gw.call({ remit_token: remit(), tool: 'slow.fill', args: { n: 3 }, idempotency_key: 'fill-2' });
    expect(ok.status).toBe(200);
    expect(ok.body.result).toMatchObject({ changes: 3 });
  });

  it('a read stopped mid-run releases its key: a retry runs it', async () => {
    const res = await gw.call({ remit_token: remit(), tool: 'slow.count', args: { n: 1e12 }, idempotency_key: 'count-1' });
    expect(res.status).toBe(502);
    expect(res.body.error.details?.outcome).toBeUndefined();
    const again = await gw.call({ remit_token: remit(), tool: 'slow.count', args: { n: 1e12 }, idempotency_key: 'count-1' });
    expect(again.status).toBe(502); // ran again (and overran again), not refused
    expect(again.body.error.code).toBe('upstream_error');
  });

  it('a statement process that dies while idle is replaced by the next call', async () => {
    const pid = hostOf('fast').pid!;
    process.kill(pid, 'SIGKILL');
    await until(() => !isAlive(pid));
    const res = await gw.call({ remit_token: remit(), tool: 'fast.rows', args: {} });
    expect(res.status).toBe(200);
    expect(hostOf('fast').pid).not.toBe(pid);
  });

  it("the statement process gets none of svcd's environment (secrets stay in svcd)", () => {
    const pid = hostOf('fast').pid!;
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    expect(environ).not.toContain(ENV_SECRET);
    expect(environ).not.toContain('SVC_TEST_ENV_SECRET');
  });

  it('closing the gateway (the end of a drain) ends its statement processes, a running one too', async () => {
    const g = await startGateway({ keys: signer, clock, doc: { connectors: [{ name: 'slow', type: 'sqlite', path: slowDb, timeout_ms: 60_000, tools: { count: { statement: COUNT } } }] } });
    const host = (g.gateway as unknown as { connectors: Map<string, { host: StatementHost }> }).connectors.get('slow')!.host;
    const pid = host.pid!;
    const running = g.call({ remit_token: remit(), tool: 'slow.count', args: { n: 1e12 } });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    await g.gateway.close(); // what svcd does once the drain deadline has passed
    expect(Date.now() - t0).toBeLessThan(1500); // killed, not waited on for a graceful close
    await until(() => !isAlive(pid));
    const res = await running; // answered, not left hanging for its 60 s
    expect(res.status).toBe(502);
    expect(res.body.error.message).toMatch(/closing/);
    await g.close();
  });
});

describe('StatementHost: what a call that failed did (docs/design.md "Upstreams are hostile peers too")', () => {
  const file = join(dir, 'host.db');
  const options = (extra: Partial<StatementHostOptions> = {}): StatementHostOptions => ({
    name: 'h',
    path: file,
    statements: [
      { op: 'put', sql: 'INSERT INTO t (v) VALUES (:v)', writes: true, mode: 'run' },
      { op: 'slowput', sql: 'INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) SELECT x FROM c', writes: true, mode: 'run' },
      { op: 'n', sql: 'SELECT count(*) AS n FROM t', writes: false, mode: 'select' },
      { op: 'slowcount', sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) SELECT count(*) AS n FROM c', writes: false, mode: 'select' },
      { op: 'local', sql: "SELECT datetime(0, 'unixepoch', 'localtime') AS t", writes: false, mode: 'select' },
    ],
    busyTimeoutMs: 100,
    maxResultBytes: 1 << 20,
    fileCodes: '^$',
    ...extra,
  });
  const live = () => new AbortController().signal;
  const rows = async (h: StatementHost) => ((await h.run('n', {}, live(), () => undefined)) as { rows: Array<{ n: number }> }).rows[0]!.n;

  beforeAll(() => {
    const db = new Database(file);
    db.exec('CREATE TABLE t (v INTEGER)');
    db.close();
  });

  it('a process that cannot be spawned fails start and every call, none of them an unknown outcome, and the host is not stuck', async () => {
    const h = new StatementHost(options({ execPath: join(dir, 'no-such-node') }));
    expect(await h.start()).toMatch(/ended before it was ready \(spawn .*no-such-node ENOENT\)/);
    let unknown = 0;
    for (let i = 0; i < 2; i++) {
      const err = await h.run('put', { v: 1 }, live(), () => unknown++).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UpstreamError);
      expect((err as Error).message).toMatch(/ENOENT/);
    }
    expect(unknown).toBe(0);
    await h.close();
  });

  it('a write sent to a process that died before running it did not run there: it runs once on a new process; one that died mid-write is unknown', async () => {
    const h = new StatementHost(options());
    expect(await h.start()).toBeNull();
    let unknown = 0;
    for (let i = 0; i < 3; i++) {
      expect(await rows(h)).toBe(i); // a process is up (the first, or the one the last call started)
      process.kill(h.pid!, 'SIGKILL'); // the kill lands as the call is written to the channel
      expect(await h.run('put', { v: i }, live(), () => unknown++)).toEqual({ changes: 1, last_insert_rowid: i + 1 });
    }
    expect(unknown).toBe(0);
    expect(await rows(h)).toBe(3); // each exactly once
    await new Promise<void>((resolve) => {
      const db = new Database(file);
      db.exec('DELETE FROM t');
      db.close();
      resolve();
    });
    // A write queued behind a read that overran, given up while its new process was still
    // booting: it never started, so it is not an unknown outcome.
    const readGiveUp = new AbortController();
    const writeGiveUp = new AbortController();
    const slowRead = h.run('slowcount', {}, readGiveUp.signal, () => undefined).catch((e: unknown) => e);
    const queuedWrite = h.run('put', { v: 9 }, writeGiveUp.signal, () => unknown++).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200));
    readGiveUp.abort(new Error('read timed out'));
    writeGiveUp.abort(new Error('write timed out')); // the same tick: its process has not booted
    expect(((await slowRead) as Error).message).toBe('read timed out');
    expect(((await queuedWrite) as Error).message).toBe('write timed out');
    expect(unknown).toBe(0);
    expect(await rows(h)).toBe(0);
    const running = h.run('slowput', {}, live(), () => unknown++).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    process.kill(h.pid!, 'SIGKILL');
    expect(((await running) as Error).message).toMatch(/ended \(signal SIGKILL\)/);
    expect(unknown).toBe(1);
    expect(await rows(h)).toBe(0); // SQLite rolled back what the killed write had inserted
    await h.close();
  });

  it("a write given up as its answer is on the way is that answer, not an unknown outcome (the call's late answer, src/gateway/call.ts)", async () => {
    const h = new StatementHost(options());
    expect(await h.start()).toBeNull();
    const before = await rows(h);
    let unknown = 0;
    const giveUp = new AbortController();
    const write = h.run('put', { v: 7 }, giveUp.signal, () => unknown++).then((v) => ({ v }), (e: unknown) => ({ e }));
    // svcd's loop held while the process runs the write and answers: the answer waits in the
    // channel when the call is given up and its process killed.
    const end = Date.now() + 400;
    while (Date.now() < end);
    giveUp.abort(new Error('write timed out'));
    expect(await write).toEqual({ v: { changes: 1, last_insert_rowid: expect.any(Number) } });
    expect(unknown).toBe(0);
    expect(await rows(h)).toBe(before + 1);
    await h.close();
    const db = new Database(file);
    db.exec('DELETE FROM t'); // the tests after this one count from an empty table
    db.close();
  });

  it('a write killed mid-transaction in rollback-journal mode leaves a hot journal the next process rolls back, a read first in its list or not', async () => {
    const journalFile = join(dir, 'journal.db');
    const setup = new Database(journalFile);
    setup.pragma('journal_mode = DELETE');
    setup.exec('CREATE TABLE t (v INTEGER)');
    setup.close();
    // The read is listed (and prepared) first: on the read-only connection it could not roll a hot journal back.
    const h = new StatementHost(options({ path: journalFile, statements: [
      { op: 'n', sql: 'SELECT count(*) AS n FROM t', writes: false, mode: 'select' },
      { op: 'slowput', sql: 'INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) SELECT x FROM c', writes: true, mode: 'run' },
    ] }));
    expect(await h.start()).toBeNull();
    const giveUp = new AbortController();
    const running = h.run('slowput', {}, giveUp.signal, () => undefined, 1).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 400));
    giveUp.abort(new Error('write timed out'));
    expect(((await running) as Error).message).toBe('write timed out');
    for (let i = 0; i < 3; i++) expect(await h.run('n', {}, live(), () => undefined, 1)).toEqual({ rows: [{ n: 0 }] });
    await h.close();
  });

  it('the schema check runs in the statement\'s transaction: a file locked by another connection is a busy failure, and the process lives on', async () => {
    const lockedFile = join(dir, 'locked.db');
    const setup = new Database(lockedFile); // rollback journal: a writer's EXCLUSIVE lock keeps readers out
    setup.exec('CREATE TABLE t (v INTEGER)');
    const h = new StatementHost(options({ path: lockedFile }));
    expect(await h.start()).toBeNull();
    const pid = h.pid;
    setup.exec('BEGIN EXCLUSIVE');
    try {
      const err = await h.run('n', {}, live(), () => undefined, 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StatementFailureError);
      expect((err as StatementFailureError).failure).toMatchObject({ kind: 'sqlite', code: 'SQLITE_BUSY' });
      expect(h.pid).toBe(pid);
    } finally {
      setup.exec('ROLLBACK');
      setup.close();
    }
    // Under another schema than the call was checked for: refused, not run.
    const changed = await h.run('n', {}, live(), () => undefined, 99).catch((e: unknown) => e);
    expect((changed as StatementFailureError).failure).toMatchObject({ kind: 'schema_changed', schemaVersion: 1 });
    expect(await h.run('n', {}, live(), () => undefined, 1)).toEqual({ rows: [{ n: 0 }] });
    await h.close();
  });

  it("the process keeps svcd's time zone (SQLite's localtime), nothing else of its environment", async () => {
    const before = process.env.TZ;
    process.env.TZ = 'Asia/Tokyo';
    const h = new StatementHost(options());
    try {
      await h.start();
      expect(await h.run('local', {}, live(), () => undefined)).toEqual({ rows: [{ t: '1970-01-01 09:00:00' }] });
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
      await h.close();
    }
  });

  it('an idle host does not keep its process alive; out of descriptors at spawn, a call fails cleanly and the next one runs', () => {
    const host = join(ROOT, 'dist/src/gateway/connectors/sqlite-host.js');
    const script = `
      import { openSync, closeSync } from 'node:fs';
      import { StatementHost } from ${JSON.stringify(host)};
      const h = new StatementHost(${JSON.stringify(options())});
      await h.start();
      const sig = () => new AbortController().signal;
      console.log('first', JSON.stringify(await h.run('n', {}, sig(), () => {})));
      // The next call needs a new process; take every descriptor first.
      process.kill(h.pid, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 200));
      const fds = [];
      try { for (;;) fds.push(openSync('/dev/null', 'r')); } catch {}
      let unknown = 0;
      // Tried twice (a call that provably did not run gets one more process), failing both.
      const starved = await h.run('put', { v: 7 }, sig(), () => unknown++).then(() => 'ran', (e) => e.constructor.name + ': ' + e.message);
      for (const fd of fds) closeSync(fd);
      console.log('starved', starved, 'unknown', unknown);
      console.log('after', JSON.stringify(await h.run('n', {}, sig(), () => {})));
      // No close(): an idle host must not keep this process from exiting.
    `;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toContain('first {"rows":[{"n":0}]}');
    expect(out.stdout).toMatch(/starved UpstreamError: .*EMFILE.* unknown 0/);
    expect(out.stdout).toContain('after {"rows":[{"n":0}]}');
  });
});
