/**
 * The idempotency store (interface 2.10, 4.2 call rules, 8; decisions §9): claim, replay,
 * conflict, in flight, recovery of pending claims at start, and the 30-day expiry.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { IDEMPOTENCY_TTL_MS, IdempotencyStore } from '../../src/gateway/idempotency.js';
import { tempDir } from '../helpers/daemon.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function open(clock = new ManualClock(0), dir = tempDir('svc-idem-')) {
  dirs.push(dir);
  return { store: await IdempotencyStore.open(dir, clock), clock, dir };
}

describe('idempotency store (decisions §9)', () => {
  it('claim → pending (in flight) → complete → replay; other args conflict', async () => {
    const { store } = await open();
    expect(await store.claim('t.op', 'k', 'h1', false)).toEqual({ kind: 'claimed' });
    expect(await store.claim('t.op', 'k', 'h1', false)).toEqual({ kind: 'in_flight' });
    expect(await store.claim('t.op', 'k', 'h2', false)).toEqual({ kind: 'conflict' });
    await store.complete('t.op', 'k', 200, { result: { x: 1 } });
    expect(await store.claim('t.op', 'k', 'h1', false)).toEqual({ kind: 'replay', status: 200, body: { result: { x: 1 } } });
    expect(await store.claim('t.op', 'k', 'h2', false)).toEqual({ kind: 'conflict' });
    await store.close();
  });

  it('release drops a pending claim (upstream error) but never a stored result', async () => {
    const { store } = await open();
    await store.claim('t.op', 'a', 'h', true);
    await store.release('t.op', 'a');
    expect(await store.claim('t.op', 'a', 'h', true)).toEqual({ kind: 'claimed' });
    await store.complete('t.op', 'a', 422, { ok: false });
    await store.release('t.op', 'a');
    expect((await store.claim('t.op', 'a', 'h', true)).kind).toBe('replay');
    await store.close();
  });

  it('markUnknown: a pending write becomes unknown at once (a statement killed mid-run), kept 30 days; a stored result is left alone', async () => {
    const { store, clock } = await open();
    await store.claim('t.op', 'w', 'h', true);
    await store.markUnknown('t.op', 'w');
    expect(await store.claim('t.op', 'w', 'h', true)).toEqual({ kind: 'unknown' });
    expect(await store.claim('t.op', 'w', 'other', true)).toEqual({ kind: 'conflict' });
    clock.advance(IDEMPOTENCY_TTL_MS - 1);
    expect(await store.claim('t.op', 'w', 'h', true)).toEqual({ kind: 'unknown' });
    await store.claim('t.op', 'd', 'h', true);
    await store.complete('t.op', 'd', 200, { ok: true });
    await store.markUnknown('t.op', 'd');
    expect((await store.claim('t.op', 'd', 'h', true)).kind).toBe('replay');
    await store.close();
  });

  it('entries expire 30 days after they were stored (interface 8)', async () => {
    const { store, clock } = await open();
    await store.claim('t.op', 'k', 'h', false);
    clock.advance(1000);
    await store.complete('t.op', 'k', 200, {});
    clock.advance(IDEMPOTENCY_TTL_MS - 1);
    expect((await store.claim('t.op', 'k', 'h', false)).kind).toBe('replay');
    clock.advance(1);
    expect(await store.claim('t.op', 'k', 'other', false)).toEqual({ kind: 'claimed' });
    await store.close();
  });

  it('at start, pending writes become unknown and pending reads are dropped; purge removes expired rows', async () => {
    const { store, clock, dir } = await open();
    await store.claim('t.write', 'w', 'h', true);
    await store.claim('t.read', 'r', 'h', false);
    await store.claim('t.old', 'o', 'h', false);
    await store.complete('t.old', 'o', 200, {});
    await store.close();
    clock.advance(IDEMPOTENCY_TTL_MS + 1);
    const again = await IdempotencyStore.open(dir, clock);
    expect(await again.claim('t.write', 'w', 'h', true)).toEqual({ kind: 'unknown' });
    expect(await again.claim('t.write', 'w', 'other', true)).toEqual({ kind: 'conflict' });
    expect(await again.claim('t.read', 'r', 'h', false)).toEqual({ kind: 'claimed' });
    const rows = await again.db.all<{ tool: string }>('SELECT tool FROM gateway_idempotency ORDER BY tool');
    expect(rows.map((r) => r.tool)).toEqual(['t.write']); // t.old was purged at start; a read's claim is not a row
    await again.close();
  });

  it('a read\'s claim is held in memory: no row until its result is stored, one transaction in all', async () => {
    const { store } = await open();
    const commits = vi.spyOn(store.db, 'tx');
    expect(await store.claim('t.read', 'k', 'h', false)).toEqual({ kind: 'claimed' });
    expect(await store.db.all('SELECT 1 FROM gateway_idempotency')).toEqual([]);
    // A duplicate while it runs is in flight, other args conflict, a release frees it.
    expect(await store.claim('t.read', 'k', 'h', false)).toEqual({ kind: 'in_flight' });
    expect(await store.claim('t.read', 'k', 'h2', false)).toEqual({ kind: 'conflict' });
    await store.release('t.read', 'k');
    expect(await store.claim('t.read', 'k', 'h2', false)).toEqual({ kind: 'claimed' });
    expect(commits).not.toHaveBeenCalled();
    await store.complete('t.read', 'k', 200, { result: 1 });
    expect(commits).toHaveBeenCalledTimes(1);
    expect(await store.claim('t.read', 'k', 'h2', false)).toEqual({ kind: 'replay', status: 200, body: { result: 1 } });
    expect(await store.db.all('SELECT state, writes, args_hash FROM gateway_idempotency')).toEqual([{ state: 'done', writes: 0, args_hash: 'h2' }]);
    commits.mockRestore();
    await store.close();
  });

  it('two claims of one read sent at once: one runs, the other is in flight', async () => {
    const { store } = await open();
    const answers = await Promise.all([store.claim('t.read', 'k', 'h', false), store.claim('t.read', 'k', 'h', false)]);
    expect(answers.map((a) => a.kind).sort()).toEqual(['claimed', 'in_flight']);
    await store.close();
  });

  it('claims sent at once for a read already stored: each replays or conflicts by its own args, none is in flight', async () => {
    const { store } = await open();
    await store.claim('t.read', 'k', 'h', false);
    await store.complete('t.read', 'k', 200, { v: 1 });
    const answers = await Promise.all([store.claim('t.read', 'k', 'other', false), store.claim('t.read', 'k', 'h', false), store.claim('t.read', 'k', 'h', false)]);
    expect(answers).toEqual([{ kind: 'conflict' }, { kind: 'replay', status: 200, body: { v: 1 } }, { kind: 'replay', status: 200, body: { v: 1 } }]);
    await store.close();
  });

  it('a read claim whose lookup fails holds nothing: the next claim of the key runs', async () => {
    const { store } = await open();
    const get = vi.spyOn(store.db, 'get').mockRejectedValueOnce(new Error('disk I/O error'));
    await expect(store.claim('t.read', 'k', 'h', false)).rejects.toThrow('disk I/O error');
    expect(await store.claim('t.read', 'k', 'h', false)).toEqual({ kind: 'claimed' });
    get.mockRestore();
    await store.close();
  });

  it("a write's claim is in flight while its call runs; once the call ended without its end stored, unknown (D §9)", async () => {
    const { store } = await open();
    expect(await store.claim('t.write', 'k', 'h', true)).toEqual({ kind: 'claimed' });
    expect(await store.claim('t.write', 'k', 'h', true)).toEqual({ kind: 'in_flight' });
    // Concurrent duplicates while the claim's own commit is still syncing: in flight, never unknown.
    const racing = await Promise.all([store.claim('t.write', 'r', 'h', true), store.claim('t.write', 'r', 'h', true)]);
    expect(racing.map((a) => a.kind).sort()).toEqual(['claimed', 'in_flight']);
    // The result cannot be stored (a full disk): the row stays pending, the call is over.
    const tx = store.db.tx.bind(store.db);
    store.db.tx = (async () => {
      throw new Error('database or disk is full');
    }) as typeof store.db.tx;
    await expect(store.complete('t.write', 'k', 200, { ok: true })).rejects.toThrow('disk is full');
    store.db.tx = tx;
    expect(await store.db.get("SELECT state FROM gateway_idempotency WHERE idem_key = 'k'")).toEqual({ state: 'pending' });
    expect(await store.claim('t.write', 'k', 'h', true)).toEqual({ kind: 'unknown' });
    await store.close();
  });

  it('a duplicate queued behind a release is in flight, not unknown: nothing ran, and the key is free after (D §9)', async () => {
    const { store } = await open();
    expect(await store.claim('t.write', 'q', 'h', true)).toEqual({ kind: 'claimed' });
    // Another transaction holds the store while the duplicate and the release queue up.
    let let_go!: () => void;
    const held = store.db.tx(() => new Promise<void>((r) => (let_go = r)));
    await new Promise((r) => setImmediate(r));
    const duplicate = store.claim('t.write', 'q', 'h', true);
    const released = store.release('t.write', 'q');
    let_go();
    await held;
    await released;
    expect(await duplicate).toEqual({ kind: 'in_flight' });
    expect(await store.claim('t.write', 'q', 'h', true)).toEqual({ kind: 'claimed' });
    await store.close();
  });

  it('pending read rows written by older builds are dropped at start', async () => {
    const { store, clock, dir } = await open();
    await store.db.run(
      "INSERT INTO gateway_idempotency (tool, idem_key, args_hash, state, writes, claimed_at, expires_at) VALUES ('t.read', 'old', 'h', 'pending', 0, '2026-11-26T00:00:00.000Z', ?)",
      [clock.now() + IDEMPOTENCY_TTL_MS],
    );
    // Pending with no call of this process under it: nothing runs it, so it is not in flight.
    expect(await store.claim('t.read', 'old', 'h', false)).toEqual({ kind: 'unknown' });
    await store.close();
    const again = await IdempotencyStore.open(dir, clock);
    expect(await again.db.all('SELECT 1 FROM gateway_idempotency')).toEqual([]);
    expect(await again.claim('t.read', 'old', 'h', false)).toEqual({ kind: 'claimed' });
    await again.close();
  });

  it('an expired read result is replaced by the next one stored under its key', async () => {
    const { store, clock } = await open();
    await store.claim('t.read', 'k', 'h', false);
    await store.complete('t.read', 'k', 200, { v: 1 });
    clock.advance(IDEMPOTENCY_TTL_MS);
    expect(await store.claim('t.read', 'k', 'other', false)).toEqual({ kind: 'claimed' });
    await store.complete('t.read', 'k', 200, { v: 2 });
    expect(await store.claim('t.read', 'k', 'other', false)).toEqual({ kind: 'replay', status: 200, body: { v: 2 } });
    await store.close();
  });

  it('a running store deletes expired rows on its own, not only at start', async () => {
    const clock = new ManualClock(0);
    const dir = tempDir('svc-idem-');
    dirs.push(dir);
    const store = await IdempotencyStore.open(dir, clock, undefined, 20);
    await store.claim('t.op', 'k', 'h', false);
    await store.complete('t.op', 'k', 200, {});
    clock.advance(IDEMPOTENCY_TTL_MS + 1);
    const count = async () => (await store.db.all('SELECT 1 FROM gateway_idempotency')).length;
    const deadline = Date.now() + 2000;
    while ((await count()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(await count()).toBe(0);
    await store.close();
  });
});
