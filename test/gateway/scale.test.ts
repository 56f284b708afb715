/**
 * What the gateway's scale sweep found grew with the store, held to bounds: the startup
 * recovery reads pending claims through an index (no scan of every entry), the purge deletes
 * expired entries in bounded batches with calls served between them, and repair requests are
 * kept per connector up to a bound.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { REPAIR_FILES_KEPT } from '../../src/gateway/canaries.js';
import { IDEMPOTENCY_TTL_MS, IdempotencyStore, PURGE_BATCH, PURGE_SQL } from '../../src/gateway/idempotency.js';
import type { RunResult } from '../../src/store/sql-db.js';
import { testSigner } from '../helpers/remit-token.js';
import { tempDir } from '../helpers/daemon.js';
import { startGateway } from './helpers.js';

const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const stores: IdempotencyStore[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function scratch(): string {
  const d = tempDir('svc-gw-scale-');
  dirs.push(d);
  return d;
}

async function openStore(clock: ManualClock, dir = scratch()): Promise<IdempotencyStore> {
  const s = await IdempotencyStore.open(dir, clock, undefined, 0);
  stores.push(s);
  return s;
}

function plan(file: string, sql: string): string[] {
  const db = new Database(file, { readonly: true });
  try {
    const n = (sql.match(/\?/g) ?? []).length;
    return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...Array(n).fill(0)) as Array<{ detail: string }>).map((r) => r.detail);
  } finally {
    db.close();
  }
}

describe('idempotency store at scale', () => {
  it('startup recovery finds pending claims through an index, not a scan of every entry', async () => {
    const dir = scratch();
    await openStore(new ManualClock(T0), dir);
    const file = join(dir, 'gateway.db');
    for (const sql of [
      "UPDATE gateway_idempotency SET state = 'unknown', stored_at = ?, expires_at = ? WHERE state = 'pending' AND writes = 1",
      "DELETE FROM gateway_idempotency WHERE state = 'pending'",
    ]) {
      // The partial index holds pending rows only: scanning it reads no settled entry.
      const p = plan(file, sql);
      expect(p.length, sql).toBeGreaterThan(0);
      for (const d of p) expect(d, sql).toMatch(/^(SEARCH|SCAN) gateway_idempotency USING INDEX gateway_idempotency_pending\b/);
    }
    const purge = plan(file, PURGE_SQL);
    expect(purge.join(' ')).toMatch(/USING (COVERING )?INDEX gateway_idempotency_expiry \(expires_at<\?\)/);
    expect(purge.filter((d) => d.startsWith('SCAN'))).toEqual([]);
  });

  it('purges expired entries in batches of at most PURGE_BATCH, and a claim runs between them', async () => {
    const clock = new ManualClock(T0);
    const store = await openStore(clock);
    const expired = PURGE_BATCH * 2 + PURGE_BATCH / 2;
    await store.db.tx(async (t) => {
      for (let i = 0; i < expired + 10; i++) {
        await t.run("INSERT INTO gateway_idempotency (tool, idem_key, args_hash, state, writes, status, body, claimed_at, stored_at, expires_at) VALUES ('t.x', ?, 'h', 'done', 0, 200, 'null', 'a', 'a', ?)", [
          `k${i}`,
          i < expired ? T0 + 1000 : T0 + IDEMPOTENCY_TTL_MS,
        ]);
      }
    });
    clock.advance(2000);
    // Every statement the store runs, in the order it runs them, with what it changed.
    const ran: Array<{ purge: boolean; changes: number }> = [];
    const tx = store.db.tx.bind(store.db);
    vi.spyOn(store.db, 'tx').mockImplementation((fn, opts) =>
      tx(
        (h) =>
          fn(
            new Proxy(h, {
              get: (o, k) =>
                k === 'run'
                  ? async (sql: string, params?: []) => {
                      const r: RunResult = await o.run(sql, params);
                      ran.push({ purge: sql === PURGE_SQL, changes: r.changes });
                      return r;
                    }
                  : (Reflect.get(o, k) as unknown) instanceof Function
                    ? (Reflect.get(o, k) as (...a: unknown[]) => unknown).bind(o)
                    : Reflect.get(o, k),
            }),
          ),
        opts,
      ),
    );
    const purge = store.purgeExpired();
    const claim = store.claim('t.y', 'fresh', 'h', true);
    expect(await purge).toBe(expired);
    expect((await claim).kind).toBe('claimed');
    expect(ran.filter((r) => r.purge).map((r) => r.changes)).toEqual([PURGE_BATCH, PURGE_BATCH, PURGE_BATCH / 2]);
    // The claim's INSERT ran between two batches, not after the whole purge.
    const insert = ran.findIndex((r) => !r.purge);
    expect(insert).toBeGreaterThan(0);
    expect(insert).toBeLessThan(ran.length - 1);
    expect((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM gateway_idempotency'))!.n).toBe(11);
  });
});

describe('repair requests', () => {
  it(`keeps the newest ${REPAIR_FILES_KEPT} of a connector, and nothing of another's`, async () => {
    const clock = new ManualClock(T0);
    const gw = await startGateway({ keys: testSigner(), clock, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    try {
      const dir = join(gw.dataDir, 'repairs');
      const cycle = async () => {
        await gw.req('POST', '/test/shape', { shape: { nope: true } });
        await gw.req('POST', '/canaries/test/probe');
        clock.advance(1000);
        const q = await gw.req('POST', '/canaries/test/probe');
        expect(q.body.status).toBe('quarantined');
        await gw.req('POST', '/test/shape', { shape: { ok: true } });
        expect((await gw.req('POST', '/canaries/test/release')).status).toBe(200);
        clock.advance(1000);
        return q.body.repair_file as string;
      };
      await cycle();
      const other = 'test-other-2026-11-22T10-00-00.000Z.json'; // connector "test-other"
      writeFileSync(join(dir, other), '{}\n');
      let last = '';
      for (let i = 0; i < REPAIR_FILES_KEPT + 9; i++) last = await cycle();
      const files = readdirSync(dir).sort();
      expect(files).toContain(other);
      const own = files.filter((f) => f !== other);
      expect(own).toHaveLength(REPAIR_FILES_KEPT);
      expect(own.at(-1)).toBe(last.split('/').at(-1));
    } finally {
      await gw.close();
    }
  });

  it('never deletes the repair request it has just written, whatever the names of older ones say', async () => {
    const clock = new ManualClock(T0);
    const gw = await startGateway({ keys: testSigner(), clock, env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    try {
      const dir = join(gw.dataDir, 'repairs');
      mkdirSync(dir, { recursive: true });
      // Written while the host's clock ran a year ahead (then corrected by NTP).
      for (let i = 0; i < REPAIR_FILES_KEPT; i++) writeFileSync(join(dir, `test-2027-11-22T10-00-${String(i).padStart(2, '0')}.000Z.json`), '{}\n');
      await gw.req('POST', '/test/shape', { shape: { nope: true } });
      await gw.req('POST', '/canaries/test/probe');
      clock.advance(1000);
      const q = await gw.req('POST', '/canaries/test/probe');
      expect(q.body.status).toBe('quarantined');
      const file = q.body.repair_file as string;
      expect(existsSync(file), file).toBe(true);
      expect(readdirSync(dir)).toHaveLength(REPAIR_FILES_KEPT);
    } finally {
      await gw.close();
    }
  });
});
