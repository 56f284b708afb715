/**
 * The approvals inbox screen: a list of pending approvals over a detail pane, a status line
 * and the keys (↑/↓ or j/k move, a approve, r reject, / filter, q quit). It owns only UI
 * state (selection, filter, prompt); data and decisions come in and go out through props,
 * so the data layer (inbox-source.ts) and the wiring (InboxApp.tsx) stay outside it.
 */
import React, { useEffect, useMemo, useRef, useState } from 'react';
import { Box, Text, useInput, type Key } from 'ink';
import { REASON_MAX_LENGTH, type Actor, type Approval, type ApprovalDecision } from './approvals-api.js';
import type { InboxSnapshot } from './inbox-source.js';
import { matchesFilter } from './inbox-source.js';
import { ApprovalDetail, DETAIL_FIXED_ROWS } from './ApprovalDetail.js';
import { ApprovalList } from './ApprovalList.js';
import { PROMPT_ROWS, ReasonPrompt } from './ReasonPrompt.js';
import { AlertScreen, Connecting, EmptyInbox, KernelError, Unreachable, type Alert } from './StatusScreens.js';
import { clean, clock, columns, fit } from './format.js';
import { editLine } from './line-edit.js';
import { tint } from './tint.js';

export interface Notice {
  tone: 'info' | 'success' | 'warn' | 'error';
  text: string;
  /** The approval a failed decision was about: the notice goes once it leaves the list. */
  approvalId?: string;
}

/** The data layer's snapshot (approver, url, connection, approvals, runs, events) plus screen state. */
export interface InboxProps extends InboxSnapshot {
  actor: Actor;
  /** One status line under the detail (the last decision's result). */
  notice?: Notice | null;
  /** Set while a decision is in flight; keys that decide are ignored meanwhile. */
  busy?: string | null;
  /** A decision that did not go through; any key dismisses it. */
  alert?: Alert | null;
  /** Poll period shown on the status screens. (Default: 2) */
  intervalSeconds?: number;
  /** Terminal size. (Default: 80×24) */
  width?: number;
  height?: number;
  /** Current time in ms, for ages. (Default: Date.now() at render) */
  now?: number;
  /** The approval whose run the pane shows (so its details load). */
  onFocus?: (approval: Approval | null) => void;
  onDecide: (approval: Approval, decision: ApprovalDecision, reason: string) => void;
  onDismissAlert?: () => void;
  onQuit: () => void;
}

type Mode =
  | { kind: 'browse' }
  | { kind: 'filter' }
  | { kind: 'prompt'; decision: ApprovalDecision; target: Approval; reason: string; error: string | null };

const TONE: Record<Notice['tone'], string> = { info: 'cyan', success: 'green', warn: 'yellow', error: 'red' };

export function Inbox(props: InboxProps): React.JSX.Element {
  const width = props.width ?? 80;
  const height = props.height ?? 24;
  const now = props.now ?? Date.now();
  const intervalSeconds = props.intervalSeconds ?? 2;
  const [mode, setModeState] = useState<Mode>({ kind: 'browse' });
  const [filter, setFilterState] = useState('');
  const [selectedId, setSelectedIdState] = useState<string | null>(null);
  // Keys can arrive faster than React renders (a paste, a loaded machine). One input handler
  // serves every mode and reads and writes the UI state through refs, so a key never acts on
  // a stale render or reaches a component that is about to unmount.
  const modeRef = useRef<Mode>(mode);
  const filterRef = useRef(filter);
  const selRef = useRef<string | null>(selectedId);
  const propsRef = useRef(props);
  propsRef.current = props;
  const setMode = (m: Mode) => {
    modeRef.current = m;
    setModeState(m);
  };
  const setFilter = (f: string) => {
    filterRef.current = f;
    setFilterState(f);
  };
  const setSelectedId = (id: string | null) => {
    selRef.current = id;
    setSelectedIdState(id);
  };

  const filterItems = (p: InboxProps, f: string) =>
    p.approvals.filter((a) => matchesFilter(a, p.runs[a.run_id], f)).map((approval) => ({ approval, run: p.runs[approval.run_id] }));
  const items = useMemo(() => filterItems(props, filter), [props.approvals, props.runs, filter]); // eslint-disable-line react-hooks/exhaustive-deps
  // The selection follows its approval across refreshes; when it leaves, the approval now in
  // the same row takes it (pinned below).
  const lastIndex = useRef(0);
  const indexIn = (list: typeof items, id: string | null) => {
    const at = id === null ? -1 : list.findIndex((i) => i.approval.approval_id === id);
    return at >= 0 ? at : list.length ? Math.min(lastIndex.current, list.length - 1) : -1;
  };
  const selected = indexIn(items, selectedId);
  lastIndex.current = Math.max(0, selected);
  const current = selected >= 0 ? items[selected]!.approval : null;
  // Whatever approval is shown is pinned at once (the first one, or the one that took the row
  // of an approval that left): otherwise the selection is only a row, and a newer approval
  // arriving at the top would slide under the cursor before `a` is pressed. (Setting state
  // while rendering re-renders at once, before anything is drawn.)
  if (current && selectedId !== current.approval_id) setSelectedId(current.approval_id);

  const focusId = current?.approval_id ?? null;
  useEffect(() => {
    propsRef.current.onFocus?.(current);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [focusId]);

  /** The list as of the latest key, not the latest render. */
  const liveItems = () => filterItems(propsRef.current, filterRef.current);
  const move = (delta: number) => {
    const list = liveItems();
    if (!list.length) return;
    const from = indexIn(list, selRef.current);
    setSelectedId(list[Math.max(0, Math.min(list.length - 1, from + delta))]!.approval.approval_id);
  };

  // Keys typed or pasted faster than the terminal reports them arrive as one input ('jj',
  // '/ana'): in browse mode they act one at a time, as typed (the line editors take text whole).
  // A decision prompt opened by one of them takes none of the rest: pasted text holding an `a`
  // and a newline ("apr_01…⏎", "banana⏎") would otherwise approve with the rest as its reason.
  // A paste never decides; the prompt waits for keys of their own.
  const promptOpen = () => modeRef.current.kind === 'prompt';
  useInput((input, key) => {
    if (input.length > 1 && !key.ctrl && !key.meta && modeRef.current.kind === 'browse' && !propsRef.current.alert) {
      for (const ch of input) {
        onKey(ch, key);
        if (promptOpen()) break;
      }
      return;
    }
    onKey(input, key);
  });

  function onKey(input: string, key: Key): void {
    const p = propsRef.current;
    if (p.alert) return p.onDismissAlert?.();
    const m = modeRef.current;
    if (m.kind === 'prompt') {
      const e = editLine(m.reason, input, key, REASON_MAX_LENGTH);
      if (e.kind === 'cancel') return setMode({ kind: 'browse' });
      if (e.kind === 'edit') return setMode({ ...m, reason: e.value, error: null });
      if (e.kind === 'submit') {
        const reason = e.value.trim();
        if (m.decision === 'rejected' && !reason) return setMode({ ...m, reason: e.value, error: 'a reason is required to reject' });
        setMode({ kind: 'browse' });
        return p.onDecide(m.target, m.decision, reason);
      }
      return;
    }
    if (m.kind === 'filter') {
      const e = editLine(filterRef.current, input, key, 100);
      if (e.kind === 'edit') return setFilter(e.value);
      if (e.kind === 'submit') {
        setFilter(e.value);
        return setMode({ kind: 'browse' });
      }
      if (e.kind === 'cancel') {
        setFilter('');
        return setMode({ kind: 'browse' });
      }
      return;
    }
    if (key.ctrl && input === 'c') return p.onQuit();
    // The letter keys act bare only: Ctrl+A (screen's prefix, readline's line start) and Alt+A
    // are pressed by habit, and must not open a decision. (Ink marks Esc itself as meta.)
    if ((key.ctrl || key.meta) && !key.escape) return;
    if (input === 'q') return p.onQuit();
    // A status screen is showing: nothing to act on until the kernel answers again.
    if (p.connection.state === 'unreachable' || p.connection.state === 'error' || !p.loaded) return;
    if (key.upArrow || input === 'k') return move(-1);
    if (key.downArrow || input === 'j') return move(1);
    if (key.pageUp) return move(-5);
    if (key.pageDown) return move(5);
    if (key.home || input === 'g') return move(-Infinity);
    if (key.end || input === 'G') return move(Infinity);
    if (input === '/') return setMode({ kind: 'filter' });
    if (key.escape) return setFilter('');
    if ((input === 'a' || input === 'r') && !p.busy) {
      const list = liveItems();
      const at = indexIn(list, selRef.current);
      if (at < 0) return;
      const target = list[at]!.approval;
      setSelectedId(target.approval_id);
      return setMode({ kind: 'prompt', decision: input === 'a' ? 'approved' : 'rejected', target, reason: '', error: null });
    }
  }

  const header = <Header {...props} width={width} filter={filter} shown={items.length} />;

  if (props.alert) return <AlertScreen alert={props.alert} width={width} height={height} />;
  const inPrompt = mode.kind === 'prompt';
  if (!inPrompt) {
    const c = props.connection;
    if (c.state === 'unreachable') {
      return <Unreachable url={c.url} error={c.error} attempts={c.attempts} since={c.since} intervalSeconds={intervalSeconds} width={width} />;
    }
    if (c.state === 'error') return <KernelError url={c.url} code={c.code} message={c.message} intervalSeconds={intervalSeconds} width={width} />;
    if (!props.loaded) return <Connecting url={props.url} width={width} />;
    if (props.approvals.length === 0 && mode.kind === 'browse') {
      return (
        <Box flexDirection="column" width={width}>
          <EmptyInbox approver={props.approver} intervalSeconds={intervalSeconds} width={width} />
          {props.notice ? <NoticeLine notice={props.notice} width={width} /> : null}
        </Box>
      );
    }
  }

  const conn = props.connection;
  const warn = inPrompt && conn.state !== 'ok' && conn.state !== 'connecting';
  const bottomRows = (inPrompt ? PROMPT_ROWS : 2) + (warn ? 1 : 0);
  // Header, list, rule, detail (its fixed rows and one of args), rule, bottom. A terminal too
  // short for that drops the detail pane rather than scroll the header and list out of sight.
  const fullRows = 3 + Math.min(3, Math.max(1, items.length)) + DETAIL_FIXED_ROWS + 1 + bottomRows;
  const compact = height < fullRows;
  const listMax = compact ? Math.max(1, height - 4 - bottomRows) : Math.max(3, Math.floor((height - 14) / 2));
  const listRows = Math.max(1, Math.min(items.length, listMax));
  const detailRows = Math.max(DETAIL_FIXED_ROWS + 1, height - 3 - listRows - bottomRows);
  const rule = <Text dimColor>{'─'.repeat(width)}</Text>;

  // A refresh can drop the prompt's target (decided or cancelled elsewhere): the prompt stays
  // (Enter then shows what became of it) but says so.
  const targetLeft = mode.kind === 'prompt' && !props.approvals.some((a) => a.approval_id === mode.target.approval_id);
  let bottom: React.JSX.Element;
  if (mode.kind === 'prompt') {
    bottom = (
      <ReasonPrompt
        decision={mode.decision}
        subject={`${mode.target.action?.tool ?? '?'} (${mode.target.approval_id})`}
        gone={targetLeft}
        value={mode.reason}
        error={mode.error}
        maxLength={REASON_MAX_LENGTH}
        width={width}
      />
    );
  } else if (mode.kind === 'filter') {
    bottom = (
      <Box flexDirection="column" width={width}>
        {props.notice ? <NoticeLine notice={props.notice} width={width} /> : <Text> </Text>}
        <Text wrap="truncate-end">
          {'/'}
          {fit(filter, width - 30)}
          <Text inverse> </Text>
          <Text dimColor>{'  Enter keep · Esc clear'}</Text>
        </Text>
      </Box>
    );
  } else {
    bottom = (
      <Box flexDirection="column" width={width}>
        {props.busy ? (
          <Text wrap="truncate-end" color={tint('cyan')}>
            {fit(clean(props.busy), width)}
          </Text>
        ) : props.notice ? (
          <NoticeLine notice={props.notice} width={width} />
        ) : (
          <Text> </Text>
        )}
        <Text wrap="truncate-end" dimColor>
          {keyLine(width, Boolean(filter))}
        </Text>
      </Box>
    );
  }

  // While a prompt is open it names its target, even if a refresh moved or removed it.
  const shown = mode.kind === 'prompt' ? mode.target : current;
  return (
    <Box flexDirection="column" width={width}>
      {header}
      {items.length ? (
        <ApprovalList items={items} selected={selected} rows={listRows} width={width} now={now} actorId={props.actor.id} marked={!targetLeft} />
      ) : (
        <Text wrap="truncate-end" dimColor>
          {fit(filter ? `  No pending approval matches "${clean(filter)}" (Esc clears the filter)` : '  (none pending)', width)}
        </Text>
      )}
      {rule}
      {compact ? (
        <Text wrap="truncate-end" dimColor>
          {fit(`details need ${fullRows - height} more row${fullRows - height === 1 ? '' : 's'}`, width)}
        </Text>
      ) : shown ? (
        <ApprovalDetail approval={shown} run={props.runs[shown.run_id]} events={props.events[shown.run_id]} width={width} rows={detailRows} now={now} left={targetLeft} actorId={props.actor.id} />
      ) : (
        <Box height={detailRows} />
      )}
      {rule}
      {warn ? (
        <Text wrap="truncate-end" color={tint('yellow')}>
          {fit(`svcd at ${clean(props.url)} is not answering; retrying`, width)}
        </Text>
      ) : null}
      {bottom}
    </Box>
  );
}

function Header(props: InboxProps & { width: number; filter: string; shown: number }): React.JSX.Element {
  const n = props.approvals.length;
  // A list cut at its cap says so: "1000 pending" when 3,333 are would hide the oldest.
  const c = props.connection;
  const right = `as ${clean(props.actor.id)}${c.state === 'ok' ? ` · ${clock(c.at)}` : ''}`;
  const leftWith = (count: string) => `svc approvals · ${clean(props.approver)} · ${count}${props.filter ? ` · filter "${clean(props.filter)}" ${props.shown}/${n}` : ''}`;
  // The long form only where it leaves room for who acts and the last answer's time.
  let left = leftWith(props.more ? `${n}+ pending (newest ${n} shown)` : `${n} pending`);
  if (props.more && props.width - columns(left) - columns(right) < 2) left = leftWith(`${n}+ pending`);
  const gap = props.width - columns(left) - columns(right);
  const line = gap >= 2 ? left + ' '.repeat(gap) + right : fit(left, props.width);
  return (
    <Text wrap="truncate-end" bold>
      {line}
    </Text>
  );
}

function NoticeLine({ notice, width }: { notice: Notice; width: number }): React.JSX.Element {
  return (
    <Text wrap="truncate-end" color={tint(TONE[notice.tone])}>
      {fit(clean(notice.text), width)}
    </Text>
  );
}

/**
 * The keys line, shortened to fit the width: its longest form that fits, so `q quit` stays in
 * sight on a narrow terminal rather than being cut off at the end.
 */
export function keyLine(width: number, filtering: boolean): string {
  const forms = [
    `↑↓/jk move · a approve · r reject · / filter${filtering ? ' · Esc clear filter' : ''} · q quit`,
    `↑↓ move · a approve · r reject · / filter${filtering ? ' · Esc clear' : ''} · q quit`,
    `a approve · r reject · /${filtering ? ' Esc' : ''} · q quit`,
    'a ok · r no · q quit',
  ];
  return fit(forms.find((f) => columns(f) <= width) ?? forms.at(-1)!, width);
}
