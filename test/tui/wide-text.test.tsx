/**
 * Wide characters in the inbox (svc-approvals(1) THE INBOX: the screen fits the terminal, all
 * but its last row, and a line is cut to the terminal's width): CJK text and emoji take two
 * columns, combining marks none. Cut by characters, a line of them was wider than the
 * terminal, wrapped, and the screen scrolled the header and the other rows away.
 */
import stringWidth from 'string-width';
import { describe, expect, it, vi } from 'vitest';
import type { Approval } from '../../cli/tui/approvals-api.js';
import { cell, columns, fit, fitEnd, packTail } from '../../cli/tui/format.js';
import { Inbox, keyLine, type InboxProps } from '../../cli/tui/Inbox.js';
import { approval, eventsOf, runOf } from './fake-kernel.js';
import { renderTui } from './render.js';

const NOW = Date.parse('2026-01-01T10:05:00.000Z');
const WIDE = '退款请求：客户被重复收费两次…🎉🎉🎉'.repeat(4);

function setup(approvals: Approval[], over: Partial<InboxProps> = {}) {
  const props: InboxProps = {
    approver: 'role:finance',
    actor: { id: 'fin-1', role: 'finance' },
    url: 'http://127.0.0.1:7401',
    connection: { state: 'ok', at: '2026-01-01T10:05:00.000Z' },
    loaded: true,
    approvals,
    runs: Object.fromEntries(approvals.map((a) => [a.run_id, runOf(a)])),
    events: Object.fromEntries(approvals.map((a) => [a.run_id, eventsOf()])),
    // An 80×24 terminal: the inbox draws on all but its last row.
    width: 80,
    height: 23,
    now: NOW,
    onFocus: vi.fn(),
    onDecide: vi.fn(),
    onQuit: vi.fn(),
    ...over,
  };
  return renderTui(<Inbox {...props} />);
}

/** Every line within `width` columns as a terminal counts them, and no more than `rows` lines. */
function expectFits(frame: string, width = 80, rows = 23): string[] {
  const lines = frame.split('\n');
  expect(lines.length, frame).toBeLessThanOrEqual(rows);
  for (const l of lines) expect(stringWidth(l), `${stringWidth(l)} columns: ${l}`).toBeLessThanOrEqual(width);
  return lines;
}

const wide = (n: number, text: string) =>
  approval(n, { action: { tool: 'billing.refund', args: { reason: text, invoice_id: `INV-${n}`, amount: 180 }, summary: text, writes: true, system_of_record: true } });

describe('svc-approvals(1) THE INBOX: wide characters are cut by the columns they take', () => {
  it('CJK and emoji in the summary and args.reason: header, both rows, Summary and Args fit 80×24', async () => {
    const t = setup([wide(2, WIDE), approval(1)]);
    const lines = expectFits(await t.waitFor('Args'));
    expect(lines[0]).toMatch(/^svc approvals · role:finance · 2 pending\s+as fin-1/);
    expect(lines[1]).toMatch(/^› 3m\s+billing\.refund\s+alice\s+\{"reason":"退款请求/);
    expect(lines[1]!.endsWith('…')).toBe(true);
    expect(lines[2]).toMatch(/^ {2}4m\s+billing\.refund\s+alice\s+\{"invoice_id":"INV-1","amount":101\}/);
    const summary = lines.find((l) => l.startsWith('Summary'))!;
    expect(summary).toMatch(/^Summary {3}退款请求/);
    expect(summary.endsWith('…')).toBe(true);
    expect(lines.find((l) => l.includes('"reason": "退款请求'))!.endsWith('…')).toBe(true);
    expect(lines.at(-1)).toMatch(/q quit$/);

    // The other row selected, a reject prompt with a wide reason typed: still in bounds.
    await t.press('j');
    expectFits(await t.waitFor(/Summary\s+Refund 101 USD/));
    await t.press('k', 'r');
    await t.waitFor('Reason (required)');
    t.stdin.write('客户被重复收费🎉'.repeat(12));
    const prompt = expectFits(await t.waitFor('Reason (required): …'));
    expect(prompt.find((l) => l.startsWith('Reason (required): …'))).toMatch(/🎉\s*$/);
    expect(prompt[0]).toMatch(/^svc approvals · role:finance · 2 pending/);
  });

  it('combining accents and emoji sequences count as what they show, and are never split', async () => {
    const accents = 'Re\u0301sume\u0301 cafe\u0301 '.repeat(12); // é as e + U+0301: one column
    // Emoji of two code points each, two columns on screen. (A ZWJ sequence shows its joiners
    // as \u{200d}: clean() makes every format character visible.)
    const flags = '👍🏽🇯🇵 '.repeat(30);
    const t = setup([wide(3, accents), wide(2, flags), approval(1)]);
    const lines = expectFits(await t.waitFor('Args'));
    expect(lines[0]).toContain('3 pending');
    expect(lines.filter((l) => /^[› ] /.test(l) && l.includes('billing.refund'))).toHaveLength(3);
    const summary = lines.find((l) => l.startsWith('Summary'))!;
    // Cut at the width the accents take on screen (70 columns after the label), not their code points.
    expect(stringWidth(summary)).toBe(80);
    expect(summary).not.toMatch(/e…$/); // the accent stays with its letter
    await t.press('j');
    const f = expectFits(await t.waitFor(/Summary\s+👍🏽/u));
    const cut = f.find((l) => l.startsWith('Summary'))!;
    expect(cut).toMatch(/^Summary {3}(👍🏽🇯🇵 )+(👍🏽|👍🏽🇯🇵)?…$/u); // no modifier or half a flag left alone
    expect(stringWidth(cut)).toBeGreaterThanOrEqual(79);
  });

  it('a terminal too short or narrow for the details still fits, with wide data', async () => {
    for (const [w, h] of [[60, 15], [40, 12], [100, 30]] as const) {
      const t = setup([wide(2, WIDE), approval(1)], { width: w, height: h });
      const lines = expectFits(await t.waitFor('svc approvals'), w, h);
      expect(lines[0]).toMatch(/^svc approvals/);
      expect(lines.filter((l) => /^[› ] /.test(l) && l.includes('billing.'))).toHaveLength(2);
      t.unmount();
    }
  });
});

describe('cutting text to a width in columns (format.ts)', () => {
  it('fit and cell count columns and cut between graphemes', () => {
    expect(columns('退款🎉a')).toBe(7);
    expect(fit('😀😀😀', 2)).toBe('…'); // a second emoji would not leave room for the …
    expect(fit('😀😀', 4)).toBe('😀😀');
    expect(fit('ab😀cd', 4)).toBe('ab…');
    expect(fit('退款请求', 8)).toBe('退款请求');
    expect(fit('退款请求', 7)).toBe('退款请…');
    expect(fit('e\u0301'.repeat(10), 5)).toBe('e\u0301'.repeat(4) + '…');
    expect(fit('👩‍👩‍👧👩‍👩‍👧👩‍👩‍👧', 5)).toBe('👩‍👩‍👧👩‍👩‍👧…');
    expect(fit('🇯🇵🇯🇵🇯🇵', 4)).toBe('🇯🇵…');
    expect(fit('abc', 0)).toBe('');
    expect(fit('abc', 1)).toBe('…');
    expect(cell('😀', 3)).toBe('😀 ');
    expect(cell('退款请求', 6)).toBe('退款… ');
    expect(cell('abcdef', 4)).toBe('abc…');
    for (let w = 1; w <= 30; w++) expect(columns(fit(WIDE, w)), `width ${w}`).toBeLessThanOrEqual(w);
    for (let w = 1; w <= 30; w++) expect(columns(cell(WIDE, w)), `width ${w}`).toBe(w);
  });

  it('fitEnd keeps the end of a line being typed; packTail and the keys line count columns', () => {
    expect(fitEnd('退款请求', 5)).toBe('…请求');
    expect(fitEnd('退款请求', 8)).toBe('退款请求');
    expect(fitEnd('abc🎉', 3)).toBe('…🎉');
    for (const line of packTail(['#1 退款请求退款请求', '#2 退款请求', '#3 🎉🎉🎉🎉'], 20, 2)) expect(columns(line)).toBeLessThanOrEqual(20);
    for (const w of [20, 30, 50]) expect(columns(keyLine(w, true))).toBeLessThanOrEqual(w);
  });
});
