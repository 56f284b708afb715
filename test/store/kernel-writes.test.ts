/**
 * What the kernel writes per change, kept small (bench/README.md, docs/design.md "Store"):
 * partial indexes for the rows queries ask for, and a runs row whose indexed columns (state,
 * work_*) are set only when they change — yet always right, whatever the sequence of changes
 * (decisions §6: leasing reads the work columns).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { Kernel, KERNEL_PAGE_SIZE } from '../../src/kernel/kernel.js';
import { silentLogger } from '../../src/log/logger.js';
import type { SqliteDb } from '../../src/store/sqlite-db.js';
import { tempDir } from '../helpers/daemon.js';

const REQUESTER = { id: 'ana', role: 'agent', manager: 'lead' };
const BUNDLE = {
  name: 'writes',
  version: '1.0.0',
  description: 'two tool steps',
  department: 'ops',
  tools: { 'test.echo': { writes: false } },
  workflows: { two: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }, { id: 'b', kind: 'tool', tool: 'test.echo', args: {} }] } },
};

const dir = tempDir('svc-kernel-writes-');
let kernel: Kernel;
let bundleId: string;

beforeAll(async () => {
  const pub = generateKeyPair();
  kernel = await Kernel.open({ dataDir: join(dir, 'k'), logger: silentLogger, publishers: [`p:${encodeBase64url(pub.publicKey)}`] });
  const posted = await kernel.bundles.post({ bundle: BUNDLE, signature: { key_id: 'p', signature: encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(BUNDLE)))) } });
  bundleId = posted.bundle_id;
});
afterAll(async () => {
  await kernel.close();
  rmSync(dir, { recursive: true, force: true });
});

const raw = () => (kernel.db as SqliteDb).raw;
const row = (runId: string) => raw().prepare('SELECT state, work_kind, work_step, work_ready_at FROM runs WHERE run_id = ?').get(runId) as Record<string, unknown>;

async function newRun(): Promise<string> {
  const remit = await kernel.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
  return (await kernel.runs.create({ bundle_id: bundleId, workflow: 'two', input: {}, remit_id: remit.remit_id, requested_by: REQUESTER })).run_id;
}

describe('page size (design.md "Store": pages per write)', () => {
  it('creates the kernel store with the page size it pins (4 KiB: smaller pages measured slower on a quick disk)', () => {
    expect(KERNEL_PAGE_SIZE).toBe(4096);
    expect(raw().pragma('page_size', { simple: true })).toBe(KERNEL_PAGE_SIZE);
  });
});

describe('partial indexes (migrations remits-002, runs-002, remits-004, runs-004)', () => {
  it('index only the rows their queries ask for', () => {
    const sqlOf = (name: string) => (raw().prepare("SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?").get(name) as { sql: string }).sql;
    expect(sqlOf('remits_parent')).toMatch(/WHERE parent_id IS NOT NULL$/);
    // remits_run went with remits.run_id's last writer (remits-003, remits-004).
    expect(raw().prepare("SELECT name FROM sqlite_schema WHERE name = 'remits_run'").get()).toBeUndefined();
    expect(sqlOf('runs_parent')).toMatch(/WHERE parent_run_id IS NOT NULL$/);
    expect(sqlOf('leases_active')).toMatch(/WHERE status = 'active'$/);
    // leases_run went: each lease and completion wrote it, for an abandon's sake (runs-004).
    expect(raw().prepare("SELECT name FROM sqlite_schema WHERE name = 'leases_run'").get()).toBeUndefined();
  });

  it('are still the ones the sweeper and abandon use', () => {
    const plan = (sql: string) => (raw().prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((r) => r.detail).join(' | ');
    expect(plan("SELECT * FROM leases WHERE status = 'active' AND expires_at <= 0 ORDER BY expires_at LIMIT 200")).toContain('leases_active');
    // An abandon scans the active leases only, never every lease the store has held.
    expect(plan("SELECT lease_id FROM leases WHERE run_id = 'r' AND status = 'active'")).toContain('USING INDEX leases_active');
    expect(plan("UPDATE leases SET status = 'released', ended_at = 'x' WHERE run_id = 'r' AND status = 'active'")).toContain('USING INDEX leases_active');
  });
});

describe('the lease scan reads runs_work alone, in order (migration runs-003)', () => {
  const plan = (sql: string, ...args: unknown[]) => (raw().prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(' | ');
  const scan = (kinds: number) => `SELECT run_id FROM runs WHERE work_kind IN (${Array(kinds).fill('?').join(', ')}) AND work_ready_at <= ? ORDER BY work_ready_at, run_id LIMIT 8`;

  it('indexes only runs with work, with run_id, so one kind needs no sort and no table read', () => {
    const sql = (raw().prepare("SELECT sql FROM sqlite_schema WHERE name = 'runs_work'").get() as { sql: string }).sql;
    expect(sql).toMatch(/\(work_kind, work_ready_at, run_id\) WHERE work_kind IS NOT NULL$/);
    expect(plan(scan(1), 'tool', 0)).toBe('SEARCH runs USING COVERING INDEX runs_work (work_kind=? AND work_ready_at<?)');
    expect(plan(scan(3), 'model', 'tool', 'action', 0)).toContain('COVERING INDEX runs_work');
    expect(plan('SELECT MIN(work_ready_at) AS t FROM runs WHERE work_kind IN (?, ?) AND work_ready_at > ?', 'model', 'tool', 0)).toContain('COVERING INDEX runs_work');
  });

  it('still hands out the oldest ready run of the kinds asked for, and forgets finished runs', async () => {
    const first = await newRun();
    const second = await newRun();
    const withWork = (raw().prepare('SELECT count(*) AS n FROM runs INDEXED BY runs_work WHERE work_kind IS NOT NULL').get() as { n: number }).n;
    const a = await kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['model', 'tool'], ttl_seconds: 60, wait_seconds: 0 });
    expect(a?.run_id).toBe(first);
    const b = await kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['action', 'tool'], ttl_seconds: 60, wait_seconds: 0 });
    expect(b?.run_id).toBe(second);
    // Leased runs have no ready work: their entries left the index.
    expect((raw().prepare('SELECT count(*) AS n FROM runs INDEXED BY runs_work WHERE work_kind IS NOT NULL').get() as { n: number }).n).toBe(withWork - 2);
    for (const l of [a!, b!]) await kernel.runs.leases.complete(l.lease_id, { output: {} });
    // Drain both runs (their second step) so later tests start from no ready work.
    for (let i = 0; i < 2; i++) {
      const next = await kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['tool'], ttl_seconds: 60, wait_seconds: 0 });
      await kernel.runs.leases.complete(next!.lease_id, { output: {} });
    }
    expect(raw().prepare("SELECT count(*) AS n FROM runs WHERE run_id IN (?, ?) AND state = 'completed'").get(first, second)).toEqual({ n: 2 });
    // Finished: no work, so not in the index either (it held them again between the steps).
    expect((raw().prepare('SELECT count(*) AS n FROM runs INDEXED BY runs_work WHERE work_kind IS NOT NULL').get() as { n: number }).n).toBe(withWork - 2);
  });
});

describe('runs row: indexed columns set only when they change (run-store flush)', () => {
  it('stays right through external events, leases, completions and the end of the run', async () => {
    const runId = await newRun();
    const ready = row(runId);
    expect(ready).toMatchObject({ state: 'running', work_kind: 'tool', work_step: 'a' });
    expect(typeof ready.work_ready_at).toBe('number');

    await kernel.runs.appendExternalEvent(runId, { kind: 'note', payload: { text: 'n' }, actor: 'w' });
    expect(row(runId)).toEqual(ready); // nothing indexed changed, nothing indexed was set

    const a = await kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['tool'], ttl_seconds: 60, wait_seconds: 0 });
    expect(a?.run_id).toBe(runId);
    expect(row(runId)).toMatchObject({ state: 'running', work_kind: null, work_step: null, work_ready_at: null });
    await kernel.runs.appendExternalEvent(runId, { kind: 'tool.called', payload: { tool: 'test.echo' }, actor: 'gateway' });
    expect(row(runId)).toMatchObject({ state: 'running', work_kind: null });

    await kernel.runs.leases.complete(a!.lease_id, { output: {} });
    expect(row(runId)).toMatchObject({ state: 'running', work_kind: 'tool', work_step: 'b' });
    const b = await kernel.runs.leases.acquire({ worker_id: 'w', kinds: ['tool'], ttl_seconds: 60, wait_seconds: 0 });
    expect(b?.step).toBe('b');
    await kernel.runs.leases.complete(b!.lease_id, { output: {} });
    expect(row(runId)).toEqual({ state: 'completed', work_kind: null, work_step: null, work_ready_at: null });

    // The stored state still equals the replayed one (decisions §7).
    const report = await kernel.runs.replay(runId);
    expect(report.state_matches).toBe(true);
    expect(report.chain_valid).toBe(true);
  });
});

describe('remit bindings in a table of their own (migration remits-003)', () => {
  it('binding a remit writes a remit_bindings row and leaves the remit row as minted', async () => {
    const runId = await newRun();
    const remitId = (raw().prepare('SELECT remit_id FROM runs WHERE run_id = ?').get(runId) as { remit_id: string }).remit_id;
    expect(raw().prepare('SELECT run_id, bound_payload, bound_token FROM remits WHERE remit_id = ?').get(remitId)).toEqual({ run_id: null, bound_payload: null, bound_token: null });
    const b = raw().prepare('SELECT run_id, bound_token FROM remit_bindings WHERE remit_id = ?').get(remitId) as { run_id: string; bound_token: string };
    expect(b.run_id).toBe(runId);
    expect(await kernel.remits.tokenFor(remitId)).toBe(b.bound_token);
    expect((await kernel.remits.get(remitId)).run_id).toBe(runId);
    // A second run cannot bind it (decisions §3).
    await expect(kernel.runs.create({ bundle_id: bundleId, workflow: 'two', input: {}, remit_id: remitId, requested_by: REQUESTER })).rejects.toMatchObject({ code: 'remit_bound' });
  });

  it('carries bindings made before it into remit_bindings', async () => {
    const { SqliteDb: Db, migrate } = await import('../../src/store/sqlite-db.js');
    const { REMIT_MIGRATIONS } = await import('../../src/remit/schema.js');
    const db = new Db({ path: join(dir, 'old-remits.db') });
    const before = REMIT_MIGRATIONS.filter((m) => m.id < 'remits-003');
    await migrate(db, before);
    await db.run(
      `INSERT INTO remits (remit_id, parent_id, run_id, payload, token, bound_payload, bound_token, spend_tokens, spend_usd_micro, exp, created_at, bound_at)
       VALUES ('rmt_old', NULL, 'run_old', '{}', 'tok', '{"run":"run_old"}', 'bound-tok', 1, 1, 9999999999, '2026-11-01T00:00:00.000Z', '2026-11-02T00:00:00.000Z')`,
    );
    await db.run(`INSERT INTO remits (remit_id, parent_id, run_id, payload, token, spend_tokens, spend_usd_micro, exp, created_at) VALUES ('rmt_free', NULL, NULL, '{}', 'tok2', 1, 1, 9999999999, '2026-11-01T00:00:00.000Z')`);
    expect(await migrate(db, REMIT_MIGRATIONS)).toEqual(['remits-003-bindings', 'remits-004-drop-run-index', 'remits-005-legacy-binding-index']);
    expect(await db.all('SELECT remit_id, run_id, bound_payload, bound_token, bound_at FROM remit_bindings')).toEqual([
      { remit_id: 'rmt_old', run_id: 'run_old', bound_payload: '{"run":"run_old"}', bound_token: 'bound-tok', bound_at: '2026-11-02T00:00:00.000Z' },
    ]);
    await db.close();
  });

  it('adopts a binding an svcd from before remits-003 made on this store after it was migrated (a downgrade and back)', async () => {
    // Such a build ignores migrations it does not know, opens the store, and binds in remits' own
    // columns: without the adoption the remit looked unbound here and bound a second run.
    const runId = await newRun();
    const legacyRemit = await kernel.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
    const adopt = raw().prepare(
      `UPDATE remits SET run_id = ?, bound_payload = json_set(payload, '$.run', ?), bound_token = 'legacy-token', bound_at = '2026-11-23T00:00:00.000Z' WHERE remit_id = ?`,
    );
    adopt.run(runId, runId, legacyRemit.remit_id);
    const { adoptLegacyBindings } = await import('../../src/remit/schema.js');
    // Only the legacy rows are read, through remits-005's partial index.
    const sql = raw().prepare("SELECT sql FROM sqlite_schema WHERE name = 'remits_legacy_binding'").get() as { sql: string };
    expect(sql.sql).toMatch(/WHERE run_id IS NOT NULL/);
    const plan = raw()
      .prepare('EXPLAIN QUERY PLAN SELECT r.remit_id FROM remits r WHERE r.run_id IS NOT NULL AND r.bound_payload IS NOT NULL AND r.bound_token IS NOT NULL')
      .all() as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join(' ')).toMatch(/USING INDEX remits_legacy_binding/);
    expect(await adoptLegacyBindings(kernel.db)).toBe(1);
    expect(await adoptLegacyBindings(kernel.db)).toBe(0); // idempotent
    expect(await kernel.remits.get(legacyRemit.remit_id)).toMatchObject({ run: runId, run_id: runId });
    await expect(kernel.runs.create({ bundle_id: bundleId, workflow: 'two', input: {}, remit_id: legacyRemit.remit_id, requested_by: REQUESTER })).rejects.toMatchObject({ code: 'remit_bound' });
  });

  it('runs the adoption when the kernel opens its store', async () => {
    const { SqliteDb: Db, migrate } = await import('../../src/store/sqlite-db.js');
    const { KERNEL_MIGRATIONS } = await import('../../src/store/migrations.js');
    const dataDir = join(dir, 'reopened');
    const first = await Kernel.open({ dataDir, logger: silentLogger });
    const minted = await first.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
    await first.close();
    const db = new Db({ path: join(dataDir, 'kernel.db') });
    expect(await migrate(db, KERNEL_MIGRATIONS)).toEqual([]);
    await db.run(`UPDATE remits SET run_id = 'run_legacy', bound_payload = json_set(payload, '$.run', 'run_legacy'), bound_token = 't' WHERE remit_id = ?`, [minted.remit_id]);
    await db.close();
    const warnings: unknown[] = [];
    const logger = { ...silentLogger, warn: (msg: string, fields?: unknown) => warnings.push([msg, fields]) };
    const again = await Kernel.open({ dataDir, logger });
    try {
      expect((await again.remits.get(minted.remit_id)).run_id).toBe('run_legacy');
      expect(warnings).toEqual([['remit bindings adopted from an older svcd', { remits: 1 }]]);
    } finally {
      await again.close();
    }
  });
});
