/**
 * An idle inbox over a full list costs next to nothing (the scale sweep of 2026-11-29: with
 * 3,333 pending for role:finance an open, untouched inbox used 21–85 % of a core and 400 MB,
 * growing). Measured in work, never time: requests per poll, snapshots handed to the screen,
 * renders, and passes over the whole list; and the list stays fresh all the same.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ApprovalsApi, INBOX_PAGE, LIST_ALL_CAP } from '../../cli/tui/approvals-api.js';
import { listArgsTexts } from '../../cli/tui/format.js';
import { InboxApp } from '../../cli/tui/InboxApp.js';
import { InboxSource, type InboxSnapshot } from '../../cli/tui/inbox-source.js';
import { ROOT } from '../helpers/daemon.js';
import { FakeKernel, approval, runOf } from './fake-kernel.js';
import { renderTui } from './render.js';

// The list's per-tool pass over every listed approval, counted.
vi.mock('../../cli/tui/format.js', async (importOriginal) => {
  const orig = await importOriginal<typeof import('../../cli/tui/format.js')>();
  return { ...orig, listArgsTexts: vi.fn(orig.listArgsTexts) };
});

const FIN = { id: 'fin-1', role: 'finance' };
const NOW = Date.parse('2026-01-01T10:05:00.000Z');

/** A fake svcd holding `n` pending approvals for role:finance, with svcd's largest page. */
function kernelWith(n: number): FakeKernel {
  const k = new FakeKernel();
  k.pageSize = 500;
  for (let i = 1; i <= n; i++) k.add(approval(i));
  return k;
}

function sourceOver(k: FakeKernel, over: { concurrency?: number } = {}): InboxSource {
  // No timer of its own: the tests poll with refresh().
  return new InboxSource({ api: new ApprovalsApi({ baseUrl: 'http://kernel.test:7401', fetch: k.fetch }), actor: FIN, intervalMs: 3_600_000, ...over });
}

async function settle(until: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !until(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!until()) throw new Error('condition not met');
}

describe('an idle inbox over 1000+ pending approvals', () => {
  it('reads the list in 2 requests a poll and the focused run, not every run again', async () => {
    const k = kernelWith(LIST_ALL_CAP + 5);
    const src = sourceOver(k, { concurrency: 16 });
    await src.refresh();
    const focused = src.snapshot().approvals[0]!;
    src.focus(focused.run_id);
    await settle(() => Boolean(src.snapshot().events[focused.run_id]));
    const from = k.calls.length;
    await src.refresh();
    const poll = k.calls.slice(from);
    const lists = poll.filter((c) => c.path === '/approvals');
    // Was 11 pages (10 of 100, and one of 1 to learn whether more are pending).
    expect(lists.map((c) => c.query.limit)).toEqual([String(INBOX_PAGE), String(INBOX_PAGE)]);
    expect(poll.filter((c) => c.path.startsWith('/runs/')).map((c) => c.path)).toEqual([`/runs/${focused.run_id}`, `/runs/${focused.run_id}/events`]);
    expect(src.snapshot().more).toBe(true);
  });

  it('hands the screen the same list, runs and events when nothing changed: one snapshot a poll, for its time', async () => {
    const k = kernelWith(LIST_ALL_CAP);
    const src = sourceOver(k, { concurrency: 16 });
    await src.refresh();
    const focused = src.snapshot().approvals[3]!;
    src.focus(focused.run_id);
    await settle(() => Boolean(src.snapshot().events[focused.run_id]));
    const before = src.snapshot();
    const seen: InboxSnapshot[] = [];
    src.subscribe((s) => seen.push(s));
    for (let i = 0; i < 3; i++) await src.refresh();
    // Was 2 a poll (the list, then the focused run read again), each with new objects throughout.
    expect(seen).toHaveLength(3);
    for (const s of seen) {
      expect(s.approvals).toBe(before.approvals);
      expect(s.runs).toBe(before.runs);
      expect(s.events).toBe(before.events);
      expect(s.connection.state).toBe('ok');
    }
  });

  it('still shows a new approval and drops a decided one within a poll, keeping the rest as they were', async () => {
    const k = kernelWith(300);
    const src = sourceOver(k, { concurrency: 16 });
    await src.refresh();
    const before = src.snapshot();
    const gone = before.approvals[100]!;
    k.decideAs(gone.approval_id, 'approved', { id: 'fin-2', role: 'finance' }, '');
    const added = k.add(approval(301));
    k.runs.set(before.approvals[5]!.run_id, runOf(before.approvals[5]!, { usage: { tokens: 9000, usd: 0.9 } }));
    src.focus(before.approvals[5]!.run_id);
    await src.refresh();
    const after = src.snapshot();
    expect(after.approvals).toHaveLength(300);
    expect(after.approvals[0]!.approval_id).toBe(added.approval_id);
    expect(after.approvals.some((a) => a.approval_id === gone.approval_id)).toBe(false);
    expect(after.runs[gone.run_id]).toBeUndefined();
    expect(after.runs[added.run_id]?.run_id).toBe(added.run_id);
    // The focused run is read again and its change shown; the others keep their objects.
    expect(after.runs[before.approvals[5]!.run_id]!.usage.tokens).toBe(9000);
    expect(after.approvals[2]).toBe(before.approvals[1]);
    expect(after.runs[before.approvals[7]!.run_id]).toBe(before.runs[before.approvals[7]!.run_id]);
  });

  it('hands the runs of a first load over in batches, not one snapshot per run', async () => {
    const k = kernelWith(LIST_ALL_CAP);
    const src = sourceOver(k, { concurrency: 4 });
    let snapshots = 0;
    src.subscribe(() => snapshots++);
    await src.refresh();
    expect(Object.keys(src.snapshot().runs)).toHaveLength(LIST_ALL_CAP);
    // Was 1001: the list, then one per run, each copying every run read so far.
    expect(snapshots).toBeLessThanOrEqual(1 + LIST_ALL_CAP / 50 + 1);
  });

  it('draws an idle poll once and does not pass over the whole list again', async () => {
    const k = kernelWith(LIST_ALL_CAP);
    let renders = 0;
    const source = sourceOver(k, { concurrency: 16 });
    const t = renderTui(
      <InboxApp
        source={source}
        width={100}
        height={30}
        now={() => {
          renders++;
          return NOW;
        }}
      />,
    );
    await t.waitFor('1000 pending');
    await settle(() => Object.keys(source.snapshot().runs).length === LIST_ALL_CAP && Object.keys(source.snapshot().events).length === 1);
    await t.waitFor('#6 approval.requested');
    const passes = vi.mocked(listArgsTexts);
    passes.mockClear();
    renders = 0;
    for (let i = 0; i < 3; i++) {
      await source.refresh();
      await new Promise((r) => setTimeout(r, 20));
    }
    // Was 2 renders a poll, each computing the arguments column over all 1000 approvals.
    expect(renders).toBeLessThanOrEqual(3);
    expect(passes).not.toHaveBeenCalled();
    // Moving the selection draws again without a pass over the list either.
    await t.press('j');
    await t.waitFor(/› .*INV-999"/);
    expect(passes).not.toHaveBeenCalled();
    // A new approval is a new list: one pass, and it shows.
    k.add(approval(LIST_ALL_CAP + 1));
    await source.refresh();
    await t.waitFor('1000+ pending');
    expect(passes.mock.calls.length).toBeGreaterThanOrEqual(1);
    t.unmount();
    source.stop();
  });
});

describe('the inbox process', () => {
  // React's development build logs every render whose props changed as a performance.measure
  // entry, with the props' diff, and Node keeps them all: the inbox grew by 2 MB a second.
  it('runs React without its development build, which keeps an entry for every render', () => {
    if (!existsSync(join(ROOT, 'dist/cli/tui/inbox-env.js'))) throw new Error('dist/cli/tui/inbox-env.js is missing: build first (npm run build)');
    const script = `
      import { PassThrough } from 'node:stream';
      const { inboxEnv } = await import(${JSON.stringify(join(ROOT, 'dist/cli/tui/inbox-env.js'))});
      inboxEnv();
      const React = (await import('react')).default;
      const { render, Text } = await import('ink');
      const stdout = Object.assign(new PassThrough(), { columns: 80, rows: 24 });
      const app = render(React.createElement(Text, null, 'n 0'), { stdout, patchConsole: false, exitOnCtrlC: false });
      for (let i = 1; i <= 20; i++) { app.rerender(React.createElement(Text, null, 'n ' + i)); await new Promise((r) => setTimeout(r, 1)); }
      app.unmount();
      console.log(JSON.stringify({ env: process.env.NODE_ENV, measures: performance.getEntriesByType('measure').length }));
    `;
    // NODE_ENV as a developer's shell (or this test runner) may have it.
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NODE_ENV: 'development' } });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toEqual({ env: 'production', measures: 0 });
  });
});
