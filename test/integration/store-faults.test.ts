/**
 * A failing store is a dependency's fault, not a bug (svcd(8) ERRORS: `unavailable` (503) "a
 * dependency is unavailable", `internal` (500) "a bug"; decisions §10): a full disk answers
 * 503 unavailable in the envelope of interface 7.1 and the kernel serves again once space is
 * back, without a restart; a store file this user cannot write is refused at start, not
 * discovered by the first write in service.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { capturedLogger } from '../gateway/helpers.js';
import { SqliteDb } from '../../src/store/sqlite-db.js';
import { ROOT, startTestDaemon, tempDir } from '../helpers/daemon.js';

const REMIT = { tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 600, policy_set: [], requested_by: { id: 'ana', role: 'agent', manager: 'lead' } };

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('store faults (svcd(8) ERRORS, D §10)', () => {
  it('a full store answers 503 unavailable, saying why, health says ok: false meanwhile, and it serves again once there is room', async () => {
    await using d = await startTestDaemon();
    const raw = (d.kernel!.db as SqliteDb).raw;
    expect((await d.kernel_('/remits', { body: REMIT })).status).toBe(201);
    // SQLite's own "disk full": no page may be added to the file.
    const pages = raw.pragma('page_count', { simple: true }) as number;
    raw.pragma(`max_page_count = ${pages}`);
    let full: { status: number; body: any } | undefined;
    for (let i = 0; i < 200 && full === undefined; i++) {
      const r = await d.kernel_('/remits', { body: REMIT });
      if (r.status !== 201) full = r;
    }
    expect(full, 'the store never filled').toBeDefined();
    expect(full!.status).toBe(503);
    expect(full!.body).toEqual({ error: { code: 'unavailable', message: expect.stringContaining('database or disk is full'), details: { cause: 'SQLITE_FULL' } } });
    // Health says so while writes fail (its own read still works), and why.
    const sick = await d.kernel_('/health');
    expect(sick.status).toBe(200);
    expect(sick.body).toMatchObject({ ok: false, runs: { running: 0, parked: 0 }, store: { error: 'SQLITE_FULL', message: expect.stringContaining('disk is full'), since: expect.any(String) } });
    // A transaction that changes nothing commits even on a full disk, and proves nothing.
    await d.kernel!.db.tx(async (t) => void (await t.get('SELECT 1')));
    expect((await d.kernel_('/health')).body.ok).toBe(false);
    raw.pragma('max_page_count = 4294967294');
    const again = await d.kernel_('/remits', { body: REMIT });
    expect(again.status).toBe(201);
    const well = await d.kernel_('/health');
    expect(well.body.ok).toBe(true);
    expect(well.body.store).toBeUndefined();
    expect((await d.kernel_(`/remits/${again.body.remit_id}`)).status).toBe(200);
  });

  it('a fault that fails every write is logged once (with its stack), not once per request', async () => {
    const { logger, text } = capturedLogger();
    await using d = await startTestDaemon({ logger });
    const raw = (d.kernel!.db as SqliteDb).raw;
    raw.pragma(`max_page_count = ${raw.pragma('page_count', { simple: true }) as number}`);
    let failed = 0;
    for (let i = 0; i < 300 && failed < 50; i++) if ((await d.kernel_('/remits', { body: REMIT })).status === 503) failed++;
    expect(failed).toBe(50);
    const lines = text().split('\n').filter((l) => l.includes('"the store failed"')).map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'error', code: 'SQLITE_FULL', err: expect.stringContaining('database or disk is full') });
    raw.pragma('max_page_count = 4294967294');
  });

  // Root writes any file whatever its mode: as root, the check runs as nobody (setpriv).
  const isRoot = process.getuid?.() === 0;
  const canDropToNobody = isRoot && spawnSync('setpriv', ['--version']).status === 0;
  it.skipIf(isRoot && !canDropToNobody)('a store file this user may read but not write: the store refuses to open, naming the file and the likely cause (svcd exits 1)', async () => {
    const dir = tempDir('svc-store-ro-');
    dirs.push(dir);
    chmodSync(dir, 0o755);
    const path = join(dir, 'kernel.db');
    const made = new SqliteDb({ path });
    await made.exec('CREATE TABLE t (x)');
    await made.close();
    const expected = `cannot open the store ${path}: attempt to write a readonly database (can this user read and write the file and the directory it is in?)`;
    if (!isRoot) {
      chmodSync(path, 0o444);
      expect(() => new SqliteDb({ path })).toThrow(expected);
      return;
    }
    // The directory is the svcd user's (so SQLite may make its -wal and -shm), the file another's.
    chownSync(dir, 65534, 65534);
    chmodSync(path, 0o644);
    const script = `import(${JSON.stringify(join(ROOT, 'dist/src/store/sqlite-db.js'))}).then((m) => { try { new m.SqliteDb({ path: ${JSON.stringify(path)} }); console.log('opened'); } catch (e) { console.log(e.message); } })`;
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script], { encoding: 'utf8' });
    expect(r.stdout.trim(), r.stderr).toBe(expected);
  });
});
