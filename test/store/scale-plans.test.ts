/**
 * Queries whose cost must not grow with the store (the scale sweep): each is answered from an
 * index that holds the rows asked for, never by reading every pending approval or every
 * approval of an approver. Asserted on the query plan, not on time. (`GET /v1/runs` with both
 * `state` and `department` reads the department's runs and drops the other states: an index
 * for the pair would cost every run's creation and state change a write; docs/design.md.)
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { Kernel } from '../../src/kernel/kernel.js';
import { silentLogger } from '../../src/log/logger.js';
import type { SqliteDb } from '../../src/store/sqlite-db.js';
import type { SqlDb } from '../../src/store/sql-db.js';
import { tempDir } from '../helpers/daemon.js';

const dir = tempDir('svc-scale-plans-');
let kernel: Kernel;
let pub: ReturnType<typeof generateKeyPair>;
const raw = () => (kernel.db as SqliteDb).raw;
const plan = (sql: string, ...args: unknown[]) => (raw().prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(' | ');

beforeAll(async () => {
  pub = generateKeyPair();
  kernel = await Kernel.open({ dataDir: join(dir, 'k'), logger: silentLogger, sweepIntervalMs: 0, publishers: [`p:${encodeBase64url(pub.publicKey)}`] });
});
afterAll(async () => {
  await kernel.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The SQL `fn` sends through kernel.db (get and all), recorded. */
async function sqlOf(fn: () => Promise<unknown>): Promise<string[]> {
  const db = kernel.db as SqlDb & Record<string, unknown>;
  const seen: string[] = [];
  const orig = { get: db.get, all: db.all };
  db.get = ((sql: string, p?: unknown[]) => (seen.push(sql), orig.get.call(db, sql, p as never))) as never;
  db.all = ((sql: string, p?: unknown[]) => (seen.push(sql), orig.all.call(db, sql, p as never))) as never;
  try {
    await fn();
  } finally {
    Object.assign(db, orig);
  }
  return seen;
}

describe('approvals (migration runs-005)', () => {
  it("a run's end finds its pending approvals by run, not among every pending approval", () => {
    const select = plan("SELECT approval_id FROM approvals WHERE run_id = ? AND state = 'pending' ORDER BY approval_id", 'r');
    expect(select).toMatch(/^SEARCH approvals USING (COVERING )?INDEX approvals_pending_run \(run_id=\?\)$/);
    expect(plan("UPDATE approvals SET state = 'cancelled', decided_at = ? WHERE run_id = ? AND state = 'pending'", 'x', 'r')).toContain('approvals_pending_run (run_id=?)');
  });

  it('GET /v1/approvals?approver=R reads a page in order, with or without state', async () => {
    const sql = await sqlOf(() => kernel.runs.approvals.list({ approver: 'role:finance', limit: 50 }));
    const list = sql.find((s) => s.includes('FROM approvals'))!;
    expect(plan(list, 'role:finance', 51)).not.toContain('TEMP B-TREE');
    expect(plan(list, 'role:finance', 51)).toContain('approvals_approver_all (approver=?)');
    const both = (await sqlOf(() => kernel.runs.approvals.list({ approver: 'role:finance', state: 'pending', limit: 50 }))).find((s) => s.includes('FROM approvals'))!;
    expect(plan(both, 'pending', 'role:finance', 51)).toBe('SEARCH approvals USING INDEX approvals_approver (approver=? AND state=?)');
  });
});

describe('GET /v1/bundles reads no bundle body it has summarized', () => {
  it('lists from the rows and the kept summaries; a restart reads each body once', async () => {
    const bundle = (name: string) => ({
      name,
      version: '1.0.0',
      description: `the ${name} bundle`,
      department: 'ops',
      prompts: { big: 'x'.repeat(100_000) },
      tools: { 'test.echo': { writes: false } },
      workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } },
    });
    for (const name of ['b1', 'b2']) {
      const b = bundle(name);
      await kernel.bundles.post({ bundle: b, signature: { key_id: 'p', signature: encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(b)))) } });
    }
    let listed: Awaited<ReturnType<Kernel['bundles']['list']>> | undefined;
    const sql = await sqlOf(async () => (listed = await kernel.bundles.list()));
    expect(sql.filter((s) => /\bbody\b|SELECT \*/.test(s))).toEqual([]);
    expect(listed!.bundles.map((b) => [b.name, b.description, b.workflows])).toEqual([
      ['b1', 'the b1 bundle', ['one']],
      ['b2', 'the b2 bundle', ['one']],
    ]);
    // Another process (no summaries yet) gives the same list, reading each body once.
    await kernel.close();
    kernel = await Kernel.open({ dataDir: join(dir, 'k'), logger: silentLogger, sweepIntervalMs: 0, publishers: [`p:${encodeBase64url(pub.publicKey)}`] });
    const first = await sqlOf(async () => expect(await kernel.bundles.list()).toEqual(listed));
    expect(first.filter((s) => /\bbody\b/.test(s))).toHaveLength(2);
    expect((await sqlOf(() => kernel.bundles.list())).filter((s) => /\bbody\b/.test(s))).toEqual([]);
  });
});
