/**
 * The inbox poller (docs/design.md "An idle inbox costs next to nothing"): runs read by a poll
 * reach the screen in batches, never over a later read of the same run; `more` follows the
 * list; the focused run is read again every poll; the arguments column follows the list.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalsApi, LIST_ALL_CAP, type FetchLike } from '../../cli/tui/approvals-api.js';
import { ApprovalList } from '../../cli/tui/ApprovalList.js';
import { InboxSource } from '../../cli/tui/inbox-source.js';
import { FakeKernel, approval, eventsOf, runOf, until } from './fake-kernel.js';
import { renderTui } from './render.js';

const FIN = { id: 'fin-1', role: 'finance' };


/** k.fetch, with GET /runs/{held} answered only once `release()` is called. */
function gated(k: FakeKernel, held: string): { fetch: FetchLike; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fetch: FetchLike = async (url, init) => {
    if (new URL(url).pathname.endsWith(`/runs/${held}`)) await gate;
    return k.fetch(url, init);
  };
  return { fetch, release };
}

describe('runs handed over in batches', () => {
  it('never replaces a run the screen already shows with an older read of it', async () => {
    const k = new FakeKernel();
    const x = k.add(approval(2)); // newest: read first
    const y = k.add(approval(1)); // its read is held, so the poll's batch is held with x in it
    const { fetch, release } = gated(k, y.run_id);
    const src = new InboxSource({ api: new ApprovalsApi({ baseUrl: 'http://kernel.test:7401', fetch }), actor: FIN, intervalMs: 3_600_000, concurrency: 1 });
    const polling = src.refresh();
    // The poll has read x (parked) and waits on y; x sits in its batch, not yet on screen.
    await until(() => k.calls.some((c) => c.path === `/runs/${x.run_id}`));
    // Meanwhile x's run moves on, and the approver selects it: the detail reads it now.
    k.runs.set(x.run_id, runOf(x, { usage: { tokens: 9000, usd: 0.9 }, last_seq: 7 }));
    k.events.get(x.run_id)!.push({ seq: 7, kind: 'note' });
    src.focus(x.run_id);
    await until(() => src.snapshot().events[x.run_id]);
    expect(src.snapshot().runs[x.run_id]!.usage.tokens).toBe(9000);
    // The poll ends: its batch must not put back the run as it read it before.
    release();
    await polling;
    expect(src.snapshot().runs[x.run_id]!.usage.tokens).toBe(9000);
    expect(src.snapshot().runs[x.run_id]!.last_seq).toBe(7);
  });
});

describe('the poller keeps the screen current', () => {
  it('`more` goes back to false once the list is under the cap again', async () => {
    const k = new FakeKernel();
    k.pageSize = 500;
    for (let i = 1; i <= LIST_ALL_CAP + 1; i++) k.add(approval(i));
    const src = new InboxSource({ api: new ApprovalsApi({ baseUrl: 'http://kernel.test:7401', fetch: k.fetch }), actor: FIN, intervalMs: 3_600_000 });
    await src.refresh();
    expect(src.snapshot().more).toBe(true);
    k.decideAs(approval(LIST_ALL_CAP + 1).approval_id, 'approved', { id: 'fin-2', role: 'finance' }, '');
    await src.refresh();
    expect(src.snapshot().approvals).toHaveLength(LIST_ALL_CAP);
    expect(src.snapshot().more).toBe(false);
    src.stop();
  });

  it('the focused run refreshes every poll; a run whose state changed is handed over', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const b = k.add(approval(2));
    const src = new InboxSource({ api: new ApprovalsApi({ baseUrl: 'http://kernel.test:7401', fetch: k.fetch }), actor: FIN, intervalMs: 3_600_000 });
    await src.refresh();
    src.focus(a.run_id);
    await until(() => src.snapshot().events[a.run_id]);
    k.runs.set(a.run_id, runOf(a, { state: 'running', parked_reason: null }));
    await src.refresh();
    expect(src.snapshot().runs[a.run_id]!.state).toBe('running');
    // focus moves to a run read without events: read at once
    src.focus(b.run_id);
    await until(() => src.snapshot().events[b.run_id]);
    expect(src.snapshot().events[b.run_id]).toEqual(eventsOf());
  });

  it('the arguments column follows a reused list across the 24-column threshold and a reorder', async () => {
    const a1 = approval(1, { action: { tool: 't', args: { id: 'X1', n: 1 } } });
    const a2 = approval(2, { action: { tool: 't', args: { id: 'X2', n: 1 } } });
    const items = [{ approval: a2 }, { approval: a1 }];
    const t = renderTui(<ApprovalList items={items} selected={0} rows={5} width={100} now={0} />);
    await t.waitFor('{"id":"X2","n":1}');
    t.rerender(<ApprovalList items={items} selected={0} rows={5} width={50} now={0} />);
    await t.waitFor((f) => f.includes('X2 · 1') && !f.includes('"id"'));
    t.rerender(<ApprovalList items={[{ approval: a1 }, { approval: a2 }]} selected={0} rows={5} width={100} now={0} />);
    await t.waitFor((f) => f.indexOf('"X1"') >= 0 && f.indexOf('"X1"') < f.indexOf('"X2"'));
    t.unmount();
  });
});
