/**
 * The built-in connectors against real peers (interface 2.10, 4.2 scope derivation;
 * decisions §9): a real SQLite file with a join, a view and a trigger; a local HTTP server
 * with redirects; a temp fs root with symlinks that escape it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { FsConnector, MAX_LIST_ENTRIES } from '../../src/gateway/connectors/fs.js';
import { SqliteConnector, namedParameters, tablesTouched } from '../../src/gateway/connectors/sqlite.js';
import { StatementFailureError, StatementHost } from '../../src/gateway/connectors/sqlite-host.js';
import { DeterministicFailure, NotAttempted, ScopeRefusal, UpstreamError } from '../../src/gateway/connectors/types.js';
import { closedPortUrl, tempDir } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { startGateway, type TestGateway } from './helpers.js';

const signer = testSigner();
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
const now = () => Math.floor(clock.now() / 1000);
const remit = (tools: string[], scopes: string[], autonomy: 'autonomous' | 'observe' = 'autonomous') => mintToken(signer, remitPayload(signer, { tools, scopes, autonomy }, now()));

const dir = tempDir('svc-gw-conn-');
const dbPath = join(dir, 'billing.db');
const root = join(dir, 'root');
const outside = join(dir, 'outside');

let server: Server;
let port = 0;
const hits: string[] = [];
let gw: TestGateway;

function handler(req: IncomingMessage, res: ServerResponse): void {
  hits.push(req.url ?? '');
  const url = new URL(req.url ?? '/', 'http://x');
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    switch (url.pathname) {
      case '/json':
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ hello: 'world', q: url.searchParams.get('q') }));
        return;
      case '/echo':
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, headers: req.headers, body }));
        return;
      case '/redirect-on':
        res.writeHead(302, { location: `/json?q=followed` }).end();
        return;
      case '/redirect-creds':
        res.writeHead(302, { location: `http://user:pw@127.0.0.1:${port}/json?q=with-creds` }).end();
        return;
      case '/redirect-off':
        res.writeHead(302, { location: `http://localhost:${port}/json?q=escaped` }).end();
        return;
      case '/boom':
        res.writeHead(500).end('down');
        return;
      case '/deep':
        res.writeHead(200, { 'content-type': 'application/json' }).end('['.repeat(200_000) + ']'.repeat(200_000));
        return;
      case '/missing':
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no such thing');
        return;
      case '/slow':
        setTimeout(() => res.writeHead(200).end('late'), 1500);
        return;
      case '/pay-then-see-other': // a POST that acts, then sends the client elsewhere
        res.writeHead(303, { location: '/boom' }).end();
        return;
      case '/big-ok': // a 200 whose body is larger than webw keeps
        res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(4096));
        return;
      case '/boom-big': // a 5xx whose body is larger than the connector keeps
        res.writeHead(503, { 'content-type': 'text/plain' }).end('x'.repeat(4096));
        return;
      case '/slow-body': // answers at once, then the body takes longer than the timeout
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part');
        setTimeout(() => res.end(' rest'), 1500);
        return;
      default:
        res.writeHead(404).end();
    }
  });
}

beforeAll(async () => {
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);
    CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), amount REAL NOT NULL);
    CREATE TABLE refunds (id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL, amount REAL NOT NULL CHECK (amount > 0), at TEXT NOT NULL);
    CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL, at TEXT NOT NULL);
    CREATE INDEX invoices_customer ON invoices (customer_id);
    CREATE VIEW big_invoices AS SELECT i.id, c.name, i.amount FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.amount >= 100;
    CREATE TRIGGER refunds_audit AFTER INSERT ON refunds BEGIN INSERT INTO audit (what, at) VALUES ('refund ' || NEW.id, NEW.at); END;
    INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com'), (2, 'Bob', 'bob@example.com');
    INSERT INTO invoices VALUES (10, 1, 250.0), (11, 2, 40.0);
  `);
  db.close();

  mkdirSync(join(root, 'sub'), { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(root, 'a.txt'), 'alpha');
  writeFileSync(join(root, 'sub', 'b.txt'), 'beta');
  writeFileSync(join(outside, 'secret.txt'), 'outside secret');
  symlinkSync(outside, join(root, 'escape'));
  symlinkSync(join(outside, 'secret.txt'), join(root, 'escape-file'));
  symlinkSync(join(root, 'sub'), join(root, 'inner'));

  server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;

  gw = await startGateway({
    keys: signer,
    clock,
    env: { CRM_API_KEY: 'crm-key-0123456789' },
    doc: {
      connectors: [
        {
          name: 'billing',
          type: 'sqlite',
          path: dbPath,
          tools: {
            lookup: { description: 'Invoice with its customer', statement: 'SELECT c.name, i.id AS invoice_id, i.amount FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.id = :invoice_id' },
            big: { statement: 'SELECT id, name, amount FROM big_invoices WHERE amount >= :min ORDER BY id' },
            refund: {
              writes: true,
              statement: 'INSERT INTO refunds (invoice_id, amount, at) VALUES (:invoice_id, :amount, :now) RETURNING id, invoice_id, amount, at',
              contract: { required: { id: 'number', at: 'string' } },
            },
            rename: { writes: true, statement: 'UPDATE customers SET name = :name WHERE id = :id' },
            // An operator's input_schema that lets any JSON value through to a parameter.
            by_name: { statement: 'SELECT id FROM customers WHERE name = :name', input_schema: { type: 'object', properties: { name: {} } } },
          },
        },
        { name: 'web', type: 'http', allowed_hosts: ['127.0.0.1'], headers: { 'x-api-key': '${CRM_API_KEY}' }, timeout_ms: 400 },
        { name: 'web2', type: 'http', allowed_hosts: ['127.0.0.1', 'localhost'] },
        { name: 'webw', type: 'http', allowed_hosts: ['127.0.0.1'], timeout_ms: 400, max_body_bytes: 1024 },
        { name: 'files', type: 'fs', root },
      ],
    },
  });
});

afterAll(async () => {
  await gw?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe('sqlite connector shutdown', () => {
  it('a clean stop leaves the database file complete: no -wal or -shm behind (a backup of the file has every write)', async () => {
    const dir = tempDir('svc-sqlite-close-');
    const file = join(dir, 'small.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL'); // as the demo's billing database is
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    db.close();
    const g = await startGateway({
      keys: signer,
      clock,
      doc: { connectors: [{ name: 'small', type: 'sqlite', path: file, tools: { put: { writes: true, statement: 'INSERT INTO t (v) VALUES (:v)' }, all: { statement: 'SELECT v FROM t' } } }] },
    });
    const t = remit(['small.*'], ['sql:table:*']);
    expect((await g.call({ remit_token: t, tool: 'small.put', args: { v: 'kept' } })).status).toBe(200);
    expect((await g.call({ remit_token: t, tool: 'small.all', args: {} })).body.result.rows).toEqual([{ v: 'kept' }]);
    await g.close();
    expect(existsSync(`${file}-wal`)).toBe(false);
    expect(existsSync(`${file}-shm`)).toBe(false);
    const check = new Database(file, { readonly: true });
    expect(check.prepare('SELECT v FROM t').all()).toEqual([{ v: 'kept' }]);
    check.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('sqlite connector (decisions §9: tables from EXPLAIN, views and triggers count)', () => {
  it('finds the tables of a join, a view and a trigger from SQLite itself', () => {
    const db = new Database(dbPath, { readonly: true });
    expect(tablesTouched(db, 'SELECT c.name FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.id = :id', ['id']).sort()).toEqual(['customers', 'invoices']);
    expect(tablesTouched(db, 'SELECT * FROM big_invoices', []).sort()).toEqual(['customers', 'invoices']);
    expect(tablesTouched(db, "INSERT INTO refunds (invoice_id, amount, at) VALUES (1, 1, 'x')", []).sort()).toEqual(['audit', 'refunds']);
    // Reading the schema discloses every table's definition: it is a table touched too.
    expect(tablesTouched(db, 'SELECT name, sql FROM sqlite_schema WHERE name = :n', ['n'])).toEqual(['sqlite_schema']);
    expect(tablesTouched(db, "SELECT sql FROM sqlite_master WHERE type = 'table'", [])).toEqual(['sqlite_schema']);
    expect(tablesTouched(db, 'SELECT i.id, s.name FROM invoices i, sqlite_schema s', []).sort()).toEqual(['invoices', 'sqlite_schema']);
    // A PRAGMA opens no table, yet discloses the schema (table_info) or the file's settings:
    // it is a read of sqlite_schema, however it is spelled.
    expect(tablesTouched(db, 'PRAGMA table_info(invoices)', [])).toEqual(['sqlite_schema']);
    // A DELETE without WHERE empties its table without opening it (the Clear opcode).
    expect(tablesTouched(db, 'DELETE FROM audit', [])).toEqual(['audit']);
    expect(tablesTouched(db, ' /* audit */ -- list them\n pragma database_list', [])).toEqual(['sqlite_schema']);
    expect(() => tablesTouched(db, 'ATTACH :p AS other', ['p'])).toThrow(/ATTACH changes which databases the connection reaches/);
    expect(() => tablesTouched(db, 'detach other', [])).toThrow(/DETACH/);
    db.close();
    expect(namedParameters("SELECT ':fake', \"a:b\" FROM t -- :c\nWHERE x = :x /* :y */ AND y = :now AND z = :x")).toEqual({ names: ['x', 'now'], others: [] });
    expect(namedParameters('SELECT ? , @a, $b').others).toEqual(['?', '@a', '$b']);
  });

  it('virtual tables (FTS5) are tables touched too, through a trigger as well; json_each needs no grant; pragma functions are refused at load', async () => {
    const vdir = tempDir('svc-sqlite-vtab-');
    const file = join(vdir, 'docs.db');
    const db = new Database(file);
    db.exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
      CREATE VIRTUAL TABLE notes_fts USING fts5(body);
      CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN INSERT INTO notes_fts (rowid, body) VALUES (new.id, new.body); END;`);
    expect(tablesTouched(db, 'SELECT rowid, body FROM notes_fts WHERE notes_fts MATCH :q', ['q'])).toEqual(['notes_fts']);
    expect(tablesTouched(db, 'INSERT INTO notes_fts (body) VALUES (:b)', ['b'])).toEqual(['notes_fts']);
    expect(tablesTouched(db, 'INSERT INTO notes (body) VALUES (:b)', ['b']).sort()).toEqual(['notes', 'notes_fts']);
    expect(tablesTouched(db, 'SELECT n.body FROM notes n WHERE n.id IN (SELECT value FROM json_each(:ids))', ['ids'])).toEqual(['notes']);
    expect(() => tablesTouched(db, "SELECT name FROM pragma_table_info('notes')", [])).toThrow(/virtual table that is not in the schema/);
    // Dropping a virtual table names it in VDestroy's P4, not through a vtab object.
    expect(tablesTouched(db, 'DROP TABLE notes_fts', [])).toContain('notes_fts');
    expect(() => tablesTouched(db, 'VACUUM', [])).toThrow(/VACUUM rewrites the whole file/);
    expect(() => tablesTouched(db, 'VACUUM INTO :p', ['p'])).toThrow(/VACUUM/);
    db.close();

    const tools = {
      search: { statement: 'SELECT rowid AS id, body FROM notes_fts WHERE notes_fts MATCH :q' },
      add: { writes: true, statement: 'INSERT INTO notes (body) VALUES (:b)' },
    };
    const g = await startGateway({ keys: signer, clock, doc: { connectors: [{ name: 'docs', type: 'sqlite', path: file, tools }] } });
    try {
      // A remit for `notes` alone cannot reach the index the trigger writes, nor search it.
      const notesOnly = remit(['docs.*'], ['sql:table:notes'], 'autonomous');
      const add = await g.call({ remit_token: notesOnly, tool: 'docs.add', args: { b: 'secret plan' } });
      expect(add.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('sql:table:notes_fts') });
      const search = await g.call({ remit_token: notesOnly, tool: 'docs.search', args: { q: 'secret' } });
      expect(search.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('sql:table:notes_fts') });
      const both = remit(['docs.*'], ['sql:table:notes', 'sql:table:notes_fts'], 'autonomous');
      expect((await g.call({ remit_token: both, tool: 'docs.add', args: { b: 'secret plan' } })).status).toBe(200);
      const found = await g.call({ remit_token: both, tool: 'docs.search', args: { q: 'secret' } });
      expect(found.body).toMatchObject({ ok: true, result: { rows: [{ id: 1, body: 'secret plan' }] }, scopes: ['sql:table:notes_fts'] });
    } finally {
      await g.close();
    }
    await expect(
      startGateway({ keys: signer, clock, doc: { connectors: [{ name: 'docs', type: 'sqlite', path: file, tools: { cols: { statement: "SELECT name FROM pragma_table_info('notes')" } } }] } }),
    ).rejects.toThrow(/\/tools\/cols\/statement: the statement reads a virtual table/);
    rmSync(vdir, { recursive: true, force: true });
  });

  it('describes tools with scope_derivation table and parameter-derived input schemas', async () => {
    const tools = (await gw.req('GET', '/tools')).body as Array<Record<string, any>>;
    const refund = tools.find((t) => t.id === 'billing.refund')!;
    expect(refund).toMatchObject({ connector: 'billing', writes: true, scope_derivation: 'table', contract: { required: { id: 'number', at: 'string' } } });
    expect(refund.input_schema.required).toEqual(['invoice_id', 'amount']); // :now is bound by the gateway
    expect(tools.find((t) => t.id === 'billing.lookup')).toMatchObject({ writes: false, description: 'Invoice with its customer', contract: { required: { rows: 'list' } } });
  });

  it('a parameter an input_schema lets through as a list or an object is 422 args_invalid at its path; SQLite binds only scalars (I 7.2, svc-gateway(5) sqlite)', async () => {
    const t = remit(['billing.*'], ['sql:table:customers']);
    for (const name of [{ first: 'Ada' }, ['Ada']]) {
      const res = await gw.call({ remit_token: t, tool: 'billing.by_name', args: { name } });
      expect(res.status, res.text).toBe(422);
      expect(res.body).toMatchObject({ ok: false, error: { code: 'args_invalid', message: 'parameter name must be a string, number, boolean or null', details: { errors: [{ path: '/name' }] } } });
    }
    // Scalars bind; a missing one binds null.
    expect((await gw.call({ remit_token: t, tool: 'billing.by_name', args: { name: 'Ada' } })).body.result).toEqual({ rows: [{ id: 1 }] });
    expect((await gw.call({ remit_token: t, tool: 'billing.by_name', args: {} })).body.result).toEqual({ rows: [] });
  });

  it('a join needs every table it touches in the remit (interface 4.2 rule 3)', async () => {
    const partial = await gw.call({ remit_token: remit(['billing.*'], ['sql:table:invoices']), tool: 'billing.lookup', args: { invoice_id: 10 } });
    expect(partial.status).toBe(403);
    expect(partial.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('sql:table:customers') });
    const ok = await gw.call({ remit_token: remit(['billing.lookup'], ['sql:table:invoices', 'sql:table:customers']), tool: 'billing.lookup', args: { invoice_id: 10 } });
    expect(ok.body).toMatchObject({ ok: true, result: { rows: [{ name: 'Ada', invoice_id: 10, amount: 250 }] }, scopes: ['sql:table:invoices', 'sql:table:customers'], scope: 'sql:table:invoices' });
  });

  it('a view counts as the tables under it', async () => {
    const res = await gw.call({ remit_token: remit(['billing.big'], ['sql:table:*']), tool: 'billing.big', args: { min: 0 } });
    expect(res.body.result.rows).toEqual([{ id: 10, name: 'Ada', amount: 250 }]);
    expect([...res.body.scopes].sort()).toEqual(['sql:table:customers', 'sql:table:invoices']);
  });

  it("a trigger's writes count: a refund needs sql:table:audit too; RETURNING gives the row; :now is the gateway's time", async () => {
    const noAudit = await gw.call({ remit_token: remit(['billing.refund'], ['sql:table:refunds']), tool: 'billing.refund', args: { invoice_id: 10, amount: 25 } });
    expect(noAudit.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('sql:table:audit') });
    const res = await gw.call({ remit_token: remit(['billing.refund'], ['sql:table:refunds', 'sql:table:audit']), tool: 'billing.refund', args: { invoice_id: 10, amount: 25 } });
    expect(res.status).toBe(200);
    expect(res.body.result).toEqual({ id: 1, invoice_id: 10, amount: 25, at: '2026-11-22T10:00:00.000Z' });
    const db = new Database(dbPath, { readonly: true });
    expect(db.prepare('SELECT what, at FROM audit').all()).toEqual([{ what: 'refund 1', at: '2026-11-22T10:00:00.000Z' }]);
    db.close();
  });

  it('a write without RETURNING returns {changes, last_insert_rowid}; a constraint violation is 422 deterministic_failure', async () => {
    const t = remit(['billing.*'], ['sql:table:*']);
    const res = await gw.call({ remit_token: t, tool: 'billing.rename', args: { id: 2, name: 'Robert' } });
    expect(res.body.result).toEqual({ changes: 1, last_insert_rowid: expect.any(Number) });
    const bad = await gw.call({ remit_token: t, tool: 'billing.refund', args: { invoice_id: 10, amount: -5 } });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: 'deterministic_failure', details: { sqlite_code: 'SQLITE_CONSTRAINT_CHECK' } });
    const wrongArgs = await gw.call({ remit_token: t, tool: 'billing.lookup', args: { invoice_id: { nested: true } } });
    expect(wrongArgs.status).toBe(422);
    expect(wrongArgs.body.error.code).toBe('args_invalid');
  });

  it('read tools run on a read-only connection: a read statement that would write is refused by SQLite', async () => {
    // The connector refuses such a read at load; below it, the statement host must still run
    // reads on the read-only connection, whatever their text.
    const host = new StatementHost({
      name: 'ro',
      path: dbPath,
      statements: [{ op: 'sneak', sql: "INSERT INTO audit (what, at) VALUES ('x', 'y')", writes: false, mode: 'run' }],
      busyTimeoutMs: 100,
      maxResultBytes: 1024,
      fileCodes: '^$',
    });
    try {
      const err = await host.run('sneak', {}, new AbortController().signal, () => undefined).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StatementFailureError);
      expect((err as StatementFailureError).failure).toMatchObject({ kind: 'sqlite', code: 'SQLITE_READONLY' });
    } finally {
      await host.close();
    }
  });

  it('a database file deleted under the connector: an upstream error (not a stored failure); once restored, the new file is used', async () => {
    const base = tempDir('svc-sqlite-moved-');
    const file = join(base, 'x.db');
    const make = (v: string) => {
      const db = new Database(file);
      db.exec(`CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('${v}')`);
      db.close();
    };
    make('old');
    const c = new SqliteConnector({ type: 'sqlite', name: 'moved', path: file, probe: null, timeout_ms: 5000, tools: { put: { statement: 'INSERT INTO t (v) VALUES (:v)', writes: true }, all: { statement: 'SELECT v FROM t ORDER BY rowid' } } });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'old' }] }); // the statement process has the file open
      rmSync(file); // an operator about to restore a copy
      // A read too: the connections still have the old inode open and would answer from it.
      for (const [op, args] of [['all', {}], ['put', { v: 'x' }]] as const) {
        const err = await c.call(op, args, ctx).catch((e: unknown) => e);
        expect(err, op).toBeInstanceOf(UpstreamError);
        expect((err as UpstreamError).details, op).toMatchObject({ sqlite_code: 'SQLITE_CANTOPEN' });
      }
      make('new');
      // The retry opens the file that is there now.
      expect(await c.call('put', { v: 'x' }, ctx)).toEqual({ changes: 1, last_insert_rowid: 2 });
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'new' }, { v: 'x' }] });
      // A copy restored over it (a rename, as a backup tool does): the next read sees the copy,
      // with no write needed to notice.
      const copy = join(base, 'copy.db');
      const db = new Database(copy);
      db.exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('restored')");
      db.close();
      renameSync(copy, file);
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'restored' }] });
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a WAL-mode database restored by a rename: the old log is emptied first, so the restore is read and kept whole (svc-gateway(5))', async () => {
    const base = tempDir('svc-sqlite-wal-');
    const file = join(base, 'x.db');
    const db = new Database(file);
    db.pragma('journal_mode = wal');
    db.exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('old')");
    db.close();
    const c = new SqliteConnector({ type: 'sqlite', name: 'wal', path: file, probe: null, timeout_ms: 5000, tools: { put: { statement: 'INSERT INTO t (v) VALUES (:v)', writes: true }, all: { statement: 'SELECT v FROM t ORDER BY rowid' } } });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    const restore = (v: string) => {
      const copy = join(base, 'copy.db');
      const r = new Database(copy);
      r.pragma('journal_mode = wal');
      r.exec(`CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('${v}')`);
      r.close();
      renameSync(copy, file);
    };
    try {
      await c.call('put', { v: 'in-the-log' }, ctx); // a frame in x.db-wal, not yet in x.db
      restore('restored');
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'restored' }] });
      // Another connection holding the old file's log: refused until it lets go, never replayed.
      await c.call('put', { v: 'second' }, ctx);
      const holder = new Database(file);
      holder.exec('BEGIN');
      holder.prepare('SELECT * FROM t').all();
      restore('restored-again');
      const err = await c.call('all', {}, ctx).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UpstreamError);
      expect((err as UpstreamError).message).toContain('holds its write-ahead log');
      holder.exec('COMMIT');
      holder.close();
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'restored-again' }] });
    } finally {
      await c.close();
    }
    const after = new Database(file, { readonly: true });
    expect(after.prepare('SELECT v FROM t ORDER BY rowid').all()).toEqual([{ v: 'restored-again' }]);
    after.close();
    rmSync(base, { recursive: true, force: true });
  });

  it('a path whose directory became a file (stat says ENOTDIR): an upstream error, the statement process lives on', async () => {
    const base = tempDir('svc-sqlite-notdir-');
    mkdirSync(join(base, 'dir'));
    const file = join(base, 'dir', 'x.db');
    const db = new Database(file);
    db.exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('a')");
    db.close();
    const c = new SqliteConnector({ type: 'sqlite', name: 'notdir', path: file, probe: null, timeout_ms: 5000, tools: { all: { statement: 'SELECT v FROM t' } } });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(await c.call('all', {}, ctx)).toEqual({ rows: [{ v: 'a' }] });
      renameSync(join(base, 'dir'), join(base, 'moved'));
      writeFileSync(join(base, 'dir'), 'not a directory');
      for (let i = 0; i < 2; i++) {
        const err = await c.call('all', {}, ctx).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(UpstreamError);
        expect((err as UpstreamError).message).toContain('cannot open');
        expect((err as UpstreamError).message).not.toContain('statement process ended');
      }
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('column values leave as JSON can carry them: an integer past 2^53 as its decimal string, a BLOB as base64 (docs/design.md "sqlite")', async () => {
    const base = tempDir('svc-sqlite-values-');
    const file = join(base, 'v.db');
    const db = new Database(file);
    db.exec("CREATE TABLE ids (id INTEGER PRIMARY KEY, n INTEGER, b BLOB, r REAL, t TEXT); INSERT INTO ids VALUES (9007199254740993, -9223372036854775808, x'00ff10', 1.5, 'x'), (7, 9007199254740991, NULL, NULL, NULL)");
    db.close();
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'values',
      path: file,
      probe: null,
      timeout_ms: 5000,
      tools: {
        all: { statement: 'SELECT id, n, b, r, t FROM ids ORDER BY n' },
        add: { statement: 'INSERT INTO ids (id, n) VALUES (:id, 1) RETURNING id, n', writes: true },
        put: { statement: 'INSERT INTO ids (id, n) VALUES (:id, 2)', writes: true },
      },
    });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(await c.call('all', {}, ctx)).toEqual({
        rows: [
          { id: '9007199254740993', n: '-9223372036854775808', b: 'AP8Q', r: 1.5, t: 'x' },
          { id: 7, n: 9007199254740991, b: null, r: null, t: null },
        ],
      });
      expect(await c.call('add', { id: 8 }, ctx)).toEqual({ id: 8, n: 1 });
      expect(await c.call('put', { id: 9 }, ctx)).toEqual({ changes: 1, last_insert_rowid: 9 });
      // A rowid past 2^53 is assigned after the largest one: it leaves as a string too.
      expect(await c.call('add', { id: null }, ctx)).toEqual({ id: '9007199254740994', n: 1 });
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a JSON integer argument binds as an SQLite INTEGER, not a REAL: 2 into a TEXT column is "2", and matches it (svc-gateway(5) sqlite)', async () => {
    // A compensation refers to a write's output ({{steps.create.output.id}} renders the number 2):
    // bound as a REAL it was stored as '2.0' in a TEXT column, and a WHERE against '2' matched nothing.
    const base = tempDir('svc-sqlite-ints-');
    const file = join(base, 'i.db');
    const db = new Database(file);
    db.exec("CREATE TABLE refs (ref TEXT, anyv, r REAL); INSERT INTO refs VALUES ('2', NULL, NULL)");
    db.close();
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'ints',
      path: file,
      probe: null,
      timeout_ms: 5000,
      tools: {
        add: { statement: 'INSERT INTO refs (ref, anyv, r) VALUES (:ref, :anyv, :r) RETURNING ref, typeof(anyv) AS anyt, r, typeof(r) AS rt', writes: true },
        find: { statement: 'SELECT count(*) AS n FROM refs WHERE ref = :ref' },
      },
    });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(await c.call('add', { ref: 3, anyv: 4, r: 5 }, ctx)).toEqual({ ref: '3', anyt: 'integer', r: 5, rt: 'real' });
      expect(await c.call('add', { ref: 1.5, anyv: true, r: 0.25 }, ctx)).toEqual({ ref: '1.5', anyt: 'integer', r: 0.25, rt: 'real' });
      expect(await c.call('find', { ref: 2 }, ctx)).toEqual({ rows: [{ n: 1 }] });
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a read whose result is larger than 5 MiB is a deterministic failure, stopped at the row that crosses it', async () => {
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'big',
      path: dbPath,
      probe: null,
      timeout_ms: 10_000,
      tools: { rows: { statement: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n) SELECT x, printf('%.100c', 'y') AS pad FROM c" } },
    });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(((await c.call('rows', { n: 1000 }, ctx)) as { rows: unknown[] }).rows).toHaveLength(1000);
      await expect(c.call('rows', { n: 1e9 }, ctx)).rejects.toThrow(/larger than 5242880 bytes/);
    } finally {
      await c.close();
    }
  });

  it('a schema changed under the connector: a view redefined to other tables is refused before it runs, other tools run on (D §9 tables found at load)', async () => {
    const base = tempDir('svc-sqlite-schema-');
    const file = join(base, 's.db');
    const db = new Database(file);
    db.exec("CREATE TABLE pub (v TEXT); CREATE TABLE secrets (v TEXT); INSERT INTO pub VALUES ('hello'); INSERT INTO secrets VALUES ('TOPSECRETROW'); CREATE VIEW v_pub AS SELECT v FROM pub");
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'sch',
      path: file,
      probe: null,
      timeout_ms: 5000,
      tools: { pubview: { statement: 'SELECT v FROM v_pub' }, count: { statement: 'SELECT count(*) AS n FROM pub' } },
    });
    await c.start();
    const probe = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    const granted = async (op: string) => ({ ...probe, derivedScopes: await c.deriveScopes(op) });
    try {
      expect(await c.deriveScopes('pubview')).toEqual(['sql:table:pub']);
      const ctx = await granted('pubview');
      expect(await c.call('pubview', {}, ctx)).toEqual({ rows: [{ v: 'hello' }] });
      // A migration redefines the view over another table: the scope granted (pub) no longer
      // describes it. Calls checked for pub, sent together (the later ones queued behind the
      // first, which finds the tables again), are all refused before they run.
      db.exec('DROP VIEW v_pub; CREATE VIEW v_pub AS SELECT v FROM secrets');
      const answers = await Promise.all(Array.from({ length: 4 }, () => c.call('pubview', {}, ctx).then((v) => v, (e: unknown) => e)));
      for (const err of answers) {
        expect(err).toBeInstanceOf(NotAttempted);
        expect(String(err)).toMatch(/the schema of .* changed: pubview now touches tables \[secrets\], not the \[pub\] its scopes were granted for; the call was not run/);
      }
      expect(JSON.stringify(answers.map(String))).not.toContain('TOPSECRETROW');
      expect(await c.deriveScopes('pubview')).toEqual(['sql:table:secrets']); // what a retry is checked against
      // A canary's probe (no remit, no derived scopes) runs on the tables as found now.
      db.exec('DROP VIEW v_pub; CREATE VIEW v_pub AS SELECT v FROM pub');
      expect(await c.call('pubview', {}, probe)).toEqual({ rows: [{ v: 'hello' }] });
      // An unrelated change: the first call to meet it runs, its tables being the same.
      const counting = await granted('count');
      db.exec('CREATE TABLE other (x INTEGER)');
      expect(await c.call('count', {}, counting)).toEqual({ rows: [{ n: 1 }] });
      // A statement that no longer prepares is refused at its scope, saying why.
      db.exec('DROP VIEW v_pub');
      await expect(c.call('count', {}, counting)).resolves.toEqual({ rows: [{ n: 1 }] });
      await expect(c.deriveScopes('pubview')).rejects.toThrow(/statement pubview no longer prepares/);
      // The schema fixed: the tool serves again, no restart needed (looked at once a second).
      db.exec('CREATE VIEW v_pub AS SELECT v FROM pub');
      await new Promise((r) => setTimeout(r, 1000));
      expect(await c.deriveScopes('pubview')).toEqual(['sql:table:pub']);
      expect(await c.call('pubview', {}, await granted('pubview'))).toEqual({ rows: [{ v: 'hello' }] });
    } finally {
      db.close();
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a statement that stopped preparing: refusals name SQLite\'s reason, and a canary probe (no derived scopes) passes again once the schema is fixed (svc-gateway(5) CANARIES, D §9)', async () => {
    const base = tempDir('svc-sqlite-broken-');
    const file = join(base, 'b.db');
    const db = new Database(file);
    db.exec("CREATE TABLE customers (id TEXT, email TEXT); INSERT INTO customers VALUES ('c1', 'a@example.com')");
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'crm',
      path: file,
      probe: { tool: 'lookup', args: {} },
      timeout_ms: 5000,
      tools: { lookup: { statement: 'SELECT c.id, c.email FROM customers c' } },
    });
    await c.start();
    const probe = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      const granted = { ...probe, derivedScopes: await c.deriveScopes('lookup') };
      // A migration renames the column the statement reads.
      db.exec('ALTER TABLE customers RENAME COLUMN email TO email_address');
      const calls = [c.call('lookup', {}, granted), c.call('lookup', {}, probe)];
      for (const err of await Promise.all(calls.map((p) => p.then((v) => v, (e: unknown) => e)))) {
        expect(err).toBeInstanceOf(NotAttempted);
        // Says what broke and what to do, not a scope-drift sentence about "[]".
        expect(String(err)).toMatch(/statement lookup no longer prepares on .*\(its schema changed: no such column: c\.email\); fix the schema/);
        expect(String(err)).not.toContain('its scopes were granted for');
      }
      await expect(c.deriveScopes('lookup')).rejects.toThrow(/no such column: c\.email/);
      // The operator renames it back: the probe (which never derives scopes) looks again and passes.
      db.exec('ALTER TABLE customers RENAME COLUMN email_address TO email');
      await new Promise((r) => setTimeout(r, 1100));
      expect(await c.call('lookup', {}, probe)).toEqual({ rows: [{ id: 'c1', email: 'a@example.com' }] });
      expect(await c.deriveScopes('lookup')).toEqual(['sql:table:customers']);
    } finally {
      db.close();
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a PRAGMA tool runs as it stands, outside the transaction other statements get (journal_mode cannot change inside one)', async () => {
    const base = tempDir('svc-sqlite-pragma-');
    const file = join(base, 'p.db');
    new Database(file).exec('CREATE TABLE t (v TEXT)');
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'prag',
      path: file,
      probe: null,
      timeout_ms: 5000,
      tools: { wal: { writes: true, statement: 'PRAGMA journal_mode = WAL' }, version: { statement: 'PRAGMA user_version' } },
    });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(await c.deriveScopes('wal')).toEqual(['sql:table:sqlite_schema']);
      expect(await c.call('wal', {}, { ...ctx, derivedScopes: ['sql:table:sqlite_schema'] })).toEqual({ journal_mode: 'wal' });
      expect(await c.call('version', {}, { ...ctx, derivedScopes: ['sql:table:sqlite_schema'] })).toEqual({ rows: [{ user_version: 0 }] });
      const db = new Database(file, { readonly: true });
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      db.close();
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it("a write's RETURNING rows are bounded the same: the write is made, its answer a deterministic failure saying so", async () => {
    const base = tempDir('svc-sqlite-returning-');
    const file = join(base, 'r.db');
    const db = new Database(file);
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000) INSERT INTO t SELECT x, printf('%.100c', 'y') FROM c");
    db.close();
    const c = new SqliteConnector({
      type: 'sqlite',
      name: 'ret',
      path: file,
      probe: null,
      timeout_ms: 10_000,
      tools: {
        touch: { writes: true, statement: "UPDATE t SET pad = 'z' || substr(pad, 2) WHERE id <= :n RETURNING id, pad" },
        count: { statement: "SELECT count(*) AS n FROM t WHERE pad LIKE 'z%'" },
      },
    });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      expect(((await c.call('touch', { n: 10 }, ctx)) as { rows: unknown[] }).rows).toHaveLength(10);
      const err = await c.call('touch', { n: 60000 }, ctx).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(DeterministicFailure);
      expect(String(err)).toMatch(/the write was made, but its RETURNING rows are larger than 5242880 bytes/);
      expect(await c.call('count', {}, ctx)).toEqual({ rows: [{ n: 60000 }] });
    } finally {
      await c.close();
      rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('http connector (decisions §9: allowed_hosts, redirects, timeouts)', () => {
  const t = () => remit(['web.*'], ['http:host:127.0.0.1']);

  it('get returns status, headers, body and json; the scope is http:host:<hostname>', async () => {
    const res = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/json`, query: { q: 'x y' } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, scope: 'http:host:127.0.0.1', result: { status: 200, json: { hello: 'world', q: 'x y' }, headers: { 'content-type': 'application/json' } } });
    expect(JSON.parse(res.body.result.body)).toEqual({ hello: 'world', q: 'x y' });
  });

  it('post sends json and adds the configured credential header, which never comes back unredacted', async () => {
    const res = await gw.call({ remit_token: t(), tool: 'web.post', args: { url: `http://127.0.0.1:${port}/echo`, json: { a: 1 }, headers: { host: 'evil.example' } } });
    expect(res.body.result.json).toMatchObject({ method: 'POST', body: '{"a":1}', headers: { 'x-api-key': '[REDACTED]', 'content-type': 'application/json', host: `127.0.0.1:${port}` } });
    expect(res.text).not.toContain('crm-key-0123456789');
  });

  it("the caller's accept-encoding is not sent: an echoing upstream cannot hand the credential back in a coding fetch does not decode", async () => {
    const res = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/echo`, headers: { 'Accept-Encoding': 'zstd', accept: 'application/json' } } });
    expect(res.status, res.text).toBe(200);
    const sent = res.body.result.json.headers;
    expect(sent['accept-encoding']).not.toContain('zstd');
    expect(sent.accept).toBe('application/json');
    expect(sent['x-api-key']).toBe('[REDACTED]');
  });

  it('a host off allowed_hosts is refused scope_not_granted before any request', async () => {
    const before = hits.length;
    const res = await gw.call({ remit_token: remit(['web.*'], ['http:host:*']), tool: 'web.get', args: { url: `http://localhost:${port}/json` } });
    expect(res.status).toBe(403);
    expect(res.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('allowed_hosts') });
    expect(hits.length).toBe(before);
  });

  it('follows a redirect on the list, and does not follow one to a host off the list', async () => {
    const on = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/redirect-on` } });
    expect(on.body.result).toMatchObject({ status: 200, json: { q: 'followed' } });
    const before = hits.filter((h) => h.includes('escaped')).length;
    const off = await gw.call({ remit_token: remit(['web.*'], ['http:host:*']), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/redirect-off` } });
    expect(off.status).toBe(200);
    expect(off.body.result).toMatchObject({ status: 302, headers: { location: `http://localhost:${port}/json?q=escaped` } });
    expect(hits.filter((h) => h.includes('escaped')).length).toBe(before);
    // A Location carrying credentials is not followed either (the caller may not send any).
    const creds = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/redirect-creds` } });
    expect(creds.status).toBe(200);
    expect(creds.body.result).toMatchObject({ status: 302 });
    expect(hits.some((h) => h.includes('with-creds'))).toBe(false);
  });

  it('a redirect to another granted host adds its scope to the response and the tool.called event (I 4.2 rule 3)', async () => {
    const both = remit(['web2.*'], ['http:host:127.0.0.1', 'http:host:localhost']);
    const run = 'run_REDIRECT_SCOPES';
    const res = await gw.call({ remit_token: both, run_id: run, tool: 'web2.get', args: { url: `http://127.0.0.1:${port}/redirect-off` } });
    expect(res.body).toMatchObject({ ok: true, scope: 'http:host:127.0.0.1', scopes: ['http:host:127.0.0.1', 'http:host:localhost'], result: { status: 200, json: { q: 'escaped' } } });
    const [called] = gw.link.events.filter((e) => e.runId === run && e.kind === 'tool.called');
    expect(called!.payload.scopes).toEqual(['http:host:127.0.0.1', 'http:host:localhost']);
    // Not granted: not followed, and not reported as touched.
    const one = await gw.call({ remit_token: remit(['web2.*'], ['http:host:127.0.0.1']), tool: 'web2.get', args: { url: `http://127.0.0.1:${port}/redirect-off` } });
    expect(one.body).toMatchObject({ scopes: ['http:host:127.0.0.1'], result: { status: 302 } });
  });

  it("a replay needs every scope its stored answer entered, not only those its arguments derive (I 4.2 rule 3, 5.3 step 6)", async () => {
    const args = { url: `http://127.0.0.1:${port}/redirect-off` };
    const both = remit(['web2.*'], ['http:host:127.0.0.1', 'http:host:localhost']);
    const first = await gw.call({ remit_token: both, tool: 'web2.get', args, idempotency_key: 'redirected-1' });
    expect(first.body).toMatchObject({ ok: true, scopes: ['http:host:127.0.0.1', 'http:host:localhost'], result: { json: { q: 'escaped' } } });
    // A remit granting only the first host gets the refusal, not localhost's answer.
    const narrow = await gw.call({ remit_token: remit(['web2.*'], ['http:host:127.0.0.1']), tool: 'web2.get', args, idempotency_key: 'redirected-1' });
    expect(narrow.status).toBe(403);
    expect(narrow.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('http:host:localhost') });
    expect(JSON.stringify(narrow.body)).not.toContain('escaped');
    // So does a request scope that leaves the redirect's host out; the first remit still replays.
    const scoped = await gw.call({ remit_token: both, tool: 'web2.get', args, idempotency_key: 'redirected-1', scope: 'http:host:127.0.0.1' });
    expect(scoped.status).toBe(403);
    const again = await gw.call({ remit_token: both, tool: 'web2.get', args, idempotency_key: 'redirected-1' });
    expect(again.body).toMatchObject({ ok: true, replayed: true, result: { json: { q: 'escaped' } } });
  });

  it('a 5xx is a 502 upstream_error, a 4xx is a result, a timeout is a 502', async () => {
    const boom = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/boom` } });
    expect(boom.status).toBe(502);
    expect(boom.body.error).toMatchObject({ code: 'upstream_error', details: { status: 500 } });
    const missing = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/missing` } });
    expect(missing.body.result).toMatchObject({ status: 404, body: 'no such thing', json: null });
    const slow = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/slow` } });
    expect(slow.status).toBe(502);
    expect(slow.body.error.message).toMatch(/timed out after 400 ms/);
    // It names the knob an operator turns (svc-gateway(5) CONFIGURATION timeout_ms).
    expect(slow.body.error.message).toBe('web.get timed out after 400 ms (timeout_ms of connector web)');
  });

  it('post is a write: refused under observe; bad URLs are args_invalid', async () => {
    const res = await gw.call({ remit_token: remit(['web.*'], ['http:host:127.0.0.1'], 'observe'), tool: 'web.post', args: { url: `http://127.0.0.1:${port}/echo` } });
    expect(res.body.refusal.reason).toBe('autonomy_too_low');
    const bad = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: 'file:///etc/passwd' } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('args_invalid');
    const both = await gw.call({ remit_token: t(), tool: 'web.post', args: { url: `http://127.0.0.1:${port}/echo`, json: {}, body: 'x' } });
    expect(both.body.error.code).toBe('args_invalid');
    // A port fetch refuses is the caller's argument: 422 before the key is claimed, six times
    // without opening the circuit, and the key still free for a good call.
    for (let i = 0; i < 6; i++) {
      const badPort = await gw.call({ remit_token: t(), tool: 'web.post', args: { url: 'http://127.0.0.1:6000/x', json: {} }, idempotency_key: 'bad-port' });
      expect(badPort.status).toBe(422);
      expect(badPort.body.error).toMatchObject({ code: 'args_invalid', message: expect.stringContaining('port 6000 is one that fetch refuses') });
    }
    const good = await gw.call({ remit_token: t(), tool: 'web.post', args: { url: `http://127.0.0.1:${port}/echo`, json: {} }, idempotency_key: 'bad-port' });
    expect(good.status).toBe(200);
  });

  it('a url that carries credentials is args_invalid before any request, the password never echoed (svc-gateway(5) http)', async () => {
    const before = hits.length;
    for (const tool of ['web.get', 'web.post']) {
      const res = await gw.call({ remit_token: t(), tool, args: { url: `http://ana:pw-s3cret-99@127.0.0.1:${port}/echo` }, idempotency_key: `creds-${tool}` });
      expect(res.status, res.text).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'args_invalid', message: 'url must not carry credentials', details: { errors: [{ path: '/url' }] } });
      expect(res.text).not.toContain('pw-s3cret-99');
    }
    expect(hits.length).toBe(before);
    // A user name alone is credentials too.
    const user = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://ana@127.0.0.1:${port}/json` } });
    expect(user.body.error?.code).toBe('args_invalid');
    expect(hits.length).toBe(before);
  });

  it('an answer nested too deep to pass on is a stored deterministic failure, never a 500 or a key stuck in flight (D §10)', async () => {
    const args = { url: `http://127.0.0.1:${port}/deep`, body: 'x' };
    const first = await gw.call({ remit_token: t(), tool: 'web.post', args, idempotency_key: 'deep-1' });
    expect(first.status).toBe(422);
    expect(first.body.error).toMatchObject({ code: 'deterministic_failure', message: expect.stringContaining('nested deeper than 256 levels') });
    const again = await gw.call({ remit_token: t(), tool: 'web.post', args, idempotency_key: 'deep-1' });
    expect(again.status).toBe(422);
    expect(again.body).toMatchObject({ replayed: true, error: { code: 'deterministic_failure' } });
  });

  it('a POST given up after it may have reached the upstream is unknown: a repeat of its key is 409, never a second POST (D §9)', async () => {
    const t = () => remit(['webw.*'], ['http:host:127.0.0.1']);
    // Its own connector, and a success between the groups: five failures in a row open a circuit.
    const reset = async () => expect((await gw.call({ remit_token: t(), tool: 'webw.get', args: { url: `http://127.0.0.1:${port}/json` } })).status).toBe(200);
    for (const path of ['/slow', '/slow-body']) {
      const args = { url: `http://127.0.0.1:${port}${path}`, body: 'pay 5' };
      const before = hits.filter((h) => h === path).length;
      const first = await gw.call({ remit_token: t(), tool: 'webw.post', args, idempotency_key: `slow-post${path}` });
      expect(first.status, path).toBe(502);
      expect(first.body.error).toMatchObject({ code: 'upstream_error', details: { outcome: 'unknown' } });
      const again = await gw.call({ remit_token: t(), tool: 'webw.post', args, idempotency_key: `slow-post${path}` });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('idempotency_outcome_unknown');
      expect(hits.filter((h) => h === path).length - before).toBe(1);
    }
    await reset();
    // A GET given up the same way changed nothing: its key lets a retry run.
    const get = () => gw.call({ remit_token: t(), tool: 'webw.get', args: { url: `http://127.0.0.1:${port}/slow` }, idempotency_key: 'slow-get' });
    expect((await get()).status).toBe(502);
    expect((await get()).status).toBe(502);
    await reset();
    // A POST the upstream answered with a 5xx, or to a port nobody listens on, did not act: retried.
    const boom = () => gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `http://127.0.0.1:${port}/boom`, body: 'x' }, idempotency_key: 'boom-post' });
    expect((await boom()).body.error.details.outcome).toBeUndefined();
    const before = hits.filter((h) => h === '/boom').length;
    expect((await boom()).status).toBe(502);
    expect(hits.filter((h) => h === '/boom').length).toBe(before + 1);
    await reset();
    // A 5xx is the upstream saying it failed, however large its body.
    const big = await gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `http://127.0.0.1:${port}/boom-big`, body: 'x' }, idempotency_key: 'boom-big' });
    expect(big.status).toBe(502);
    expect(big.body.error.details).toEqual({ status: 503 });
    expect((await gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `http://127.0.0.1:${port}/boom-big`, body: 'x' }, idempotency_key: 'boom-big' })).status).toBe(502);
    await reset();
    // Answered with a redirect, the POST may have acted: a failure after it is unknown.
    const seeOther = () => gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `http://127.0.0.1:${port}/pay-then-see-other`, body: 'x' }, idempotency_key: 'see-other' });
    const so = await seeOther();
    expect(so.status).toBe(502);
    expect(so.body.error.details).toMatchObject({ status: 500, outcome: 'unknown' });
    expect((await seeOther()).body.error.code).toBe('idempotency_outcome_unknown');
    await reset();
    // A TLS handshake that fails (https to a plain HTTP port) sent nothing: released.
    const tls = () => gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `https://127.0.0.1:${port}/json`, body: 'x' }, idempotency_key: 'tls-post' });
    const t1 = await tls();
    expect(t1.status).toBe(502);
    expect(t1.body.error.details.outcome, JSON.stringify(t1.body)).toBeUndefined();
    expect((await tls()).body.error.code).toBe('upstream_error');
    await reset();
    const closed = new URL(await closedPortUrl());
    const refused = () => gw.call({ remit_token: t(), tool: 'webw.post', args: { url: `http://127.0.0.1:${closed.port}/x`, body: 'x' }, idempotency_key: 'refused-post' });
    const r1 = await refused();
    expect(r1.status).toBe(502);
    expect(r1.body.error.details.outcome).toBeUndefined();
    expect((await refused()).body.error.code).toBe('upstream_error'); // run again, not 409
  });

  it('a body over max_body_bytes is a deterministic failure: the upstream answered, so no circuit opens, and a POST key keeps it (D §9)', async () => {
    const t = () => remit(['webw.*'], ['http:host:127.0.0.1']);
    const url = `http://127.0.0.1:${port}/big-ok`;
    for (let i = 0; i < 6; i++) {
      const res = await gw.call({ remit_token: t(), tool: 'webw.get', args: { url } });
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'deterministic_failure', message: 'response body is larger than 1024 bytes (max_body_bytes)', details: { status: 200, max_body_bytes: 1024 } });
    }
    // Six in a row: the circuit stays closed for a small answer of the same connector.
    expect((await gw.call({ remit_token: t(), tool: 'webw.get', args: { url: `http://127.0.0.1:${port}/json` } })).status).toBe(200);
    // The POST acted and answered: its key holds the failure, and a repeat never posts again.
    const before = hits.filter((h) => h === '/big-ok').length;
    const post = () => gw.call({ remit_token: t(), tool: 'webw.post', args: { url, body: 'pay 5' }, idempotency_key: 'big-ok-post' });
    expect((await post()).body).toMatchObject({ ok: false, error: { code: 'deterministic_failure' } });
    expect((await post()).body).toMatchObject({ replayed: true, error: { code: 'deterministic_failure' } });
    expect(hits.filter((h) => h === '/big-ok').length).toBe(before + 1);
  });

  it('a header fetch would refuse is args_invalid before any request, and never opens the circuit (I 7.2, D §9)', async () => {
    const before = hits.length;
    // Also what Headers lets through and the send refuses (a control character) or throws on (over U+00FF).
    for (const headers of [{ 'bad header': 'x' }, { 'x-ok': 'line\r\nInjected: 1' }, { 'x/y': 'z' }, { 'x-nul': 'a\u0000b' }, { 'x-ctl': 'a\u0001b' }, { 'x-del': 'a\u007fb' }, { 'x-emoji': '\u{1F600}' }]) {
      for (let i = 0; i < 6; i++) {
        const res = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/json`, headers } });
        expect(res.status).toBe(422);
        expect(res.body.error.code).toBe('args_invalid');
        expect(res.body.error.details.errors[0].path).toBe(`/headers/${Object.keys(headers)[0]!.replace('/', '~1')}`);
      }
    }
    expect(hits.length).toBe(before);
    // A valid header undici will not send (Expect) is the caller's argument too, not an upstream error.
    for (let i = 0; i < 6; i++) {
      const res = await gw.call({ remit_token: t(), tool: 'web.post', args: { url: `http://127.0.0.1:${port}/json`, body: 'x', headers: { Expect: '100-continue' } } });
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'args_invalid', message: expect.stringContaining('expect header not supported') });
    }
    const fine = await gw.call({ remit_token: t(), tool: 'web.get', args: { url: `http://127.0.0.1:${port}/json`, headers: { 'x-fine': 'yes' } } });
    expect(fine.status).toBe(200);
    expect(fine.body.circuit).toBeUndefined();
  });
});

describe('fs connector (decisions §9: real paths, symlinks that escape the root)', () => {
  const realRoot = () => realpathSync(root);
  const all = () => remit(['files.*'], ['fs:path:*']);

  it('read, list and write under the root with fs:path:<real directory> scopes', async () => {
    const r = await gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'a.txt' } });
    expect(r.body).toMatchObject({ ok: true, result: { path: 'a.txt', content: 'alpha', size: 5 }, scope: `fs:path:${realRoot()}` });
    const l = await gw.call({ remit_token: all(), tool: 'files.list', args: { path: 'sub' } });
    expect(l.body).toMatchObject({ result: { path: 'sub', entries: [{ name: 'b.txt', type: 'file' }] }, scope: `fs:path:${realRoot()}/sub` });
    const w = await gw.call({ remit_token: all(), tool: 'files.write', args: { path: 'new/deep/c.txt', content: 'gamma' } });
    expect(w.body).toMatchObject({ result: { path: 'new/deep/c.txt', bytes: 5 }, scope: `fs:path:${realRoot()}/new/deep` });
    expect(readFileSync(join(root, 'new/deep/c.txt'), 'utf8')).toBe('gamma');
  });

  it("a list of a file or of a missing directory, and a write onto a directory, are 422 deterministic_failure with the errno; the write leaves no temporary file (I 7.2, svc-gateway(5) fs)", async () => {
    for (const [tool, args, message, errno] of [
      ['files.list', { path: 'a.txt' }, 'cannot list a.txt: ENOTDIR', 'ENOTDIR'],
      ['files.list', { path: 'no-such/dir' }, 'cannot list no-such/dir: ENOENT', 'ENOENT'],
      ['files.write', { path: 'sub', content: 'x' }, 'cannot write sub: EISDIR', 'EISDIR'],
    ] as const) {
      const res = await gw.call({ remit_token: all(), tool, args });
      expect(res.status, tool).toBe(422);
      expect(res.body.error).toEqual({ code: 'deterministic_failure', message, details: { errno } });
    }
    expect(readdirSync(root).filter((n) => n.startsWith('.svc-write-'))).toEqual([]);
    expect(readdirSync(join(root, 'sub'))).toEqual(['b.txt']);
  });

  it('a symlink inside the root is resolved: the scope is the real directory', async () => {
    const r = await gw.call({ remit_token: remit(['files.read'], [`fs:path:${realRoot()}/sub`]), tool: 'files.read', args: { path: 'inner/b.txt' } });
    expect(r.body).toMatchObject({ ok: true, result: { content: 'beta' }, scope: `fs:path:${realRoot()}/sub` });
  });

  it('the root itself is no file to read or write: args_invalid, and nothing is created beside it', async () => {
    for (const tool of ['files.read', 'files.write']) {
      const res = await gw.call({ remit_token: all(), tool, args: tool === 'files.write' ? { path: '.', content: 'x' } : { path: '.' } });
      expect(res.status, tool).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'args_invalid', message: expect.stringContaining('names the root') });
    }
  });

  it('a path ending in a slash names a directory: read and write refuse it args_invalid, and write makes no file', async () => {
    for (const path of ['made-by-slash/', 'made-by-slash/.']) {
      const res = await gw.call({ remit_token: all(), tool: 'files.write', args: { path, content: 'x' } });
      expect(res.status, path).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'args_invalid', message: expect.stringContaining('ends in a slash') });
    }
    expect(existsSync(join(root, 'made-by-slash'))).toBe(false);
    const read = await gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'a.txt/' } });
    expect(read.status).toBe(422);
    expect(read.body.error.code).toBe('args_invalid');
  });

  it('writes a file whose name takes all 255 bytes a name may have, and leaves no temporary file beside it', async () => {
    const name = 'n'.repeat(255);
    const res = await gw.call({ remit_token: all(), tool: 'files.write', args: { path: `long/${name}`, content: 'long' } });
    expect(res.status, res.text).toBe(200);
    expect(readFileSync(join(root, 'long', name), 'utf8')).toBe('long');
    expect(readdirSync(join(root, 'long'))).toEqual([name]);
  });

  it('a directory swapped for a symlink between the scope check and the open is refused (TOCTOU), for read and write', async () => {
    const base = tempDir('svc-fs-race-');
    const fsRoot = join(base, 'root');
    const away = join(base, 'away');
    mkdirSync(join(fsRoot, 'pub'), { recursive: true });
    mkdirSync(away, { recursive: true });
    writeFileSync(join(fsRoot, 'pub', 's.txt'), 'public');
    writeFileSync(join(away, 's.txt'), 'TOPSECRET');
    const c = new FsConnector({ name: 'race', type: 'fs', root: fsRoot, max_file_bytes: 1 << 20, tools: {}, probe: null, timeout_ms: 1000 });
    await c.start();
    // The attacker's swap lands exactly after the path was resolved.
    const resolveReal = c.resolveReal.bind(c);
    c.resolveReal = async (p) => {
      const real = await resolveReal(p);
      renameSync(join(fsRoot, 'pub'), join(base, 'pub-moved'));
      symlinkSync(away, join(fsRoot, 'pub'));
      return real;
    };
    const read = c.call('read', { path: 'pub/s.txt' });
    await expect(read).rejects.toBeInstanceOf(ScopeRefusal);
    await expect(read).rejects.toThrow(/changed while it was opened \(a symlink stood in its place\)/);
    rmSync(join(fsRoot, 'pub'));
    renameSync(join(base, 'pub-moved'), join(fsRoot, 'pub'));
    await expect(c.call('write', { path: 'pub/planted.txt', content: 'x' })).rejects.toBeInstanceOf(ScopeRefusal);
    expect(existsSync(join(away, 'planted.txt'))).toBe(false);
    expect(readFileSync(join(away, 's.txt'), 'utf8')).toBe('TOPSECRET');
    rmSync(base, { recursive: true, force: true });
  });

  it('a swap between the scope check and the call: the call lands only in a granted directory, and lists and makes directories only through checked handles', async () => {
    const base = tempDir('svc-fs-race2-');
    mkdirSync(join(base, 'root', 'pub', 'race'), { recursive: true });
    const fsRoot = realpathSync(join(base, 'root'));
    mkdirSync(join(fsRoot, 'priv'), { recursive: true });
    writeFileSync(join(fsRoot, 'pub', 'race', 's.txt'), 'public');
    writeFileSync(join(fsRoot, 'priv', 's.txt'), 'TOPSECRET');
    const c = new FsConnector({ name: 'race', type: 'fs', root: fsRoot, max_file_bytes: 1 << 20, tools: {}, probe: null, timeout_ms: 1000 });
    await c.start();
    const granted = (s: string) => s === `fs:path:${fsRoot}/pub` || s.startsWith(`fs:path:${fsRoot}/pub/`);
    const swap = () => {
      renameSync(join(fsRoot, 'pub', 'race'), join(base, 'race-moved'));
      symlinkSync(join(fsRoot, 'priv'), join(fsRoot, 'pub', 'race'));
    };
    const unswap = () => {
      rmSync(join(fsRoot, 'pub', 'race'));
      renameSync(join(base, 'race-moved'), join(fsRoot, 'pub', 'race'));
    };
    const ctxFor = (derived: string[]) => ({ signal: new AbortController().signal, now: () => Date.now(), derivedScopes: derived, enterScope: granted, outcomeUnknown: () => undefined });
    try {
      // Swapped after the gateway derived and granted the scope, before the call resolves:
      // the call resolves into priv, a directory the remit does not grant.
      for (const [op, args] of [['read', { path: 'pub/race/s.txt' }], ['list', { path: 'pub/race' }], ['write', { path: 'pub/race/w.txt', content: 'x' }]] as const) {
        const derived = await c.deriveScopes(op, args);
        expect(derived.every(granted)).toBe(true);
        swap();
        try {
          const err = await c.call(op, args, ctxFor(derived)).then(() => null, (e: unknown) => e);
          expect(err, op).toBeInstanceOf(ScopeRefusal);
          expect(String(err)).toMatch(/changed while it was checked: it now leads to fs:path:.*\/priv, which is not granted/);
        } finally {
          unswap();
        }
      }
      // Swapped after the call resolved: the listing is of the checked handle, or refused.
      const resolveReal = c.resolveReal.bind(c);
      c.resolveReal = async (p) => {
        const real = await resolveReal(p);
        swap();
        return real;
      };
      try {
        await expect(c.call('list', { path: 'pub/race' }, ctxFor([`fs:path:${fsRoot}/pub/race`]))).rejects.toBeInstanceOf(ScopeRefusal);
      } finally {
        unswap();
      }
      // A write's missing directories are made under a checked handle: none appears in priv.
      await expect(c.call('write', { path: 'pub/race/new/deeper/w.txt', content: 'x' }, ctxFor([`fs:path:${fsRoot}/pub/race/new/deeper`]))).rejects.toBeInstanceOf(ScopeRefusal);
      unswap();
      c.resolveReal = resolveReal;
      expect(readdirSync(join(fsRoot, 'priv'))).toEqual(['s.txt']);
      // Unswapped, the same calls work, making the directories they need.
      expect(await c.call('write', { path: 'pub/race/new/deeper/w.txt', content: 'x' }, ctxFor([`fs:path:${fsRoot}/pub/race/new/deeper`]))).toEqual({ path: 'pub/race/new/deeper/w.txt', bytes: 1 });
      expect(await c.call('list', { path: 'pub/race' }, ctxFor([`fs:path:${fsRoot}/pub/race`]))).toEqual({ path: 'pub/race', entries: [{ name: 'new', type: 'dir' }, { name: 's.txt', type: 'file' }] });
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a path through a file or a FIFO is the caller\'s ENOTDIR (422), not taken for a swap', async () => {
    const base = tempDir('svc-fs-notdir-');
    writeFileSync(join(base, 'file.txt'), 'x');
    execFileSync('mkfifo', [join(base, 'fifo')]);
    const c = new FsConnector({ name: 'nd', type: 'fs', root: base, max_file_bytes: 1 << 20, tools: {}, probe: null, timeout_ms: 1000 });
    await c.start();
    const ctx = { signal: new AbortController().signal, now: () => Date.now(), enterScope: () => true, outcomeUnknown: () => undefined };
    try {
      for (const [op, args] of [['read', { path: 'file.txt/sub/x' }], ['list', { path: 'file.txt/sub' }], ['write', { path: 'file.txt/sub/x', content: 'y' }], ['list', { path: 'fifo' }], ['read', { path: 'fifo/x' }]] as const) {
        const err = await c.call(op, args, { ...ctx, derivedScopes: await c.deriveScopes(op, args) }).then(() => null, (e: unknown) => e);
        expect(err, `${op} ${args.path}`).toBeInstanceOf(DeterministicFailure);
        expect(String(err)).toMatch(/ENOTDIR/);
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a FIFO under the root is refused at once (422, not a regular file), and never ties up the fs thread pool', async () => {
    execFileSync('mkfifo', [join(root, 'pipe')]);
    try {
      // More at once than libuv has pool threads (4): a blocking open would hang them all.
      const reads = await Promise.all(Array.from({ length: 6 }, () => gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'pipe' } })));
      for (const res of reads) {
        expect(res.status).toBe(422);
        expect(res.body.error).toMatchObject({ code: 'deterministic_failure', message: expect.stringContaining('pipe is not a regular file') });
      }
      const after = await gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'a.txt' } });
      expect(after.body).toMatchObject({ ok: true, result: { content: 'alpha' } });
    } finally {
      rmSync(join(root, 'pipe'));
    }
  });

  it('a unix socket under the root is 422 (ENXIO), never an upstream error the breaker counts', async () => {
    const sock = createNetServer();
    await new Promise<void>((r) => sock.listen(join(root, 'sock'), r));
    try {
      for (let i = 0; i < 6; i++) {
        const res = await gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'sock' } });
        expect(res.status).toBe(422);
        expect(res.body.error).toMatchObject({ code: 'deterministic_failure', details: { errno: 'ENXIO' } });
      }
      // Six in a row: a counted failure would have opened the circuit after five.
      expect((await gw.call({ remit_token: all(), tool: 'files.read', args: { path: 'a.txt' } })).status).toBe(200);
    } finally {
      await new Promise((r) => sock.close(r));
    }
  });

  it('read is bounded by max_file_bytes at the byte, also for a file that grows while it is read', async () => {
    const base = tempDir('svc-fs-max-');
    writeFileSync(join(base, 'exact.txt'), 'x'.repeat(64));
    writeFileSync(join(base, 'over.txt'), 'x'.repeat(65));
    writeFileSync(join(base, 'empty.txt'), '');
    const c = new FsConnector({ name: 'small', type: 'fs', root: base, max_file_bytes: 64, tools: {}, probe: null, timeout_ms: 1000 });
    await c.start();
    expect(await c.call('read', { path: 'exact.txt' })).toEqual({ path: 'exact.txt', content: 'x'.repeat(64), size: 64 });
    expect(await c.call('read', { path: 'empty.txt' })).toEqual({ path: 'empty.txt', content: '', size: 0 });
    await expect(c.call('read', { path: 'over.txt' })).rejects.toThrow(/larger than 64 bytes/);
    // A writer truncating and refilling the file past the bound while it is read: every read
    // is whole and within the bound, or refused; never more than the bound.
    writeFileSync(join(base, 'grow.txt'), '');
    const grower = spawn(process.execPath, ['-e', `const fs = require('fs'); const p = ${JSON.stringify(join(base, 'grow.txt'))}; const end = Date.now() + 1500; while (Date.now() < end) { fs.writeFileSync(p, ''); for (let i = 0; i < 20; i++) fs.appendFileSync(p, 'y'.repeat(16)); }`]);
    const done = new Promise<void>((r) => grower.once('exit', () => r()));
    let over = 0;
    let within = 0;
    let running = true;
    void done.then(() => (running = false));
    try {
      // Reads for as long as the writer runs, so some land while the file grows.
      while (running) {
        try {
          const r = (await c.call('read', { path: 'grow.txt' })) as { content: string; size: number };
          expect(r.content.length).toBeLessThanOrEqual(64);
          expect(r.size).toBe(r.content.length);
          within++;
        } catch (err) {
          if (!/larger than 64 bytes/.test(String(err))) throw err;
          over++;
        }
      }
      expect(over).toBeGreaterThan(0);
      expect(within).toBeGreaterThan(0);
    } finally {
      grower.kill();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it(`list refuses a directory of more than ${MAX_LIST_ENTRIES} entries (422) instead of answering megabytes`, async () => {
    const base = tempDir('svc-fs-list-');
    mkdirSync(join(base, 'big'));
    for (let i = 0; i < MAX_LIST_ENTRIES; i++) writeFileSync(join(base, 'big', `f${i}`), '');
    const c = new FsConnector({ name: 'lists', type: 'fs', root: base, max_file_bytes: 64, tools: {}, probe: null, timeout_ms: 5000 });
    await c.start();
    try {
      const ok = (await c.call('list', { path: 'big' })) as { entries: unknown[] };
      expect(ok.entries).toHaveLength(MAX_LIST_ENTRIES);
      writeFileSync(join(base, 'big', 'one-more'), '');
      await expect(c.call('list', { path: 'big' })).rejects.toThrow(new RegExp(`more than ${MAX_LIST_ENTRIES} entries`));
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  }, 30_000);

  it('list counts names that are not UTF-8 (not_utf8) instead of listing replacement characters that name no file', async () => {
    const base = tempDir('svc-fs-names-');
    writeFileSync(join(base, 'fine.txt'), 'a');
    writeFileSync(Buffer.concat([Buffer.from(base + '/bad'), Buffer.from([0xff, 0xfe]), Buffer.from('.txt')]), 'b');
    writeFileSync(join(base, 'héllo.txt'), 'c');
    const c = new FsConnector({ name: 'names', type: 'fs', root: base, max_file_bytes: 64, tools: {}, probe: null, timeout_ms: 5000 });
    await c.start();
    try {
      const listed = (await c.call('list', {})) as { entries: Array<{ name: string }>; not_utf8?: number };
      expect(listed.entries.map((e) => e.name)).toEqual(['fine.txt', 'héllo.txt']);
      expect(listed.not_utf8).toBe(1);
      expect(JSON.stringify(listed)).not.toContain('\ufffd');
      writeFileSync(join(base, 'fine2.txt'), 'd');
      rmSync(Buffer.concat([Buffer.from(base + '/bad'), Buffer.from([0xff, 0xfe]), Buffer.from('.txt')]));
      expect(((await c.call('list', {})) as { not_utf8?: number }).not_utf8).toBeUndefined(); // only when there are some
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a name that starts with a byte-order mark is listed as it is, and reads back', async () => {
    const base = tempDir('svc-fs-bom-');
    writeFileSync(join(base, '\ufeffbom.txt'), 'marked');
    const c = new FsConnector({ name: 'bom', type: 'fs', root: base, max_file_bytes: 64, tools: {}, probe: null, timeout_ms: 5000 });
    await c.start();
    try {
      const listed = (await c.call('list', {})) as { entries: Array<{ name: string }> };
      expect(listed.entries.map((e) => e.name)).toEqual(['\ufeffbom.txt']);
      expect(await c.call('read', { path: listed.entries[0]!.name })).toMatchObject({ content: 'marked' });
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a path through a directory whose name is not UTF-8 is 422, and a lone surrogate is args_invalid: neither touches another file', async () => {
    const base = tempDir('svc-fs-bytes-');
    const odd = Buffer.concat([Buffer.from(base + '/d'), Buffer.from([0xff])]);
    mkdirSync(odd);
    writeFileSync(Buffer.concat([odd, Buffer.from('/x.txt')]), 'inside');
    symlinkSync(odd, join(base, 'link'));
    const g = await startGateway({ keys: signer, clock, doc: { connectors: [{ name: 'raw', type: 'fs', root: base }] } });
    const t = remit(['raw.*'], ['fs:path:*']);
    try {
      for (const [tool, args] of [['raw.read', { path: 'link/x.txt' }], ['raw.write', { path: 'link/new.txt', content: 'y' }], ['raw.list', { path: 'link' }]] as const) {
        const res = await g.call({ remit_token: t, tool, args });
        expect(res.status, tool).toBe(422);
        expect(res.body.error).toMatchObject({ code: 'deterministic_failure', message: expect.stringContaining('not UTF-8') });
      }
      // Over HTTP the body is refused first (400); the connector itself refuses it too.
      const lone = await g.call({ remit_token: t, tool: 'raw.write', args: { path: 'x\ud800/y.txt', content: 'z' } });
      expect(lone.status).toBe(400);
      const c = new FsConnector({ name: 'raw2', type: 'fs', root: base, max_file_bytes: 64, tools: {}, probe: null, timeout_ms: 5000 });
      await c.start();
      await expect(c.deriveScopes('write', { path: 'x\ud800/y.txt', content: 'z' })).rejects.toThrow(/lone surrogate/);
      // Nothing was made in place of the names that could not be spelled.
      expect(execFileSync('ls', ['-b', base], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()).toEqual(['d\\377', 'link']);
    } finally {
      await g.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('symlinks and paths that escape the root are refused scope_not_granted, even under fs:path:*', async () => {
    for (const args of [{ path: 'escape/secret.txt' }, { path: 'escape-file' }, { path: '../outside/secret.txt' }, { path: join(outside, 'secret.txt') }]) {
      const res = await gw.call({ remit_token: all(), tool: 'files.read', args });
      expect(res.status).toBe(403);
      expect(res.body.refusal).toMatchObject({ reason: 'scope_not_granted', detail: expect.stringContaining('outside the root') });
      expect(res.text).not.toContain('outside secret');
    }
    const w = await gw.call({ remit_token: all(), tool: 'files.write', args: { path: 'escape/planted.txt', content: 'x' } });
    expect(w.body.refusal.reason).toBe('scope_not_granted');
    expect(existsSync(join(outside, 'planted.txt'))).toBe(false);
  });

  it('a remit scoped to one directory cannot read another; a missing file is 422 deterministic_failure', async () => {
    const sub = remit(['files.*'], [`fs:path:${realRoot()}/sub`]);
    expect((await gw.call({ remit_token: sub, tool: 'files.read', args: { path: 'a.txt' } })).body.refusal.reason).toBe('scope_not_granted');
    const missing = await gw.call({ remit_token: sub, tool: 'files.read', args: { path: 'sub/none.txt' } });
    expect(missing.status).toBe(422);
    expect(missing.body.error).toMatchObject({ code: 'deterministic_failure', details: { errno: 'ENOENT' } });
  });
});
