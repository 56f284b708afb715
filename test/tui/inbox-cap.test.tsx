/**
 * The inbox reads at most LIST_ALL_CAP pending approvals; when more are pending it says so
 * rather than showing "1000 pending" for 3,333 (the scale sweep).
 */
import { describe, expect, it } from 'vitest';
import { ApprovalsApi, LIST_ALL_CAP } from '../../cli/tui/approvals-api.js';
import { Inbox } from '../../cli/tui/Inbox.js';
import { InboxSource } from '../../cli/tui/inbox-source.js';
import { FakeKernel, approval, inboxProps } from './fake-kernel.js';
import { renderTui } from './render.js';

const FIN = { id: 'fin-1', role: 'finance' };
const api = (k: FakeKernel) => new ApprovalsApi({ baseUrl: 'http://kernel.test:7401/', fetch: k.fetch });

describe('inbox over more pending approvals than it lists', () => {
  it('keeps the newest LIST_ALL_CAP and marks the list as cut', async () => {
    const k = new FakeKernel();
    for (let i = 1; i <= LIST_ALL_CAP + 5; i++) k.add(approval(i));
    const src = new InboxSource({ api: api(k), actor: FIN, concurrency: 64 });
    await src.refresh();
    const s = src.snapshot();
    expect(s.approvals).toHaveLength(LIST_ALL_CAP);
    expect(s.approvals[0]!.approval_id).toBe(approval(LIST_ALL_CAP + 5).approval_id);
    expect(s.more).toBe(true);
  });

  it('does not mark a list that holds them all', async () => {
    const k = new FakeKernel();
    for (let i = 1; i <= LIST_ALL_CAP; i++) k.add(approval(i));
    const src = new InboxSource({ api: api(k), actor: FIN, concurrency: 64 });
    await src.refresh();
    expect(src.snapshot().approvals).toHaveLength(LIST_ALL_CAP);
    expect(src.snapshot().more).toBe(false);
  });

  it('says in the header that more are pending', async () => {
    const list = [approval(3), approval(2), approval(1)];
    const t = renderTui(<Inbox {...inboxProps(list, { height: 24, connection: { state: 'ok', at: '2026-01-01T10:05:00.000Z' }, more: true })} />);
    expect(await t.waitFor('pending')).toContain('svc approvals · role:finance · 3+ pending (newest 3 shown)');
  });
});

describe('the header of a list cut at its cap, at 80 columns', () => {
  it('still shows who acts and when svcd last answered', async () => {
    const list = Array.from({ length: LIST_ALL_CAP }, (_, i) => approval(LIST_ALL_CAP - i));
    const t = renderTui(<Inbox {...inboxProps(list, { height: 24, more: true })} />);
    const first = (await t.waitFor('pending')).split('\n')[0]!;
    expect(first).toContain('1000+ pending');
    expect(first).toContain('as fin-1');
  });
});
