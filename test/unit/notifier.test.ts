/**
 * The long-poll notifier (decisions §6 `wait_seconds`): a shutdown must wake a request that
 * looked for work before it and had not started waiting yet, or that request would hold the
 * drain (daemon/kernel/lease-routes.ts preClose) for its whole wait.
 */
import { describe, expect, it } from 'vitest';
import { WorkNotifier } from '../../src/kernel/notifier.js';

describe('WorkNotifier', () => {
  it('a wait stamped before a shutdown returns at once, as one stamped before new work does', async () => {
    for (const event of [(n: WorkNotifier) => n.wakeAll(), (n: WorkNotifier) => n.notify('model')]) {
      const n = new WorkNotifier();
      const stamp = n.stamp(); // the request looked for work here…
      event(n); // …the shutdown (or the work) came before it started waiting
      const started = Date.now();
      await n.wait(['model'], 10_000, undefined, stamp);
      expect(Date.now() - started).toBeLessThan(1000);
      expect(n.waiting).toBe(0);
    }
  });

  it('a wait already under way is woken by the shutdown; other kinds are not woken by work', async () => {
    const n = new WorkNotifier();
    const tool = n.wait(['tool'], 10_000);
    let toolDone = false;
    void tool.then(() => (toolDone = true));
    n.notify('model');
    await new Promise((r) => setTimeout(r, 20));
    expect(toolDone).toBe(false);
    n.wakeAll();
    await tool;
    expect(n.waiting).toBe(0);
  });
});
