/**
 * What an approver reads before deciding (svc-approvals(1) THE INBOX, Keys; D 5.4): Enter opens
 * the selected approval whole on a screen of its own, the summary and every line of the
 * arguments wrapped rather than cut, scrolled by keys; a and r decide from there. The pane under
 * the list had room for a line of summary and a few lines of arguments: a long summary was cut
 * at 70 columns and deep arguments read "… 401 more lines", with no way to see the rest in the
 * inbox. And a terminal below the smallest size the inbox draws in says so on lines that fit,
 * instead of a screen the terminal wraps into garbage and a prompt that takes keys unseen.
 */
import stringWidth from 'string-width';
import { describe, expect, it, vi } from 'vitest';
import type { Approval } from '../../cli/tui/approvals-api.js';
import { ApprovalList } from '../../cli/tui/ApprovalList.js';
import { detailKeyLine, Inbox, keyLine, type InboxProps } from '../../cli/tui/Inbox.js';
import { approval, inboxProps, runOf } from './fake-kernel.js';
import { KEY, renderTui } from './render.js';

const SUMMARY = 'Refund the duplicate charge on the March invoice. '.repeat(12) + 'THE END OF THE SUMMARY';

/** Arguments 30 levels deep, with a list of 40 lines and a long string at the bottom. */
function deepArgs(): Record<string, unknown> {
  let deep: Record<string, unknown> = { leaf: 'the bottom of it: 退款 🎉 ' + 'x'.repeat(150) };
  for (let d = 0; d < 30; d++) deep = { [`level_${d}`]: deep };
  return { invoice_id: 'INV-9', amount: 250, lines: Array.from({ length: 40 }, (_, k) => ({ sku: `SKU-${k}` })), deep, last_member: 'LAST' };
}

const long = () => approval(2, { action: { tool: 'billing.refund', args: deepArgs(), summary: SUMMARY, writes: true, system_of_record: true } });

function setup(approvals: Approval[], over: Partial<InboxProps> = {}) {
  const props = inboxProps(approvals, over);
  return { props, t: renderTui(<Inbox {...props} />) };
}

/** Every line within `width` columns, at most `rows` lines. */
function expectFits(frame: string, width: number, rows: number): string[] {
  const lines = frame.split('\n');
  expect(lines.length, frame).toBeLessThanOrEqual(rows);
  for (const l of lines) expect(stringWidth(l), `${stringWidth(l)} columns: ${l}`).toBeLessThanOrEqual(width);
  return lines;
}

/** Scrolls the detail view to its end a page at a time, collecting every line shown. */
async function readAll(t: ReturnType<typeof renderTui>, width: number, rows: number): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < 400; i++) {
    const lines = expectFits(t.frame(), width, rows);
    const at = lines.findIndex((l) => /^── \d+–\d+ of \d+ lines/.test(l));
    // Pages overlap by a line: each is put at the lines it says it shows.
    const from = Number(/^── (\d+)–/.exec(lines[at]!)![1]);
    lines.slice(2, at).forEach((l, k) => (seen[from - 1 + k] = l));
    if (!/ ↓ ─/.test(lines[at] ?? '')) return seen;
    await t.press(' ');
  }
  throw new Error('never reached the end');
}

describe('svc-approvals(1) THE INBOX: Enter shows the selected approval whole (D 5.4)', () => {
  it('at 80×24: the whole summary and every argument, wrapped to the width, scrolled with Space/PgDn, j/k, G/g', async () => {
    const { t } = setup([long(), approval(1)]);
    let f = await t.waitFor('Args');
    // The pane under the list cuts both.
    expect(f).toMatch(/… \d+ more lines/);
    expect(f).not.toContain('THE END OF THE SUMMARY');
    expect(f).toContain('Enter details');
    await t.press(KEY.enter);
    f = await t.waitFor(/── 1–\d+ of \d+ lines ↓/);
    const lines = expectFits(f, 80, 23);
    expect(lines[0]).toMatch(/^svc approvals · role:finance · 2 pending/);
    expect(lines[2]).toBe('apr_01JTEST000000000000000002 · step refund · asked 3m ago');
    expect(lines[4]).toMatch(/^Summary {3}Refund the duplicate charge/);
    expect(lines.at(-1)).toBe(detailKeyLine(80));

    const all = await readAll(t, 80, 23);
    const text = all.join('\n');
    // The summary whole, over several lines, none cut.
    expect(text.replace(/\n {10}/g, ' ')).toContain(SUMMARY);
    expect(all.filter((l) => l.includes('…'))).toEqual([]);
    // Every one of the 40 list members and the deepest level, its long string wrapped.
    for (let k = 0; k < 40; k++) expect(text).toContain(`"sku": "SKU-${k}"`);
    expect(text).toContain('"level_0": {');
    // Nested deeper than the width leaves room for: 20 columns of text a line, wrapped.
    expect(text.replace(/\s+/g, '')).toContain(`"leaf":"thebottomofit:退款🎉${'x'.repeat(150)}"`);
    expect(text).toContain('"last_member": "LAST"');
    expect(text).toMatch(/Rule\s+refunds\/large_refund → role:finance/);
    expect(text).toMatch(/Events\s+#1 run\.created/);
    expect(t.frame()).toMatch(/── \d+–(\d+) of \1 lines ─/);

    // G and g: the ends; k and j: a line.
    await t.press('g');
    expect(t.frame()).toMatch(/── 1–18 of \d+ lines ↓/);
    await t.press('j', 'j', 'k');
    expect(t.frame()).toMatch(/── 2–19 of \d+ lines ↓/);
    await t.press('G');
    expect(t.frame()).toMatch(/── \d+–(\d+) of \1 lines ─/);
    expect(t.frame()).toMatch(/Events\s+#1 run\.created/);
    await t.press(KEY.down, KEY.down);
    expect(t.frame()).toMatch(/── \d+–(\d+) of \1 lines ─/);

    // Esc: back to the list, on the same approval.
    await t.press(KEY.escape);
    f = await t.waitFor('Enter details');
    expect(f.split('\n').find((l) => l.startsWith('›'))).toContain('"invoice_id":"INV-9"');
  });

  it('G with the Enter that opens the view (one chunk, as pasted or typed fast) goes to the end', async () => {
    const { t } = setup([long(), approval(1)]);
    await t.waitFor('Args');
    t.stdin.write('\rG');
    expect(await t.waitFor(/── \d+–(\d+) of \1 lines ─/)).toMatch(/Events\s+#1 run\.created/);
    await t.press('k');
    expect(t.frame()).toMatch(/ ↓ ─/);
  });

  it('deep nesting at 40 columns keeps 20 columns of text on every line, within the width', async () => {
    const { t } = setup([long()], { width: 40, height: 11 });
    // Too short for the pane under the list: Enter is how its details are read.
    expect(await t.waitFor('q quit')).toContain('details need 6 more rows; Enter');
    await t.press(KEY.enter);
    await t.waitFor(/lines ↓/);
    const all = await readAll(t, 40, 11);
    const text = all.join('\n');
    expect(text).toContain('"level_0": {');
    expect(text).toContain('"last_member":');
    expect(t.frame().split('\n').at(-1)).toBe('a approve · r reject · Esc back · q quit');
  });

  it('a and r decide from the detail view; Esc in the prompt returns to the line it was on', async () => {
    const { t, props } = setup([long(), approval(1)]);
    await t.waitFor('Args');
    await t.press(KEY.enter, ' ', ' ');
    const at = /── (\d+–\d+) of/.exec(t.frame())![1];
    await t.press('r');
    let f = await t.waitFor('Reason (required)');
    expect(f).toContain('Reject billing.refund (apr_01JTEST000000000000000002)?');
    expect(expectFits(f, 80, 23)[0]).toMatch(/^svc approvals/);
    await t.press(KEY.escape);
    f = await t.waitFor(detailKeyLine(80));
    expect(f).toContain(`── ${at} of`);
    await t.press('a');
    await t.waitFor('Reason (optional)');
    await t.type('read it all');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledWith(expect.objectContaining({ approval_id: 'apr_01JTEST000000000000000002' }), 'approved', 'read it all');
    await t.waitFor('Enter details');
  });

  it('an approval decided elsewhere while it is open says so, and a and r do nothing', async () => {
    const props = inboxProps([long(), approval(1)]);
    const t = renderTui(<Inbox {...props} />);
    await t.waitFor('Args');
    await t.press(KEY.enter);
    await t.waitFor(/lines ↓/);
    const rest = [approval(1)];
    t.rerender(<Inbox {...props} approvals={rest} runs={{ [rest[0]!.run_id]: runOf(rest[0]!) }} />);
    const f = await t.waitFor('No longer pending');
    expect(f).toContain('Esc back to the list');
    expect(f.split('\n').at(-1)).toBe(detailKeyLine(80, false));
    await t.press('G');
    expect(t.frame()).toMatch(/Run\s+run_01JTEST000000000000000002 · no longer pending/);
    await t.press('a', 'r');
    expect(t.frame()).not.toContain('Reason (');
    await t.press(KEY.escape);
    const list = await t.waitFor('Enter details');
    expect(list.split('\n').find((l) => l.startsWith('›'))).toContain('"invoice_id":"INV-1"');
    expect(props.onDecide).not.toHaveBeenCalled();
  });
});

describe('svc-approvals(1) THE INBOX: a terminal under 40×12', () => {
  for (const [w, h] of [
    [20, 5],
    [39, 23],
    [80, 10],
    [12, 1],
  ] as const) {
    it(`${w}×${h + 1} says it is too small on lines that fit, and takes no key but q`, async () => {
      const { t, props } = setup([approval(2), approval(1)], { width: w, height: h });
      const f = await t.waitFor(/×/);
      expectFits(f, w, h);
      expect(f).toMatch(new RegExp(`${w}×${h + 1}`));
      await t.press('a', KEY.enter, 'r', 'x', KEY.enter);
      expect(props.onDecide).not.toHaveBeenCalled();
      expect(props.onQuit).not.toHaveBeenCalled();
      await t.press('q');
      expect(props.onQuit).toHaveBeenCalled();
    });
  }

  it('a prompt open when the terminal shrinks takes no keys until it is seen again', async () => {
    const props = inboxProps([approval(1)]);
    const t = renderTui(<Inbox {...props} />);
    await t.waitFor('Args');
    await t.press('r');
    await t.waitFor('Reason (required)');
    t.rerender(<Inbox {...props} width={30} height={8} />);
    await t.waitFor('Too small');
    await t.press('q', 'o', 'o', KEY.enter);
    expect(props.onDecide).not.toHaveBeenCalled();
    expect(props.onQuit).not.toHaveBeenCalled();
    t.rerender(<Inbox {...props} />);
    const f = await t.waitFor('Reason (required)');
    expect(f).toMatch(/Reason \(required\):\s*$/m);
  });

  it('draws the list at 40×12 itself', async () => {
    const { t } = setup([approval(2), approval(1)], { width: 40, height: 11 });
    const lines = expectFits(await t.waitFor('q quit'), 40, 11);
    expect(lines[0]).toMatch(/^svc approvals/);
  });
});

describe('svc-approvals(1) Screens: the status screens fit the terminal\'s height too', () => {
  const cases = {
    'a long error message': { state: 'error', url: 'http://127.0.0.1:7401', code: 'internal', message: 'proxy said: ' + 'x'.repeat(2000), attempts: 3 },
    'a long address': { state: 'unreachable', url: `http://${'svcd-'.repeat(20)}.example.com:7401`, error: 'ENOTFOUND', attempts: 12, since: '2026-01-01T10:04:00.000Z' },
  } as const;
  for (const [what, connection] of Object.entries(cases)) {
    for (const [w, h] of [
      [40, 11],
      [80, 11],
      [80, 23],
    ] as const) {
      it(`${what} at ${w}×${h + 1}: title, cut text and q quit in sight`, async () => {
        const { t } = setup([approval(1)], { width: w, height: h, connection });
        const lines = expectFits(await t.waitFor('q quit'), w, h);
        expect(lines[1]).toMatch(/│ (svcd at|Cannot reach svcd at)/);
        expect(lines.at(-2)).toMatch(/│ q quit/);
        if (connection.state === 'error') expect(lines.join('\n')).toMatch(/x… +│/);
      });
    }
  }
});

describe('the lines around the list', () => {
  it('the more line puts two spaces between its parts, none doubled where one is missing', async () => {
    const items = Array.from({ length: 30 }, (_, i) => ({ approval: approval(30 - i) }));
    const now = Date.parse('2026-01-01T11:00:00.000Z');
    const at = (selected: number) => renderTui(<ApprovalList items={items} selected={selected} rows={4} width={80} now={now} />).frame().split('\n').at(-1);
    expect(at(29)).toBe('  ↑ 27 more  (30/30)');
    expect(at(0)).toBe('  ↓ 27 more  (1/30)');
    expect(at(10)).toBe('  ↑ 9 more  ↓ 18 more  (11/30)');
  });

  it('the keys lines name Enter details and Esc back where they fit, and end in q quit', () => {
    expect(keyLine(80, false)).toBe('↑↓/jk move · Enter details · a approve · r reject · / filter · q quit');
    expect(detailKeyLine(80)).toBe('↑↓/jk scroll · PgUp/PgDn page · a approve · r reject · Esc back · q quit');
    for (const w of [80, 60, 40]) {
      for (const line of [detailKeyLine(w), detailKeyLine(w, false), keyLine(w, true)]) {
        expect(stringWidth(line), line).toBeLessThanOrEqual(w);
        expect(line).toMatch(/q quit$/);
      }
    }
  });

  it('Enter on an empty filter result does nothing', async () => {
    const onFocus = vi.fn();
    const { t } = setup([approval(1)], { onFocus });
    await t.waitFor('Args');
    await t.press('/');
    await t.type('nomatch');
    await t.press(KEY.enter, KEY.enter);
    expect(t.frame()).toContain('No pending approval matches');
  });
});

describe('an approval asked for by a condition that failed closed says so (D 5.1; svc-approvals(1) THE INBOX)', () => {
  const failed = () =>
    approval(3, {
      rule: 'typo/big',
      errors: [
        { rule: 'typo/big', message: "no such key: amout" },
        { rule: 'typo/other', message: 'condition evaluated to a string, not a bool' },
      ],
    });

  it('the pane puts the first failure on the Rule line; the whole view lists every one', async () => {
    const { t } = setup([failed()]);
    const pane = await t.waitFor('Args');
    expect(pane).toMatch(/Rule\s+typo\/big → role:finance · 2 conditions failed closed: typo\/big: /);
    await t.press(KEY.enter);
    const whole = await t.waitFor('Esc back');
    expect(whole).toMatch(/^Failed\s+typo\/big: no such key: amout$/m);
    expect(whole).toMatch(/^\s+typo\/other: condition evaluated to a string, not a bool$/m);
  });

  it('an approval with no failed condition shows the rule alone and no Failed line', async () => {
    const { t } = setup([approval(1)]);
    const pane = await t.waitFor('Args');
    expect(pane).toMatch(/Rule\s+refunds\/large_refund → role:finance\s*$/m);
    await t.press(KEY.enter);
    const whole = await t.waitFor('Esc back');
    expect(whole).toMatch(/^Rule\s+refunds\/large_refund → role:finance$/m);
    expect(whole).not.toMatch(/^Failed/m);
  });
});
