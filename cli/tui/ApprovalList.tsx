/**
 * The inbox list: one line per pending approval (age, tool, requester, arguments), the
 * selected one marked, scrolled so the selection stays in view within `rows` lines. The
 * arguments tell apart approvals of one tool, requester and rule, and they are what the
 * gateway will run; the summary (which a model may have written) and the rule are in the
 * detail pane.
 */
import React, { useRef } from 'react';
import { Box, Text } from 'ink';
import type { Approval, RunView } from './approvals-api.js';
import { age, cell, clean, fit, listArgsTexts } from './format.js';

export interface ApprovalListItem {
  approval: Approval;
  run?: RunView;
}

export interface ApprovalListProps {
  items: ApprovalListItem[];
  selected: number;
  /** Lines available, a "more" line included. */
  rows: number;
  width: number;
  /** Current time in ms, for ages. */
  now: number;
  /** The deciding actor's id: runs they requested show `you` as the requester (they cannot decide those). */
  actorId?: string;
  /**
   * Whether the selected row is marked. Not while a prompt is open for an approval that has
   * left the list: the marker would point at another approval than the one the prompt is for.
   * (Default: true)
   */
  marked?: boolean;
}

/** The first visible index so that `selected` is inside a window of `size`. */
export function windowStart(count: number, selected: number, size: number): number {
  if (count <= size) return 0;
  const half = Math.floor(size / 2);
  return Math.max(0, Math.min(selected - half, count - size));
}

export function ApprovalList({ items, selected, rows, width, now, actorId, marked = true }: ApprovalListProps): React.JSX.Element {
  const overflow = items.length > rows;
  const size = overflow ? Math.max(1, rows - 1) : rows;
  const start = windowStart(items.length, selected, size);
  const visible = items.slice(start, start + size);
  const ageW = 4;
  const toolW = Math.min(24, Math.max(10, Math.floor((width - 8) * 0.34)));
  const whoW = Math.min(14, Math.max(6, Math.floor((width - 8) * 0.18)));
  const whatW = Math.max(4, width - 2 - ageW - 1 - toolW - 1 - whoW - 1);
  // Under 24 columns a member's name leaves no room for its value: the values alone then.
  const argsTexts = useArgsTexts(items, whatW < 24);
  return (
    <Box flexDirection="column" width={width}>
      {visible.map(({ approval, run }, i) => {
        const idx = start + i;
        const on = marked && idx === selected;
        const id = run?.requested_by?.id;
        const who = id === undefined ? '…' : actorId !== undefined && id === actorId ? 'you' : clean(id);
        const line =
          (on ? '› ' : '  ') +
          cell(age(approval.created_at, now), ageW) +
          ' ' +
          cell(clean(approval.action?.tool), toolW) +
          ' ' +
          cell(who, whoW) +
          ' ' +
          fit(clean(argsTexts.get(approval.approval_id) ?? ''), whatW);
        return (
          <Text key={approval.approval_id} wrap="truncate-end" inverse={on} bold={on}>
            {fit(line, width)}
          </Text>
        );
      })}
      {overflow ? (
        <Text dimColor wrap="truncate-end">
          {fit(`  ${[start > 0 ? `↑ ${start} more` : '', items.length - start - size > 0 ? `↓ ${items.length - start - size} more` : '', `(${selected + 1}/${items.length})`].filter(Boolean).join('  ')}`, width)}
        </Text>
      ) : null}
    </Box>
  );
}

/**
 * listArgsTexts of the listed approvals, computed again only when they change: not for a
 * new time (ages), a moved selection, a run read, or a poll that found the same list. It
 * reads every listed approval, and the list is drawn on each of those.
 */
function useArgsTexts(items: ApprovalListItem[], valuesOnly: boolean): Map<string, string> {
  const memo = useRef<{ approvals: Approval[]; valuesOnly: boolean; texts: Map<string, string> } | null>(null);
  const m = memo.current;
  if (m && m.valuesOnly === valuesOnly && m.approvals.length === items.length && items.every((it, i) => it.approval === m.approvals[i])) return m.texts;
  const approvals = items.map((i) => i.approval);
  memo.current = { approvals, valuesOnly, texts: listArgsTexts(approvals, { valuesOnly }) };
  return memo.current.texts;
}
