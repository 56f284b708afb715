/**
 * The inbox screen (issue 5; interface 2.8, 4.1; decisions 5.4, §6, §7): list, move, approve,
 * reject with a reason, filter, empty/unreachable/error screens and the lost-race alert, with
 * data and callbacks as props, all through the one render helper.
 */
import stringWidth from 'string-width';
import { describe, expect, it, vi } from 'vitest';
import type { Approval } from '../../cli/tui/approvals-api.js';
import { argsText, cell, fit, listArgsTexts } from '../../cli/tui/format.js';
import { Inbox, keyLine, type InboxProps } from '../../cli/tui/Inbox.js';
import type { Connection } from '../../cli/tui/inbox-source.js';
import { approval, inboxProps, runOf } from './fake-kernel.js';
import { KEY, renderTui } from './render.js';

const NOW = Date.parse('2026-01-01T10:05:00.000Z');
const OK: Connection = { state: 'ok', at: '2026-01-01T10:05:00.000Z' };

function setup(approvals: Approval[], over: Partial<InboxProps> = {}) {
  const props = inboxProps(approvals, { height: 24, connection: OK, now: NOW, ...over });
  return { props, t: renderTui(<Inbox {...props} />) };
}

/** Three pending approvals, newest (3) first, as the data layer hands them over. */
const three = () => [approval(3), approval(2), approval(1, { action: { tool: 'crm.export', args: { list: 'all' }, summary: 'Export all contacts' }, rule: 'crm/export_all' })];

function selectedLine(frame: string): string {
  return frame.split('\n').find((l) => l.startsWith('›')) ?? '';
}

describe('svc approvals inbox: list and detail (I 2.8, D 5.4, D §6, D §7)', () => {
  it('lists pending approvals newest first and details the selected one', async () => {
    const { t } = setup(three());
    const f = await t.waitFor('Args');
    expect(f).toContain('svc approvals · role:finance · 3 pending');
    expect(f).toContain('as fin-1');
    const rows = f.split('\n').slice(1, 4);
    // Each row: age, tool, requester and the arguments (what will run, whatever the summary a
    // model may have written says), so that approvals of one tool, requester and rule are told
    // apart; the summary and the rule are in the detail pane.
    expect(rows[0]).toMatch(/^› 2m\s+billing\.refund\s+alice\s+\{"invoice_id":"INV-3","amount":103\}\s*$/);
    expect(rows[1]).toMatch(/^ {2}3m\s+billing\.refund\s+alice\s+\{"invoice_id":"INV-2","amount":102\}\s*$/);
    expect(rows[2]).toMatch(/^ {2}4m\s+crm\.export\s+alice\s+\{"list":"all"\}\s*$/);
    // The action: tool, summary and args pretty-printed.
    expect(f).toContain('apr_01JTEST000000000000000003 · step refund · asked 2m ago');
    expect(f).toMatch(/Action\s+billing\.refund {2}\(write, system of record\)/);
    expect(f).toMatch(/Summary\s+Refund 103 USD on INV-3/);
    expect(f).toMatch(/Args\s+\{\n\s+"invoice_id": "INV-3",\n\s+"amount": 103\n\s+\}/);
    // The rule that asked, the run, requester, department, usage against budget, events.
    expect(f).toMatch(/Rule\s+refunds\/large_refund → role:finance/);
    expect(f).toMatch(/Run\s+run_01JTEST000000000000000003 · parked \(human\)/);
    expect(f).toMatch(/Workflow\s+refunds@1\.2\.0 \/ refund · dept support/);
    expect(f).toMatch(/Request\s+alice \(role:support, manager role:finance\)/);
    expect(f).toMatch(/Usage\s+1,200 \/ 10,000 tokens · \$0\.12 \/ \$5\.00/);
    expect(f).toMatch(/Events\s+#1 run\.created {2}#2 step\.leased {2}#3 step\.completed {2}#4 step\.leased/);
    expect(f).toContain('#6 approval.requested');
    expect(f).toContain('a approve · r reject · / filter · q quit');
  });

  it('moves with ↓/↑ and j/k, stops at the ends, and focuses the selected run', async () => {
    const { t, props } = setup(three());
    await t.waitFor('INV-3');
    await t.press(KEY.down);
    expect(t.frame()).toContain('"invoice_id": "INV-2"');
    await t.press('j');
    expect(t.frame()).toMatch(/Action\s+crm\.export/);
    expect(selectedLine(t.frame())).toContain('crm.export');
    await t.press('j', KEY.down);
    expect(selectedLine(t.frame())).toContain('crm.export');
    await t.press('k');
    expect(t.frame()).toContain('"invoice_id": "INV-2"');
    await t.press(KEY.up, KEY.up);
    expect(t.frame()).toContain('"invoice_id": "INV-3"');
    const focused = vi.mocked(props.onFocus!).mock.calls.map((c) => c[0]?.approval_id);
    expect(focused).toEqual(['apr_01JTEST000000000000000003', 'apr_01JTEST000000000000000002', 'apr_01JTEST000000000000000001', 'apr_01JTEST000000000000000002', 'apr_01JTEST000000000000000003']);
  });

  it('keys that arrive together act one at a time, as typed: "jj" moves twice, "/crm" filters', async () => {
    const { t } = setup(three());
    await t.waitFor('INV-3');
    await t.press('jj'); // one write: what a fast typist or a paste over ssh delivers
    expect(selectedLine(t.frame())).toContain('crm.export');
    await t.press('k/crm');
    expect(t.frame()).toContain('filter "crm" 1/3');
  });

  it('keeps the selection on the same approval when a refresh adds a newer one', async () => {
    const list = three();
    const { t, props } = setup(list);
    await t.press(KEY.down);
    expect(selectedLine(t.frame())).toContain('3m');
    const newer = [approval(4), ...list];
    t.rerender(<Inbox {...props} approvals={newer} runs={{ ...props.runs, [newer[0]!.run_id]: runOf(newer[0]!) }} />);
    await t.waitFor('4 pending');
    expect(t.frame()).toContain('"invoice_id": "INV-2"');
  });

  it('the first approval shown stays selected, before any key, when a newer one arrives (a refund read is the one approved)', async () => {
    const list = three();
    const { t, props } = setup(list);
    await t.waitFor('"invoice_id": "INV-3"');
    const newer = [approval(4), ...list];
    t.rerender(<Inbox {...props} approvals={newer} runs={{ ...props.runs, [newer[0]!.run_id]: runOf(newer[0]!) }} />);
    await t.waitFor('4 pending');
    expect(t.frame()).toContain('"invoice_id": "INV-3"');
    await t.press('a');
    await t.waitFor('Approve billing.refund (apr_01JTEST000000000000000003)?');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000003' }), 'approved', '');
  });

  it('when the selected approval leaves, the one now in its row is selected and stays so when a newer one arrives', async () => {
    const list = three();
    const { t, props } = setup(list);
    await t.press(KEY.down);
    await t.waitFor('"invoice_id": "INV-2"');
    const rest = [list[0]!, list[2]!]; // INV-2 was decided elsewhere
    t.rerender(<Inbox {...props} approvals={rest} />);
    await t.waitFor('2 pending');
    expect(t.frame()).toContain('apr_01JTEST000000000000000001 · step');
    const newer = [approval(4), ...rest];
    t.rerender(<Inbox {...props} approvals={newer} runs={{ ...props.runs, [newer[0]!.run_id]: runOf(newer[0]!) }} />);
    await t.waitFor('3 pending');
    expect(t.frame()).toContain('apr_01JTEST000000000000000001 · step');
    await t.press('r');
    await t.waitFor('Reject crm.export (apr_01JTEST000000000000000001)?');
  });
});

describe('svc approvals inbox: deciding (I 4.1 POST /approvals/{id}, D 5.4)', () => {
  it('a opens an approve prompt; Enter approves the selected approval', async () => {
    const { t, props } = setup(three());
    await t.press(KEY.down, 'a');
    const f = await t.waitFor('Approve billing.refund (apr_01JTEST000000000000000002)?');
    expect(f).toContain('Enter approve · Esc cancel');
    expect(f).toContain('Reason (optional):');
    await t.type('ok');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledTimes(1);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000002' }), 'approved', 'ok');
    expect(t.frame()).toContain('a approve · r reject');
  });

  it('r asks for a reason, refuses an empty one, and rejects with the reason typed', async () => {
    const { t, props } = setup(three());
    await t.press('r');
    await t.waitFor('Reject billing.refund (apr_01JTEST000000000000000003)?');
    expect(t.frame()).toContain('Reason (required):');
    await t.press(KEY.enter);
    expect(t.frame()).toContain('a reason is required to reject');
    expect(props.onDecide).not.toHaveBeenCalled();
    await t.type('duplicate refx');
    await t.press(KEY.backspace);
    await t.type('und');
    expect(t.frame()).toContain('Reason (required): duplicate refund');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000003' }), 'rejected', 'duplicate refund');
  });

  it('a burst of keys acts on the latest selection and decides once (no stale renders)', async () => {
    const { t, props } = setup(three());
    await t.waitFor('INV-3');
    t.stdin.write(KEY.down);
    t.stdin.write('a');
    await t.waitFor('Reason (optional):');
    t.stdin.write(KEY.enter);
    t.stdin.write(KEY.enter);
    await t.press();
    expect(props.onDecide).toHaveBeenCalledTimes(1);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000002' }), 'approved', '');
  });

  it('a pasted reason keeps its text on one line without control characters; Ctrl+U clears', async () => {
    const { t, props } = setup(three());
    await t.press('r');
    await t.waitFor('Reason (required):');
    await t.type('wrong');
    await t.press('\u0015');
    expect(t.frame()).toMatch(/Reason \(required\):\s*$/m);
    t.stdin.write('dup of\nINV-0\u0007 here');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledWith(expect.anything(), 'rejected', 'dup of INV-0 here');
  });

  it('a reason and its Enter arriving in one chunk (tmux send-keys "…" Enter, a script) decide at once (svc-approvals(1) Keys)', async () => {
    const { t, props } = setup(three());
    await t.press('r');
    await t.waitFor('Reason (required):');
    t.stdin.write('wrong invoice\r');
    await t.press();
    expect(props.onDecide).toHaveBeenCalledTimes(1);
    expect(props.onDecide).toHaveBeenCalledWith(expect.anything(), 'rejected', 'wrong invoice');
    // An Enter alone after a required reason was left empty still says so.
    const second = setup(three());
    await second.t.press('r');
    await second.t.waitFor('Reason (required):');
    second.t.stdin.write('  \r');
    await second.t.press();
    expect(second.props.onDecide).not.toHaveBeenCalled();
    expect(second.t.frame()).toContain('a reason is required to reject');
  });

  it('Esc cancels a prompt without deciding, and keys typed into it do not act', async () => {
    const { t, props } = setup(three());
    await t.press('r');
    await t.type('aq/');
    expect(t.frame()).toContain('Reason (required): aq/');
    await t.press(KEY.escape);
    await t.waitFor('a approve · r reject');
    expect(props.onDecide).not.toHaveBeenCalled();
    expect(props.onQuit).not.toHaveBeenCalled();
  });

  it('ignores a and r while a decision is in flight and shows what is happening', async () => {
    const { t, props } = setup(three(), { busy: 'Approving billing.refund (apr_01JTEST000000000000000003)…' });
    await t.press('a', 'r');
    expect(t.frame()).toContain('Approving billing.refund (apr_01JTEST000000000000000003)…');
    expect(t.frame()).not.toContain('Reason');
    expect(props.onDecide).not.toHaveBeenCalled();
  });

  it('shows the last decision as a notice', async () => {
    const { t } = setup(three(), { notice: { tone: 'success', text: 'Approved billing.refund (apr_x); run run_x is running' } });
    expect(await t.waitFor('Approved')).toContain('Approved billing.refund (apr_x); run run_x is running');
  });

  it('q quits', async () => {
    const { t, props } = setup(three());
    await t.press('q');
    expect(props.onQuit).toHaveBeenCalledTimes(1);
  });
});

describe('svc approvals inbox: filter', () => {
  it('/ filters live by tool; Enter keeps the filter, Esc clears it', async () => {
    const { t } = setup(three());
    await t.press('/');
    await t.type('crm');
    let f = t.frame();
    expect(f).toContain('filter "crm" 1/3');
    expect(f).not.toMatch(/billing\.refund {3,}/);
    expect(f).toMatch(/Action\s+crm\.export/);
    await t.press(KEY.enter);
    f = t.frame();
    expect(f).toContain('Esc clear filter');
    expect(f).toContain('filter "crm" 1/3');
    await t.press(KEY.escape);
    await t.waitFor('3 pending  ');
    expect(t.frame()).not.toContain('filter "');
  });

  it('matches run id, rule, requester, arguments and summary, and says when nothing matches', async () => {
    const list = three();
    const { t, props } = setup(list);
    const runs = { ...props.runs, [list[1]!.run_id]: runOf(list[1]!, { requested_by: { id: 'bob', role: 'sales', manager: 'finance' } }) };
    t.rerender(<Inbox {...props} runs={runs} />);
    await t.press('/');
    await t.type('BOB');
    expect(t.frame()).toContain('filter "BOB" 1/3');
    expect(t.frame()).toContain('"invoice_id": "INV-2"');
    await t.press(KEY.escape, '/');
    await t.type('000000000000000001');
    expect(t.frame()).toContain('1/3');
    expect(t.frame()).toMatch(/Action\s+crm\.export/);
    await t.press(KEY.escape, '/');
    await t.type('large_refund');
    expect(t.frame()).toContain('2/3');
    await t.type('zzz');
    expect(t.frame()).toContain('No pending approval matches "large_refundzzz"');
    // What a row shows can be typed: the arguments, and the summary the detail shows.
    for (const [typed, selected] of [
      ['inv-2', /"invoice_id": "INV-2"/],
      ['export all', /Action\s+crm\.export/],
    ] as const) {
      await t.press(KEY.escape, '/');
      await t.type(typed);
      expect(t.frame()).toContain(`filter "${typed}" 1/3`);
      expect(t.frame()).toMatch(selected);
    }
  });
});

describe('svc approvals inbox: status screens', () => {
  it('says the inbox is empty for the role', async () => {
    const { t } = setup([]);
    const f = await t.waitFor('No pending approvals');
    expect(f).toContain('No pending approvals for role:finance');
    expect(f).toContain('checked every 2\u00a0s'); // a no-break space: "2" and "s" stay on one line
    const narrow = setup([], { width: 60 });
    const nf = await narrow.t.waitFor('No pending approvals');
    expect(nf).toContain('2\u00a0s).');
    expect(nf).not.toMatch(/every 2 *│/);
  });

  it('names the URL of an unreachable daemon and says it keeps retrying', async () => {
    const { t, props } = setup(three(), {
      connection: { state: 'unreachable', url: 'http://127.0.0.1:7401', error: 'ECONNREFUSED', attempts: 3, since: '2026-01-01T10:04:00.000Z' },
    });
    const f = await t.waitFor('Cannot reach');
    expect(f).toContain('Cannot reach svcd at http://127.0.0.1:7401');
    expect(f).toContain('ECONNREFUSED; unreachable since 10:04:00Z (3 attempts)');
    expect(f).toContain('Retrying every 2 s');
    await t.press('q');
    expect(props.onQuit).toHaveBeenCalled();
  });

  it('ignores a and r on the unreachable screen; a prompt already open survives a blip, with a warning, in 24 rows', async () => {
    const down: Connection = { state: 'unreachable', url: 'http://127.0.0.1:7401', error: 'ECONNREFUSED', attempts: 1, since: '2026-01-01T10:04:00.000Z' };
    const { t, props } = setup(three(), { connection: down });
    await t.waitFor('Cannot reach');
    await t.press('a', 'r');
    expect(t.frame()).toContain('Cannot reach');
    t.rerender(<Inbox {...props} connection={OK} />);
    await t.press('r');
    await t.type('dup');
    t.rerender(<Inbox {...props} connection={down} />);
    const f = await t.waitFor('is not answering');
    expect(f).toContain('svcd at http://127.0.0.1:7401 is not answering; retrying');
    expect(f).toContain('Reason (required): dup');
    expect(f.split('\n').length).toBeLessThanOrEqual(24);
  });

  it('a prompt whose approval a refresh dropped says it is no longer pending, not "loading" (svc-approvals(1))', async () => {
    const { t, props } = setup(three());
    await t.press('r');
    await t.type('dup');
    // Decided elsewhere: the data layer drops the approval and its run.
    const rest = three().slice(1);
    t.rerender(<Inbox {...props} approvals={rest} runs={Object.fromEntries(rest.map((a) => [a.run_id, runOf(a)]))} />);
    const f = await t.waitFor('No longer pending');
    expect(f).toContain('No longer pending · Enter shows what became of it · Esc cancel');
    expect(f).toContain('run_01JTEST000000000000000003 · no longer pending');
    expect(f).not.toContain('loading');
    // What it showed of the run is gone for good: a dash, not the "…" of something loading.
    for (const label of ['Workflow', 'Request', 'Usage']) expect(f).toMatch(new RegExp(`^${label} +—$`, 'm'));
    expect(f).toContain('Reason (required): dup');
    expect(f.split('\n').length).toBeLessThanOrEqual(24);
    // No list row is marked meanwhile: the marker would point at another approval than the prompt's.
    expect(f.split('\n').some((l) => l.startsWith('›'))).toBe(false);
    // Enter still goes to the kernel, whose answer (409) the alert screen explains.
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000003' }), 'rejected', 'dup');
  });

  it('shows an error answer (401) with a hint', async () => {
    const { t } = setup([], { connection: { state: 'error', url: 'http://127.0.0.1:7401', code: 'unauthorized', message: 'missing or wrong bearer token', attempts: 1 } });
    const f = await t.waitFor('refused');
    expect(f).toContain('svcd at http://127.0.0.1:7401 refused the inbox: unauthorized');
    expect(f).toContain('--token or SVC_TOKEN');
  });

  it('says it is connecting before the first answer', async () => {
    const { t } = setup([], { connection: { state: 'connecting' }, loaded: false });
    expect(await t.waitFor('Connecting')).toContain('Connecting to svcd at http://127.0.0.1:7401');
  });

  it('explains a decision that lost a race (409 already_decided) until a key is pressed', async () => {
    const list = three();
    const current: Approval = { ...list[0]!, state: 'rejected', decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason: 'duplicate', decided_at: '2026-01-01T10:04:30.000Z' };
    const { t, props } = setup(list, { alert: { kind: 'lost_race', approval: list[0]!, attempted: 'approved', current } });
    const f = await t.waitFor('Too late');
    expect(f).toContain('Too late: apr_01JTEST000000000000000003 was already decided');
    expect(f).toContain('Rejected by fin-2 (role:finance) at 10:04:30Z.');
    expect(f).toContain('Your approval was not recorded.');
    expect(f).toContain('Reason: duplicate');
    expect(f).toContain('Press any key to continue');
    await t.press('x');
    expect(props.onDismissAlert).toHaveBeenCalledTimes(1);
    expect(props.onQuit).not.toHaveBeenCalled();
  });

  it("runs the actor requested show 'you' as the requester, and the detail says another approver must decide them (svc-approvals(1))", async () => {
    const { t } = setup(three(), { actor: { id: 'alice', role: 'finance' } });
    const f = await t.waitFor('Args');
    expect(selectedLine(f)).toMatch(/billing\.refund\s+you\s/);
    expect(f).toContain('you: another approver must decide it · alice (role:support');
    const other = setup(three());
    const g = await other.t.waitFor('Args');
    expect(selectedLine(g)).toMatch(/billing\.refund\s+alice\s/);
    expect(g).not.toContain('another approver must decide');
  });

  it('a reason cut to fit says where to read it whole in a form the frame can hold, down to 40 columns', async () => {
    const list = three();
    const current: Approval = { ...list[0]!, state: 'rejected', decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason: 'duplicate charge, '.repeat(200), decided_at: '2026-01-01T10:04:30.000Z' };
    for (const [width, hint] of [[80, 'Cut to fit: svc approvals list --state rejected --json shows it whole.'], [56, 'Cut: svc approvals list --state rejected --json'], [40, 'Cut: approvals list --state rejected']] as const) {
      const { t } = setup(list, { width, alert: { kind: 'lost_race', approval: list[0]!, attempted: 'approved', current } });
      const f = await t.waitFor('Too late');
      expect(f, `${width} columns`).toContain(hint);
      expect(f).not.toMatch(/Cut[^\n]*…/);
      t.unmount();
    }
  });

  it('an earlier decision of this inbox\'s that got there first is named as the actor\'s own, recorded, not "Too late" (svc-approvals(1) Screens)', async () => {
    const list = three();
    const current: Approval = { ...list[0]!, state: 'approved', decision: 'approved', actor: { id: 'fin-1', role: 'finance' }, reason: '', decided_at: '2026-01-01T10:04:58.000Z' };
    const { t, props } = setup(list, { alert: { kind: 'lost_race', approval: list[0]!, attempted: 'rejected', current, mine: true } });
    const f = await t.waitFor('Already approved by you');
    expect(f).toContain('Already approved by you: apr_01JTEST000000000000000003');
    expect(f).toContain('Your approval as fin-1, from this inbox at 10:04:58Z, was recorded.');
    expect(f).toContain('This rejection was not recorded: a decision is final.');
    expect(f).not.toContain('Too late');
    expect(f).not.toContain('Reason:');
    await t.press('x');
    expect(props.onDismissAlert).toHaveBeenCalledTimes(1);
  });

  it('explains an approval cancelled by an abandon', async () => {
    const list = three();
    const { t } = setup(list, { alert: { kind: 'lost_race', approval: list[0]!, attempted: 'rejected', current: { ...list[0]!, state: 'cancelled' } } });
    const f = await t.waitFor('cancelled');
    expect(f).toContain('Too late: apr_01JTEST000000000000000003 was cancelled');
    expect(f).toContain('Its run run_01JTEST000000000000000003 ended before anyone decided.');
    expect(f).toContain('Your rejection was not recorded.');
  });

  it('at 60 columns every sentence of an alert wraps whole, none cut, and the reason still fits 24 rows (svc-approvals(1) Screens)', async () => {
    const list = three();
    const decided: Approval = { ...list[0]!, state: 'rejected', decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason: 'duplicate charge, '.repeat(200), decided_at: '2026-01-01T10:04:30.000Z' };
    const mine: Approval = { ...decided, state: 'approved', decision: 'approved', actor: { id: 'fin-1', role: 'finance' }, reason: '' };
    const alerts = [
      { current: { ...list[0]!, state: 'cancelled' as const }, words: ['was cancelled', 'ended before anyone decided.', 'Your rejection was not recorded.'] },
      { current: decided, words: ['was already decided', 'Rejected by fin-2 (role:finance) at 10:04:30Z.', 'Cut: svc approvals list --state rejected --json'] },
      { current: mine, mine: true, words: ['Already approved by you:', 'Your approval as fin-1, from this inbox at 10:04:30Z, was recorded.', 'This rejection was not recorded: a decision is final.'] },
    ];
    for (const { current, mine: own, words } of alerts) {
      const { t } = setup(list, { width: 60, height: 24, alert: { kind: 'lost_race', approval: list[0]!, attempted: 'rejected', current, mine: own } });
      const f = await t.waitFor('continue');
      // The frame's text joined across its wrapped rows, as a reader reads it.
      const text = f
        .split('\n')
        .map((l) => l.replace(/^[│|]\s?|\s?[│|]$/g, '').trim())
        .join(' ');
      for (const w of words) expect(text, w).toContain(w);
      expect(f).not.toMatch(/decid…|recor…|Too late[^\n]*…/);
      expect(f.split('\n').length).toBeLessThanOrEqual(24);
      t.unmount();
    }
  });

  it('explains a refusal (403 not_the_approver)', async () => {
    const list = three();
    const { t } = setup(list, { alert: { kind: 'not_allowed', approval: list[0]!, attempted: 'rejected', why: 'fin-1 requested this run; a requester cannot approve their own run' } });
    const f = await t.waitFor('Not allowed');
    expect(f).toContain('Not allowed to decide apr_01JTEST000000000000000003');
    expect(f).toContain('fin-1 requested this run; a requester cannot approve their own run.');
    expect(f).toContain('Your rejection was not recorded (403 not_the_approver)');
  });
});

describe('svc approvals inbox: legible in 80×24', () => {
  const fits = (frame: string, rows = 24) => {
    const lines = frame.split('\n');
    expect(lines.length).toBeLessThanOrEqual(rows);
    for (const l of lines) expect(stringWidth(l)).toBeLessThanOrEqual(80);
  };

  it('keeps many approvals, long args and a prompt within 80 columns and 24 rows', async () => {
    const big = { rows: Array.from({ length: 40 }, (_, i) => ({ id: i, note: 'x'.repeat(120) })) };
    const list = Array.from({ length: 12 }, (_, i) => approval(12 - i, { action: { tool: 'warehouse.bulk_update_inventory_levels', args: big, summary: 'S'.repeat(200) }, rule: 'inventory/' + 'r'.repeat(90) }));
    const { t } = setup(list);
    let f = await t.waitFor('Args');
    fits(f);
    expect(f).toMatch(/↓ \d+ more/);
    expect(f).toMatch(/… \d+ more lines/);
    await t.press(...Array<string>(8).fill('j'));
    f = t.frame();
    fits(f);
    expect(f).toMatch(/↑ \d+ more/);
    expect(f).toContain('(9/12)');
    await t.press('r');
    f = await t.waitFor('Reason (required)');
    fits(f);
    await t.press(KEY.escape, '/');
    fits(await t.waitFor('Enter keep'));
  });

  it('a terminal too short for the detail pane keeps the header, the list and the keys in sight', async () => {
    const list = Array.from({ length: 12 }, (_, i) => approval(12 - i));
    // (40×11: the smallest the inbox draws in, a 40×12 terminal; detail-view.test.tsx has smaller ones.)
    for (const [w, h] of [[60, 15], [40, 11], [80, 12]] as const) {
      const { t } = setup(list, { width: w, height: h });
      const f = await t.waitFor('svc approvals');
      const lines = f.split('\n');
      expect(lines.length, f).toBeLessThanOrEqual(h);
      expect(lines[0]).toMatch(/^svc approvals/);
      expect(lines[1]).toMatch(/^› /);
      expect(f).toMatch(/details need \d+ more rows?/);
      expect(lines.at(-1)).toMatch(/^(↑↓\/jk move|↑↓ move|a approve) .* q quit$/); // the way out stays in sight
      await t.press('r');
      const p = await t.waitFor('Reason (required)');
      expect(p.split('\n').length, p).toBeLessThanOrEqual(h);
      await t.press(KEY.escape);
    }
  });

  it('status screens fit too', async () => {
    const { t } = setup([], { connection: { state: 'unreachable', url: 'http://' + 'h'.repeat(100) + ':7401', error: 'E'.repeat(200), attempts: 1, since: '2026-01-01T10:04:00.000Z' } });
    const f = await t.waitFor('Cannot reach');
    for (const l of f.split('\n')) expect(stringWidth(l)).toBeLessThanOrEqual(80);
  });

  it('neutralises terminal escape sequences that come in the data', async () => {
    const evil = approval(1, { action: { tool: 'x.y\u001B[2J', args: { a: '\u009B31m' }, summary: 'hi\u001B]0;pwned\u0007' }, rule: 'r\u001B[31m' });
    const { t } = setup([evil]);
    await t.waitFor('Args');
    const raw = t.raw();
    expect(raw).not.toContain('\u001B[2J');
    expect(raw).not.toContain('\u001B]0;');
    expect(raw).not.toContain('\u009B');
    expect(t.frame()).toContain('x.y?[2J');
    // Invisible and reordering characters are shown, not obeyed: the arguments are what will run.
    const sly = approval(2, { action: { tool: 'billing.refund', args: { invoice_id: 'INV-\u200b2', note: '\u202eevil\u2066' }, summary: 'ok' } });
    const s = setup([sly]).t;
    await s.waitFor('Args');
    expect(s.raw()).not.toMatch(/[\u200b\u202e\u2066]/);
    expect(s.frame()).toContain('INV-\\u{200b}2');
    expect(s.frame()).toContain('\\u{202e}evil\\u{2066}');
  });
});

describe('what a list row shows of an approval', () => {
  it('is its arguments as one line of JSON, whatever its summary says', () => {
    expect(argsText(approval(1, { action: { tool: 'billing.refund', args: { amount: 180, invoice_id: 'INV-1' }, summary: 'a harmless label' } }))).toBe('{"amount":180,"invoice_id":"INV-1"}');
    expect(argsText(approval(1, { action: { tool: 'billing.refund' } as Approval['action'] }))).toBe('');
  });

  it('puts first the arguments that differ among approvals of one tool, so a cut row still tells them apart (svc-approvals(1))', async () => {
    // The same age and requester: only the arguments can tell the rows apart.
    const refund = (n: number, ticket: string) =>
      approval(n, {
        created_at: '2026-01-01T10:00:00.000Z',
        action: { tool: 'billing.refund', args: { amount: 180, invoice_id: 'inv_1001', reason: 'Charged twice for the March subscription', ticket_id: ticket }, summary: 's', writes: true, system_of_record: true },
      });
    const lone = approval(3, { action: { tool: 'crm.note', args: { b: 1, a: 2 }, summary: 's', writes: true, system_of_record: false } });
    const texts = listArgsTexts([refund(1, 'T-1'), refund(2, 'T-2'), lone]);
    expect(texts.get(refund(1, 'T-1').approval_id)).toBe('{"ticket_id":"T-1","amount":180,"invoice_id":"inv_1001","reason":"Charged twice for the March subscription"}');
    expect(texts.get(refund(2, 'T-2').approval_id)!.startsWith('{"ticket_id":"T-2",')).toBe(true);
    expect(texts.get(lone.approval_id)).toBe('{"b":1,"a":2}'); // alone of its tool: as given
    // The rows at 80 columns differ within what they show.
    const { t } = setup([refund(2, 'T-2'), refund(1, 'T-1')]);
    const rows = t.frame().split('\n').filter((l) => /^[› ] /.test(l) && l.includes('billing.refund'));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('{"ticket_id":"T-2"');
    expect(rows[1]).toContain('{"ticket_id":"T-1"');
    // At 40 columns the member's name would fill the column: the values alone, which still differ.
    expect(listArgsTexts([refund(1, 'T-1'), refund(2, 'T-2')], { valuesOnly: true }).get(refund(1, 'T-1').approval_id)).toBe('T-1 · 180 · inv_1001 · Charged twice for the March subscription');
    const narrow = setup([refund(2, 'T-2'), refund(1, 'T-1')], { width: 40 });
    const cut = narrow.t.frame().split('\n').filter((l) => /^[› ] /.test(l) && l.includes('billing.'));
    expect(cut).toHaveLength(2);
    expect(cut[0]).toMatch(/T-2 · 1/);
    expect(cut[1]).toMatch(/T-1 · 1/);
  });
});

describe('the keys line', () => {
  it('keeps q quit in sight at every width, taking its longest form that fits', () => {
    expect(keyLine(120, false)).toBe('↑↓/jk move · Enter details · a approve · r reject · / filter · q quit');
    for (const w of [50, 40, 30, 20]) {
      const line = keyLine(w, true);
      expect(stringWidth(line), line).toBeLessThanOrEqual(w);
      expect(line, `${w}`).toMatch(/q quit$/);
    }
  });
});

describe('cutting text to a width', () => {
  it('counts columns (an emoji takes two) and never leaves half a surrogate pair (more in wide-text.test.tsx)', () => {
    expect(fit('😀😀😀', 3)).toBe('😀…');
    expect(fit('😀😀', 4)).toBe('😀😀');
    expect(cell('😀', 3)).toBe('😀 ');
    expect(cell('abcdef', 4)).toBe('abc…');
  });
});
