/**
 * Wide characters in the inbox (svc-approvals(1) THE INBOX: the screen fits the terminal, all
 * but its last row, and a line is cut to the terminal's width): CJK text and emoji take two
 * columns, combining marks none. Cut by characters, a line of them was wider than the
 * terminal, wrapped, and the screen scrolled the header and the other rows away.
 */
import stringWidth from 'string-width';
import { describe, expect, it } from 'vitest';
import type { Approval } from '../../cli/tui/approvals-api.js';
import { cell, columns, fit, fitEnd, packTail, pad, wrap } from '../../cli/tui/format.js';
import { Inbox, keyLine, type InboxProps } from '../../cli/tui/Inbox.js';
import { approval, inboxProps } from './fake-kernel.js';
import { renderTui } from './render.js';

const WIDE = '退款请求：客户被重复收费两次…🎉🎉🎉'.repeat(4);

function setup(approvals: Approval[], over: Partial<InboxProps> = {}) {
  return renderTui(<Inbox {...inboxProps(approvals, over)} />);
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

  it('pad pads by columns and never cuts; wrap breaks after spaces or by wide characters, and cuts the last line it may take', () => {
    expect(pad('退款', 6)).toBe('退款  ');
    expect(pad('退款请求', 6)).toBe('退款请求');
    expect(wrap('hello world foo bar baz', 7)).toEqual({ lines: ['hello', 'world', 'foo bar', 'baz'], cut: false });
    expect(wrap('aaaaaaaaaaaa bb', 5, 2)).toEqual({ lines: ['aaaaa', 'aaaa…'], cut: true });
    expect(wrap('Reason: 退款请求退款', 10)).toEqual({ lines: ['Reason: 退', '款请求退款'], cut: false });
    expect(wrap('a b', 10, 1)).toEqual({ lines: ['a b'], cut: false });
    expect(wrap('🎉🎉🎉', 1).lines).toEqual(['🎉', '🎉', '🎉']); // wider than the width: one a line, never an endless loop
    for (const w of [1, 2, 3, 7, 20]) {
      const { lines } = wrap(WIDE + ' e\u0301'.repeat(20), w, 5);
      expect(lines.length).toBeLessThanOrEqual(5);
      for (const l of lines) expect(columns(l), l).toBeLessThanOrEqual(Math.max(w, 2));
    }
  });

  it('fitEnd keeps the end of a line being typed; packTail and the keys line count columns', () => {
    expect(fitEnd('退款请求', 5)).toBe('…请求');
    expect(fitEnd('退款请求', 8)).toBe('退款请求');
    expect(fitEnd('abc🎉', 3)).toBe('…🎉');
    for (const line of packTail(['#1 退款请求退款请求', '#2 退款请求', '#3 🎉🎉🎉🎉'], 20, 2)) expect(columns(line)).toBeLessThanOrEqual(20);
    for (const w of [20, 30, 50]) expect(columns(keyLine(w, true))).toBeLessThanOrEqual(w);
  });
});

describe('svc-approvals(1) THE INBOX, Screens: "Too late" with the other approver\'s reason as long as svcd takes', () => {
  const lost = (reason: string, actorId = 'fin-2') => {
    const a = approval(3);
    const current: Approval = { ...a, state: 'rejected', decision: 'rejected', actor: { id: actorId, role: 'finance' }, reason, decided_at: '2026-01-01T10:04:30.000Z' };
    return setup([a], { alert: { kind: 'lost_race', approval: a, attempted: 'approved', current } });
  };

  it('a 4096-character reason is wrapped and cut to fit 80×24, and the header and the way out stay in sight', async () => {
    const reason = ('duplicate refund of INV-3, already paid on 2025-12-30 by wire transfer; see ticket 8812. ').repeat(60).slice(0, 4096);
    const t = lost(reason);
    const lines = expectFits(await t.waitFor('Press any key'));
    expect(lines[1]).toContain('Too late: apr_01JTEST000000000000000003 was already decided');
    expect(lines.join('\n')).toContain('Rejected by fin-2 (role:finance) at 10:04:30Z.');
    expect(lines.join('\n')).toContain('Reason: duplicate refund of INV-3, already paid');
    // Readable: wrapped at spaces over several lines, then cut with … and a pointer to the whole of it.
    const reasonLines = lines.filter((l) => /INV-3|ticket|wire|already paid/.test(l));
    expect(reasonLines.length).toBeGreaterThan(3);
    expect(lines.join('\n')).toMatch(/…/);
    expect(lines.join('\n')).toContain('svc approvals list --state rejected --json');
    expect(lines.at(-2)).toContain('Press any key to continue');
  });

  it('a CJK and emoji reason is cut by the columns it takes, never inside a character', async () => {
    const reason = [...'重复退款：该发票已于十二月三十日通过电汇支付🎉'.repeat(200)].slice(0, 4096).join('');
    const t = lost(reason, '审批人-二号');
    const lines = expectFits(await t.waitFor('Press any key'));
    expect(lines[1]).toContain('Too late');
    expect(lines.join('\n')).toContain('Reason: 重复退款');
    expect(lines.join('\n')).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
  });

  it('a short reason shows whole, on one line, without a note', async () => {
    const t = lost('duplicate');
    const f = await t.waitFor('Press any key');
    expect(f).toContain('Reason: duplicate');
    expect(f).not.toContain('--json');
  });
});
