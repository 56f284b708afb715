/**
 * The gateway's event outbox (interface 5.3 "a refused call appends a `tool.refused` event",
 * decisions §7 external kinds): an event the kernel cannot take now is kept in gateway.db and
 * delivered, in order, once it answers; a refusal is final. A real SQLite file, a scripted
 * kernel link.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { SvcError } from '../../src/errors.js';
import { EventOutbox, mayPass, type EventOutboxOptions } from '../../src/gateway/event-outbox.js';
import { GATEWAY_MIGRATIONS } from '../../src/gateway/idempotency.js';
import { KernelUnreachable, type AppendOptions, type EventCredential, type GatewayEvent, type KernelLink } from '../../src/gateway/kernel-link.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { Redactor } from '../../src/log/logger.js';
import { migrate, SqliteDb } from '../../src/store/sqlite-db.js';
import { tempDir } from '../helpers/daemon.js';
import { capturedLogger, metricValue } from './helpers.js';

/** A kernel that is up or down, refuses the credentials `refuses` names, and records what it took. */
class ScriptedKernel implements KernelLink {
  up = true;
  /** Answer an append after this many ms (a slow kernel). */
  delayMs = 0;
  refuses: (cred: EventCredential) => boolean = () => false;
  finalRefusal: string | null = null;
  /** Runs whose appends the kernel answers with a 500 (an answer, but no verdict on the event). */
  readonly failing = new Set<string>();
  readonly tried: string[] = [];
  readonly taken: Array<{ runId: string; ev: GatewayEvent; cred: EventCredential }> = [];
  async trustedKeys(): Promise<never> {
    throw new Error('not used');
  }
  /** Hung: a request waits until `wake()`, or fails as timed out after its timeout (100 ms without one, as a direct call's). */
  hung = false;
  calls = 0;
  private waiting: Array<() => void> = [];
  wake(): void {
    this.hung = false;
    for (const w of this.waiting.splice(0)) w();
  }
  async appendEvent(runId: string, ev: GatewayEvent, cred: EventCredential, opts: AppendOptions = {}): Promise<void> {
    this.calls += 1;
    if (this.hung) {
      const woke = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), opts.timeoutMs ?? 100);
        this.waiting.push(() => {
          clearTimeout(t);
          resolve(true);
        });
        opts.signal?.addEventListener('abort', () => resolve(false));
      });
      if (!woke) throw new KernelUnreachable('cannot reach the kernel at http://127.0.0.1:9: no answer in time', true);
    }
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    this.tried.push(runId);
    if (!this.up) throw new KernelUnreachable('cannot reach the kernel at http://127.0.0.1:9: ECONNREFUSED');
    if (this.failing.has(runId)) throw new Error('POST /v1/runs/x/events answered 500 {"error":{"code":"internal"}}');
    if (this.refuses(cred)) throw new SvcError('credential_invalid', 'X-Svc-Remit is refused: expired');
    if (this.finalRefusal) throw new SvcError('not_found', this.finalRefusal);
    this.taken.push({ runId, ev, cred });
  }
}

const SECRET = 'sk-outbox-secret-value-1234';
const ev = (n: number, extra: Record<string, unknown> = {}): GatewayEvent => ({ kind: 'tool.called', payload: { n, ...extra }, actor: { id: 'gateway', role: 'gateway' } });

let opened: Array<{ box: EventOutbox; db: SqliteDb }> = [];
afterEach(async () => {
  for (const { box, db } of opened) {
    await box.close();
    await db.close();
  }
  opened = [];
});

async function openBox(kernel: ScriptedKernel, dir = tempDir('svc-outbox-'), over: Partial<EventOutboxOptions> = {}) {
  const db = new SqliteDb({ path: join(dir, 'gateway.db') });
  await migrate(db, GATEWAY_MIGRATIONS);
  const redactor = new Redactor();
  redactor.add(SECRET);
  const log = capturedLogger(redactor);
  const metrics = new GatewayMetrics();
  const clock = new ManualClock();
  // retryMs high: the tests drain by hand, so no timer races them.
  const box = await EventOutbox.open({ db, link: () => kernel, clock, logger: log.logger, redactor, metrics, timeoutMs: 500, retryMs: 60_000, ...over });
  const handle = { box, db };
  opened.push(handle);
  const closeNow = async () => {
    opened = opened.filter((o) => o !== handle);
    await box.close();
    await db.close();
  };
  return { box, db, dir, log, metrics, clock, closeNow };
}

const remit: EventCredential = { remit: 'krt1.k.payload.sig' };
const lease: EventCredential = { lease: 'lse_1' };

describe('event outbox: the kernel answers', () => {
  it('delivers at once with the first credential the kernel accepts, and queues nothing', async () => {
    const k = new ScriptedKernel();
    k.refuses = (c) => 'remit' in c;
    const { box, db } = await openBox(k);
    await box.deliver('run_A', ev(1), [remit, lease]);
    expect(k.taken).toEqual([{ runId: 'run_A', ev: ev(1), cred: lease }]);
    expect(box.depth).toBe(0);
    expect(await db.all('SELECT * FROM gateway_event_outbox')).toEqual([]);
  });

  it('a refusal of every credential, or of the event itself, is final: logged and counted, never queued', async () => {
    const k = new ScriptedKernel();
    k.refuses = () => true;
    const { box, log, metrics } = await openBox(k);
    await box.deliver('run_B', ev(1, { tool: 'billing.refund', step: 'refund', outcome: 'ok' }), [remit, lease]);
    // The log names the call whose record is lost, so an operator can check it by hand.
    const line = JSON.parse(log.text().split('\n').find((l) => l.includes('a gateway event was not recorded'))!);
    expect(line).toMatchObject({ level: 'warn', kind: 'tool.called', run_id: 'run_B', tool: 'billing.refund', step: 'refund', outcome: 'ok', reason: 'refused' });
    k.refuses = () => false;
    k.finalRefusal = 'run run_B not found';
    await box.deliver('run_B', ev(2), [remit]);
    expect(box.depth).toBe(0);
    expect(k.taken).toEqual([]);
    expect(log.text()).toContain('a gateway event was not recorded on its run');
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'refused' })).toBe(2);
  });
});

describe('event outbox: drops in the log', () => {
  it('a burst of refused events (made-up run ids) logs 10 lines per 10 s, counts every one, and the next line says how many were not logged', async () => {
    const k = new ScriptedKernel();
    k.finalRefusal = 'run not found';
    const { box, log, metrics, clock } = await openBox(k);
    for (let i = 0; i < 500; i++) await box.deliver(`run_${i}`, ev(i), [remit]);
    const lines = () => log.text().split('\n').filter((l) => l.includes('a gateway event was not recorded')).map((l) => JSON.parse(l));
    expect(lines()).toHaveLength(10);
    expect(lines()[9]).toMatchObject({ run_id: 'run_9' });
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'refused' })).toBe(500);
    clock.advance(10_000);
    await box.deliver('run_last', ev(500), [remit]);
    expect(lines()).toHaveLength(11);
    expect(lines()[10]).toMatchObject({ run_id: 'run_last', not_logged_before: 490 });
  });
});

describe('event outbox: the kernel does not answer', () => {
  it('queues the event, keeps a run\'s order while it has a backlog, and delivers oldest first once the kernel is back', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, metrics, log } = await openBox(k);
    await box.deliver('run_C', ev(1), [remit, lease]);
    k.up = true;
    // The kernel is back, but run_C still has an event queued: the next one waits behind it.
    await box.deliver('run_C', ev(2), [remit]);
    await box.deliver('run_D', ev(3), [remit]); // another run has no backlog: straight through
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([3]);
    expect(box.depth).toBe(2);
    expect(metricValue(await metrics.text(), 'svc_gateway_event_outbox_depth')).toBe(2);
    expect(log.text()).toContain('cannot reach the kernel with a gateway event; it is queued');

    await box.drain();
    expect(k.taken.map((t) => [t.runId, t.ev.payload.n])).toEqual([
      ['run_D', 3],
      ['run_C', 1],
      ['run_C', 2],
    ]);
    // A delayed event says when the gateway first tried to post it.
    expect(k.taken[1].ev.payload.queued_at).toBe('2026-11-22T10:00:00.000Z'); // the manual clock's time at the deliver
    expect(k.taken[1].cred).toEqual(remit);
    expect(box.depth).toBe(0);
    expect(metricValue(await metrics.text(), 'svc_gateway_event_outbox_depth')).toBe(0);
  });

  it('a kernel that does not answer stops a pass at its first event: nothing more is tried until it answers', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box } = await openBox(k);
    for (const n of [1, 2, 3]) await box.deliver(`run_${n}`, ev(n), [remit]);
    k.tried.length = 0;
    await box.drain(); // still down
    expect(k.tried).toEqual(['run_1']);
    expect(box.depth).toBe(3);
    k.up = true;
    await box.drain();
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([1, 2, 3]);
  });

  it("an answer that is no verdict (a 500) holds back that run's events only, and after maxTries the event is dropped", async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, metrics } = await openBox(k, undefined, { maxTries: 3 });
    await box.deliver('run_A', ev(1), [remit]);
    await box.deliver('run_A', ev(2), [remit]); // behind ev 1, in its run's order
    await box.deliver('run_B', ev(3), [remit]);
    k.up = true;
    k.failing.add('run_A');
    await box.drain();
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([3]); // run_B went on; ev 2 waited behind ev 1
    expect(box.depth).toBe(2);
    await box.drain();
    await box.drain(); // the third answer without a verdict
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'refused' })).toBe(1);
    k.failing.clear();
    await box.drain();
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([3, 2]); // ev 1 was dropped, ev 2 goes
    expect(box.depth).toBe(0);
  });

  it('survives a restart of the gateway: the next start delivers what the last one queued', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const first = await openBox(k);
    await first.box.deliver('run_E', ev(1), [remit, lease]);
    await first.box.deliver('run_E', ev(2), [lease]);
    await first.closeNow();

    k.up = true;
    const second = await openBox(k, first.dir);
    expect(second.box.depth).toBe(2);
    await second.box.drain();
    expect(k.taken.map((t) => [t.ev.payload.n, t.cred])).toEqual([
      [1, remit],
      [2, lease],
    ]);
  });

  it('a queued event whose credential expired meanwhile is dropped with a warning, and the rest go on', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, log, metrics } = await openBox(k);
    await box.deliver('run_F', ev(1), [remit]);
    await box.deliver('run_F', ev(2), [lease]);
    k.up = true;
    k.refuses = (c) => 'remit' in c;
    await box.drain();
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([2]);
    expect(box.depth).toBe(0);
    expect(log.text()).toContain('X-Svc-Remit is refused: expired');
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'refused' })).toBe(1);
  });

  it('bounded: a full outbox drops new events, and an event older than maxAgeMs is dropped unsent', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, metrics, clock } = await openBox(k, undefined, { maxRows: 2, maxAgeMs: 3_600_000 });
    for (const n of [1, 2, 3]) await box.deliver('run_G', ev(n), [remit]);
    expect(box.depth).toBe(2);
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'full' })).toBe(1);
    clock.advance(3_600_001);
    k.up = true;
    await box.drain();
    expect(k.taken).toEqual([]);
    expect(box.depth).toBe(0);
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'expired' })).toBe(2);
  });

  it('a slow kernel: the call goes on after timeoutMs with its event already in the outbox, held until the append settles', async () => {
    const k = new ScriptedKernel();
    k.delayMs = 1000;
    const { box, db } = await openBox(k, undefined, { timeoutMs: 50 });
    const t0 = performance.now();
    await box.deliver('run_H', ev(1), [remit]);
    expect(performance.now() - t0).toBeLessThan(700); // not the kernel's 1000 ms (room for a loaded machine)
    // On disk before the call answers: a crash now would not lose it.
    expect(await db.all('SELECT run_id FROM gateway_event_outbox')).toEqual([{ run_id: 'run_H' }]);
    await box.drain(); // held: the append in flight may still land, so a pass does not send it again
    // The append lands after all: the row goes, and the event was sent once.
    await expect.poll(() => box.depth, { timeout: 2000 }).toBe(0);
    expect(k.tried).toEqual(['run_H']);
    expect(k.taken).toHaveLength(1);
    expect(k.taken[0]!.ev.payload.queued_at).toBeUndefined();
  });

  it("events queued behind a held one go once it lands, without waiting for another event", async () => {
    const k = new ScriptedKernel();
    k.delayMs = 300;
    const { box } = await openBox(k, undefined, { timeoutMs: 50 });
    await box.deliver('run_N2', ev(1), [remit]); // held at its deadline
    k.delayMs = 0;
    await box.deliver('run_N2', ev(2), [remit]); // queued behind it; the pass it starts leaves it there
    await box.drain();
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([]);
    // The first append lands at 300 ms; the second follows by itself, in order.
    await expect.poll(() => k.taken.map((t) => t.ev.payload.n), { timeout: 2000 }).toEqual([1, 2]);
    expect(box.depth).toBe(0);
  });

  it("an event queued behind a call's append still in flight goes after it, not past it", async () => {
    const k = new ScriptedKernel();
    k.delayMs = 200; // the first append is slow, but lands within the call's wait
    const { box } = await openBox(k, undefined, { timeoutMs: 2000 });
    const first = box.deliver('run_F', ev(1), [remit]);
    await new Promise((r) => setTimeout(r, 20));
    k.delayMs = 0;
    const second = box.deliver('run_F', ev(2), [remit]); // run_F is being sent: queued behind it
    await box.drain(); // a pass while the first is in flight leaves the second where it is
    expect(k.taken.map((t) => t.ev.payload.n)).toEqual([]);
    await Promise.all([first, second]);
    await expect.poll(() => k.taken.map((t) => t.ev.payload.n), { timeout: 2000 }).toEqual([1, 2]);
    expect(box.depth).toBe(0);
  });

  it('a hung kernel gets one request at a time, not a copy of the event per retry: calls queue without asking, and one pass request waits', async () => {
    const k = new ScriptedKernel();
    k.hung = true; // takes connections, answers nothing
    const { box } = await openBox(k, undefined, { timeoutMs: 50, retryMs: 20, maxRetryMs: 40, passTimeoutMs: 10_000 });
    await box.deliver('run_P', ev(1), [remit]); // tries, times out: the kernel is hung
    await new Promise((r) => setTimeout(r, 150));
    await box.deliver('run_P', ev(2), [remit]);
    await box.deliver('run_Q', ev(3), [remit]); // another run: queued without asking too
    await new Promise((r) => setTimeout(r, 400)); // many backoff periods
    expect(k.calls).toBe(2); // the call's own try, and one pass request still waiting
    k.wake();
    await expect.poll(() => k.taken.map((t) => t.ev.payload.n), { timeout: 2000 }).toEqual([1, 2, 3]);
    expect(k.calls).toBe(4);
    expect(box.depth).toBe(0);
  });

  it('close does not wait for a pass request hung on the kernel; the row stays for the next start', async () => {
    const k = new ScriptedKernel();
    k.hung = true;
    const first = await openBox(k, undefined, { timeoutMs: 50, retryMs: 20, passTimeoutMs: 60_000 });
    await first.box.deliver('run_R', ev(1), [remit]);
    await expect.poll(() => k.calls, { timeout: 2000 }).toBe(2); // the pass's request is waiting
    const t0 = performance.now();
    await first.closeNow();
    expect(performance.now() - t0).toBeLessThan(1000);
    k.wake();
    const second = await openBox(k, first.dir);
    expect(second.box.depth).toBe(1);
  });

  it('a slow kernel that then fails: the held row is sent by a later pass, once', async () => {
    const k = new ScriptedKernel();
    k.delayMs = 200;
    k.up = false;
    const { box } = await openBox(k, undefined, { timeoutMs: 50 });
    await box.deliver('run_J2', ev(1), [remit]);
    expect(box.depth).toBe(1);
    await new Promise((r) => setTimeout(r, 300)); // the append failed meanwhile
    k.delayMs = 0;
    k.up = true;
    await box.drain();
    expect(k.taken.map((t) => [t.runId, t.ev.payload.n])).toEqual([['run_J2', 1]]);
    expect(typeof k.taken[0]!.ev.payload.queued_at).toBe('string');
    expect(box.depth).toBe(0);
  });

  it('close lets a call still waiting for its event finish: the event is in the outbox at the next start', async () => {
    const k = new ScriptedKernel();
    k.delayMs = 5000; // a kernel that does not answer in time
    const first = await openBox(k, undefined, { timeoutMs: 100 });
    const waiting = first.box.deliver('run_K2', ev(1), [remit]);
    await first.closeNow(); // waits for the call, whose row is written at its deadline
    await waiting;
    k.delayMs = 0;
    const second = await openBox(k, first.dir);
    expect(second.box.depth).toBe(1);
    await second.box.drain();
    expect(k.taken.map((t) => t.runId)).toEqual(['run_K2']);
  });

  it('a row that cannot be read is dropped, and the rows after it still go', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, db, metrics } = await openBox(k);
    await db.run("INSERT INTO gateway_event_outbox (run_id, event, creds, queued_at, queued_ms) VALUES ('run_L2', 'not json', '[]', '2026-11-22T10:00:00.000Z', ?)", [Date.parse('2026-11-22T10:00:00.000Z')]);
    await box.deliver('run_M2', ev(2), [remit]);
    k.up = true;
    await box.drain();
    expect(k.taken.map((t) => t.runId)).toEqual(['run_M2']);
    expect(metricValue(await metrics.text(), 'svc_gateway_events_dropped_total', { reason: 'store' })).toBe(1);
    expect(await db.all('SELECT * FROM gateway_event_outbox')).toEqual([]);
  });

  it('stores the redacted payload: a ${VAR} value never reaches the file', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, db } = await openBox(k);
    await box.deliver('run_I', ev(1, { detail: `upstream said ${SECRET}` }), [remit]);
    const rows = await db.all<{ event: string }>('SELECT event FROM gateway_event_outbox');
    expect(rows).toHaveLength(1);
    expect(rows[0].event).not.toContain(SECRET);
    expect(rows[0].event).toContain('[REDACTED]');
  });

  it('asks again by itself with a growing wait, and says once that the kernel is back', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box, log } = await openBox(k, undefined, { retryMs: 20, maxRetryMs: 40 });
    await box.deliver('run_J', ev(1), [remit]);
    await new Promise((r) => setTimeout(r, 150)); // a few timed passes, all failing
    expect(log.text().match(/cannot reach the kernel with a gateway event/g)).toHaveLength(1);
    k.up = true;
    await expect.poll(() => k.taken.length, { timeout: 2000 }).toBe(1);
    expect(log.text()).toContain('the kernel takes gateway events again');
  });
});

describe('mayPass: which failed appends are worth asking again', () => {
  it('a kernel that did not answer or failed inside may pass; its refusals of the event do not', () => {
    expect(mayPass(new Error('cannot reach the kernel at http://x: ECONNREFUSED'))).toBe(true);
    expect(mayPass(new SvcError('unavailable', 'draining'))).toBe(true);
    expect(mayPass(new SvcError('unauthorized', 'bad bearer'))).toBe(true);
    expect(mayPass(new SvcError('forbidden', 'not loopback'))).toBe(true);
    expect(mayPass(new KernelUnreachable('cannot reach the kernel'))).toBe(true);
    expect(mayPass(new SvcError('not_found', 'run x not found'))).toBe(false);
    expect(mayPass(new SvcError('request_invalid', 'bad'))).toBe(false);
    expect(mayPass(new SvcError('event_kind_not_external', 'no'))).toBe(false);
  });
});

describe('event outbox: the kernel comes back', () => {
  it('an event delivered straight through while others wait starts their delivery at once, not after the backoff', async () => {
    const k = new ScriptedKernel();
    k.up = false;
    const { box } = await openBox(k, undefined, { retryMs: 60_000 });
    await box.deliver('run_K', ev(1), [remit]);
    expect(box.depth).toBe(1);
    k.up = true;
    await box.deliver('run_L', ev(2), [remit]);
    await expect.poll(() => k.taken.map((t) => t.ev.payload.n), { timeout: 2000 }).toEqual([2, 1]);
  });
});
