/**
 * svc(1) DESCRIPTION (text from the daemon in tables) and svc-approvals(1) COMMANDS list,
 * svc(1) Policies (svc policy test's ACTION column): tables are padded, and cells cut, by the
 * columns text takes on a terminal (CJK and emoji two, combining marks none), never by
 * UTF-16 units: a CJK tool name pushed every column after it out of line, and a cut split an
 * emoji into half a surrogate pair.
 */
import stringWidth from 'string-width';
import { describe, expect, it } from 'vitest';
import { actionView } from '../../cli/commands/policy.js';
import { eventLine } from '../../cli/commands/run.js';
import { table } from '../../cli/context.js';
import type { RunEvent } from '../../src/types.js';

/** The column each cell of a table line starts at, given the cells it holds. */
function starts(line: string, cells: string[]): number[] {
  let from = 0;
  return cells.map((c) => {
    const at = line.indexOf(c, from);
    expect(at, `${c} in ${line}`).toBeGreaterThanOrEqual(0);
    from = at + c.length;
    return stringWidth(line.slice(0, at));
  });
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe('svc(1) DESCRIPTION: a table lines its columns up by display width', () => {
  it('CJK, emoji, a flag, a skin tone and combining accents in cells keep every column in line', () => {
    const rows = [
      ['apr_1', '退款.审批', '财务部', 'refunds/large'],
      ['apr_2', 'billing.refund', '🎉🎉', 'r'],
      ['apr_3', '👍🏽🇯🇵 family', 'cafe\u0301', '规则/退款'],
      ['apr_4', 'x', 'y', 'z'],
    ];
    const headers = ['APPROVAL', 'TOOL', 'OWNER', 'RULE'];
    const lines = table(headers, rows).split('\n');
    expect(lines).toHaveLength(5);
    const want = starts(lines[0]!, headers);
    rows.forEach((r, i) => expect(starts(lines[i + 1]!, r), lines[i + 1]).toEqual(want));
    // The widest cell of a column (退款.审批, 9 columns, 5 characters) sets it, two spaces after.
    expect(want).toEqual([0, 10, 26, 34]);
    for (const l of lines.slice(0, -1)) expect(l.endsWith(' ')).toBe(false);
  });
});

describe('svc(1) Policies: svc policy test cuts its ACTION column by display width', () => {
  it('to at most the width in columns, never inside a surrogate pair or a grapheme', () => {
    for (const summary of ['😀'.repeat(60), '退款请求'.repeat(30), '👍🏽🇯🇵'.repeat(30), 'e\u0301'.repeat(100)]) {
      for (const width of [20, 21, 72]) {
        const v = actionView({ action: { tool: 'billing.refund', summary } }, width);
        expect(stringWidth(v), v).toBeLessThanOrEqual(width);
        expect(stringWidth(v), v).toBeGreaterThanOrEqual(width - 2);
        expect(v.endsWith('…')).toBe(true);
        expect(v).not.toMatch(LONE_SURROGATE);
        expect(v).not.toMatch(/🇯…$|👍…$|e…$/u); // no flag, skin tone or accent cut in half
      }
    }
    expect(actionView({ action: { tool: 'billing.refund', summary: '退款' } }, 20)).toBe('billing.refund: 退款');
  });
});

describe('svc(1) Runs: svc run events pads its columns by display width', () => {
  it('an actor id in CJK keeps the summary in line with an ASCII one', () => {
    const ev = (seq: number, id: string) => ({ seq, at: '2026-01-01T10:00:00.000Z', kind: 'approval.decided', actor: { id, role: 'finance' }, payload: { decision: 'approved' } }) as unknown as RunEvent;
    const lines = [eventLine(ev(7, 'fin-1')), eventLine(ev(8, '财务-一'))];
    const at = lines.map((l) => stringWidth(l.slice(0, l.indexOf('decision='))));
    expect(at[1], lines.join('\n')).toBe(at[0]);
  });
});
