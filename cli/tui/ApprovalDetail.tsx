/**
 * The detail pane of one approval: the action (tool, summary, args pretty-printed), the rule
 * that asked, the run it parks (id and state; bundle@version, workflow and department; the
 * requester; usage against budget) and the run's recent events. Fits `rows` lines of `width`
 * columns: DETAIL_FIXED_ROWS lines plus at least one of args.
 */
import React from 'react';
import { Box, Text } from 'ink';
import type { Approval, EventView, RunView } from './approvals-api.js';
import { age, clean, fit, packTail, prettyLines, tokens, usd, wrap } from './format.js';

export interface ApprovalDetailProps {
  approval: Approval;
  run?: RunView;
  events?: EventView[];
  width: number;
  /** Lines available for the whole pane. */
  rows: number;
  now: number;
  /** The approval is no longer pending (a refresh dropped it while a prompt was open). */
  left?: boolean;
  /** The deciding actor's id: a run they requested says another approver must decide it. */
  actorId?: string;
}

const LABEL = 10;

/**
 * The rule that asked and its approver, and whether a condition failed to evaluate when it
 * asked (decisions 5.1: it counted as matched): the approval may exist because the policy
 * could not read the action, which the approver should know before deciding.
 */
export function ruleLine(a: Pick<Approval, 'rule' | 'approver' | 'errors'>): string {
  const base = `${clean(a.rule)} → ${clean(a.approver)}`;
  const failed = a.errors ?? [];
  if (failed.length === 0) return base;
  // The count first: a narrow pane cuts the message, never that there is one.
  const first = failed[0]!;
  const count = failed.length === 1 ? 'a condition' : `${failed.length} conditions`;
  return `${base} · ${count} failed closed: ${clean(first.rule)}: ${clean(first.message)}`;
}

function Row({ label, children, width }: { label: string; children: string; width: number }): React.JSX.Element {
  return (
    <Text wrap="truncate-end">
      <Text dimColor>{label.padEnd(LABEL)}</Text>
      {fit(children, width - LABEL)}
    </Text>
  );
}

/** The number of lines the pane uses besides the args (see the layout below). */
export const DETAIL_FIXED_ROWS = 10;

export function ApprovalDetail({ approval: a, run, events, width, rows, now, left, actorId }: ApprovalDetailProps): React.JSX.Element {
  const act = a.action ?? { tool: '?' };
  const flags = [act.writes ? 'write' : null, act.system_of_record ? 'system of record' : null].filter(Boolean).join(', ');
  const argLines = prettyLines(act.args ?? {}).map(clean);
  const argRows = Math.max(1, rows - DETAIL_FIXED_ROWS);
  const shownArgs = argLines.length <= argRows ? argLines : [...argLines.slice(0, argRows - 1), `… ${argLines.length - argRows + 1} more lines`];
  const bodyW = width - LABEL;

  // An approval that left the list has its run dropped by the data layer: say why it is
  // not loading rather than wait for it.
  const runLine = run
    ? `${clean(a.run_id)} · ${clean(run.state)}${run.parked_reason ? ` (${clean(run.parked_reason)})` : ''}`
    : `${clean(a.run_id)} ${left ? '· no longer pending' : '(loading…)'}`;
  // What is not there: '…' while it loads, '—' once it never will (the approval left the list).
  const missing = left ? '—' : '…';
  const flowLine = run ? `${clean(run.bundle?.name)}@${clean(run.bundle?.version)} / ${clean(run.workflow)} · dept ${clean(run.department)}` : missing;
  const req = run?.requested_by;
  // svc-approvals(1): the requester cannot decide their own run's actions; said before a reason is typed.
  const yours = actorId !== undefined && req?.id === actorId ? 'you: another approver must decide it · ' : '';
  const reqLine = run ? `${yours}${clean(req?.id)} (role:${clean(req?.role)}, manager role:${clean(req?.manager)})` : missing;
  const usageLine = run
    ? `${tokens(run.usage?.tokens)} / ${tokens(run.budget?.tokens)} tokens · ${usd(run.usage?.usd)} / ${usd(run.budget?.usd)}`
    : missing;
  const eventItems = (events ?? []).map((e) => `#${e.seq} ${clean(e.kind)}`);
  const eventLines = events ? (eventItems.length ? packTail(eventItems, bodyW, 2) : ['(none)']) : [missing];

  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" bold>
        {fit(`${clean(a.approval_id)} · step ${clean(a.step)} · asked ${age(a.created_at, now)} ago`, width)}
      </Text>
      <Row label="Action" width={width}>
        {`${clean(act.tool)}${flags ? `  (${flags})` : ''}`}
      </Row>
      <Row label="Summary" width={width}>
        {act.summary ? clean(act.summary) : '(none given)'}
      </Row>
      {shownArgs.map((line, i) => (
        <Row key={`arg-${i}`} label={i === 0 ? 'Args' : ''} width={width}>
          {line}
        </Row>
      ))}
      <Row label="Rule" width={width}>
        {ruleLine(a)}
      </Row>
      <Row label="Run" width={width}>
        {runLine}
      </Row>
      <Row label="Workflow" width={width}>
        {flowLine}
      </Row>
      <Row label="Request" width={width}>
        {reqLine}
      </Row>
      <Row label="Usage" width={width}>
        {usageLine}
      </Row>
      {[0, 1].map((i) => (
        <Row key={`ev-${i}`} label={i === 0 ? 'Events' : ''} width={width}>
          {eventLines[i] ?? ''}
        </Row>
      ))}
    </Box>
  );
}

/**
 * JSON lines wrapped to `width` columns, each piece keeping its line's indentation (cut down
 * where the nesting is deeper than the width leaves room for, so that `min` columns of text
 * remain): nothing of what the gateway would run is cut off.
 */
function wrapIndented(lines: string[], width: number, min = 20): string[] {
  const out: string[] = [];
  for (const line of lines) {
    const text = line.trimStart();
    const depth = line.length - text.length;
    const indent = ' '.repeat(Math.max(0, Math.min(depth, width - min)));
    const inner = Math.max(1, width - indent.length);
    for (const piece of text ? wrap(text, inner).lines : ['']) out.push(indent + piece);
  }
  return out;
}

/**
 * The whole of one approval, for the full-screen detail view: what the pane shows, with the
 * summary, every line of the arguments and every kept event wrapped to `width` rather than
 * cut, so a long summary or deep arguments can be read before deciding.
 */
export function fullDetailLines({ approval: a, run, events, width, now, left, actorId }: Omit<ApprovalDetailProps, 'rows'>): string[] {
  const act = a.action ?? { tool: '?' };
  const bodyW = Math.max(1, width - LABEL);
  const out: string[] = [];
  const labelled = (label: string, pieces: string[]) =>
    (pieces.length ? pieces : ['']).forEach((p, i) => out.push((i === 0 ? label : '').padEnd(LABEL) + p));
  const para = (label: string, text: string) => labelled(label, wrap(text, bodyW).lines);
  out.push(...wrap(`${clean(a.approval_id)} · step ${clean(a.step)} · asked ${age(a.created_at, now)} ago`, width).lines);
  const flags = [act.writes ? 'write' : null, act.system_of_record ? 'system of record' : null].filter(Boolean).join(', ');
  para('Action', `${clean(act.tool)}${flags ? `  (${flags})` : ''}`);
  para('Summary', act.summary ? clean(act.summary) : '(none given)');
  labelled('Args', wrapIndented(prettyLines(act.args ?? {}).map(clean), bodyW));
  para('Rule', `${clean(a.rule)} → ${clean(a.approver)}`);
  // Each condition that failed closed, whole: the reason the approval may exist at all.
  for (const [i, e] of (a.errors ?? []).entries()) para(i === 0 ? 'Failed' : '', `${clean(e.rule)}: ${clean(e.message)}`);
  const missing = left ? '—' : '…';
  para('Run', run ? `${clean(a.run_id)} · ${clean(run.state)}${run.parked_reason ? ` (${clean(run.parked_reason)})` : ''}` : `${clean(a.run_id)} ${left ? '· no longer pending' : '(loading…)'}`);
  para('Workflow', run ? `${clean(run.bundle?.name)}@${clean(run.bundle?.version)} / ${clean(run.workflow)} · dept ${clean(run.department)}` : missing);
  const req = run?.requested_by;
  const yours = actorId !== undefined && req?.id === actorId ? 'you: another approver must decide it · ' : '';
  para('Request', run ? `${yours}${clean(req?.id)} (role:${clean(req?.role)}, manager role:${clean(req?.manager)})` : missing);
  para('Usage', run ? `${tokens(run.usage?.tokens)} / ${tokens(run.budget?.tokens)} tokens · ${usd(run.usage?.usd)} / ${usd(run.budget?.usd)}` : missing);
  const items = (events ?? []).map((e) => `#${e.seq} ${clean(e.kind)}`);
  labelled('Events', events ? (items.length ? packTail(items, bodyW, Infinity) : ['(none)']) : [missing]);
  // A label column wider than the terminal (under 11 columns) is cut like any other line.
  return out.map((l) => fit(l, width));
}
