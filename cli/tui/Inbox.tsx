/**
 * The approvals inbox screen: a list of pending approvals over a detail pane, a status line
 * and the keys (↑/↓ or j/k move, Enter details, a approve, r reject, / filter, q quit); Enter
 * opens the selected approval whole on a screen of its own that scrolls. It owns only UI
 * state (selection, filter, prompt); data and decisions come in and go out through props,
 * so the data layer (inbox-source.ts) and the wiring (InboxApp.tsx) stay outside it.
 */
import React, { useEffect, useMemo, useRef, useState } from 'react';
import { Box, Text, useInput, type Key } from 'ink';
import { REASON_MAX_LENGTH, type Actor, type Approval, type ApprovalDecision } from './approvals-api.js';
import type { InboxSnapshot } from './inbox-source.js';
import { matchesFilter } from './inbox-source.js';
import { ApprovalDetail, DETAIL_FIXED_ROWS, fullDetailLines } from './ApprovalDetail.js';
import { ApprovalList } from './ApprovalList.js';
import { PROMPT_ROWS, ReasonPrompt } from './ReasonPrompt.js';
import { AlertScreen, Connecting, EmptyInbox, KernelError, Unreachable, type Alert } from './StatusScreens.js';
import { age, clean, clock, columns, fit } from './format.js';
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

/**
 * `detail`: one approval whole, scrolled to line `top`. A prompt opened there has `back`: Esc
 * returns to the detail at that line.
 */
type Mode =
  | { kind: 'browse' }
  | { kind: 'filter' }
  | { kind: 'detail'; target: Approval; top: number }
  | { kind: 'prompt'; decision: ApprovalDecision; target: Approval; reason: string; error: string | null; back?: { top: number } };

/**
 * The smallest terminal the inbox draws in (all but its last row is used: 40×12). A
 * smaller one gets a line that says so: drawn anyway, the screen wrapped and scrolled into
 * garbage, and a prompt could take keys no one could see.
 */
export const MIN_WIDTH = 40;
export const MIN_HEIGHT = 11;

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
    const k = modeRef.current.kind;
    if (input.length > 1 && !key.ctrl && !key.meta && (k === 'browse' || k === 'detail') && !propsRef.current.alert) {
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
    const m = modeRef.current;
    if ((p.width ?? 80) < MIN_WIDTH || (p.height ?? 24) < MIN_HEIGHT) {
      // Nothing shows but the line that says so: no key may edit or decide unseen.
      if ((key.ctrl && input === 'c') || (input === 'q' && m.kind !== 'prompt' && m.kind !== 'filter')) p.onQuit();
      return;
    }
    if (p.alert) return p.onDismissAlert?.();
    if (m.kind === 'prompt') {
      const e = editLine(m.reason, input, key, REASON_MAX_LENGTH);
      if (e.kind === 'cancel') return setMode(m.back ? { kind: 'detail', target: m.target, top: m.back.top } : { kind: 'browse' });
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
    // Enter as a key of its own, or inside keys that arrived together.
    const enter = key.return || input === '\r';
    if (m.kind === 'detail') {
      const g = detailGeom.current;
      const at = Math.min(m.top, g.maxTop);
      // The end is kept as such (Infinity), cut to the lines at render: G typed with the Enter
      // that opened the view arrives before the view has been drawn and its length is known.
      const scroll = (delta: number) => setMode({ ...m, top: delta === Infinity ? Infinity : Math.max(0, Math.min(g.maxTop, at + delta)) });
      if (key.escape || enter || key.leftArrow) return setMode({ kind: 'browse' });
      if (key.upArrow || input === 'k') return scroll(-1);
      if (key.downArrow || input === 'j') return scroll(1);
      if (key.pageUp || input === 'b') return scroll(-g.page);
      if (key.pageDown || input === ' ') return scroll(g.page);
      if (key.home || input === 'g') return scroll(-Infinity);
      if (key.end || input === 'G') return scroll(Infinity);
      // Only while it is pending: a decision on one that has left is refused, and says so on the screen.
      if ((input === 'a' || input === 'r') && !p.busy && p.approvals.some((a) => a.approval_id === m.target.approval_id)) {
        return setMode({ kind: 'prompt', decision: input === 'a' ? 'approved' : 'rejected', target: m.target, reason: '', error: null, back: { top: at } });
      }
      return;
    }
    if (key.upArrow || input === 'k') return move(-1);
    if (key.downArrow || input === 'j') return move(1);
    if (key.pageUp) return move(-5);
    if (key.pageDown) return move(5);
    if (key.home || input === 'g') return move(-Infinity);
    if (key.end || input === 'G') return move(Infinity);
    if (input === '/') return setMode({ kind: 'filter' });
    if (key.escape) return setFilter('');
    if (enter) {
      const list = liveItems();
      const at = indexIn(list, selRef.current);
      if (at < 0) return;
      setSelectedId(list[at]!.approval.approval_id);
      return setMode({ kind: 'detail', target: list[at]!.approval, top: 0 });
    }
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
  // The detail view's sizes as of the last render, for the keys that scroll it.
  const detailGeom = useRef({ maxTop: 0, page: 1 });
  // Its lines, made again only when what they show changes: not on every poll's new time.
  const detailCache = useRef<{ key: unknown[]; lines: string[] } | null>(null);

  if (width < MIN_WIDTH || height < MIN_HEIGHT) return <TooSmall width={width} height={height} />;
  if (props.alert) return <AlertScreen alert={props.alert} width={width} height={height} />;
  const inPrompt = mode.kind === 'prompt';
  if (!inPrompt) {
    const c = props.connection;
    if (c.state === 'unreachable') {
      return <Unreachable url={c.url} error={c.error} attempts={c.attempts} since={c.since} intervalSeconds={intervalSeconds} width={width} height={height} />;
    }
    if (c.state === 'error') return <KernelError url={c.url} code={c.code} message={c.message} intervalSeconds={intervalSeconds} width={width} height={height} />;
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
  const rule = <Text dimColor>{'─'.repeat(width)}</Text>;
  const warnLine = warn ? (
    <Text wrap="truncate-end" color={tint('yellow')}>
      {fit(`svcd at ${clean(props.url)} is not answering; retrying`, width)}
    </Text>
  ) : null;

  // A refresh can drop the prompt's target (decided or cancelled elsewhere): the prompt stays
  // (Enter then shows what became of it) but says so.
  const targetLeft = (mode.kind === 'prompt' || mode.kind === 'detail') && !props.approvals.some((a) => a.approval_id === mode.target.approval_id);
  const prompt =
    mode.kind === 'prompt' ? (
      <ReasonPrompt
        decision={mode.decision}
        subject={`${mode.target.action?.tool ?? '?'} (${mode.target.approval_id})`}
        gone={targetLeft}
        value={mode.reason}
        error={mode.error}
        maxLength={REASON_MAX_LENGTH}
        width={width}
      />
    ) : null;
  const statusLine = props.busy ? (
    <Text wrap="truncate-end" color={tint('cyan')}>
      {fit(clean(props.busy), width)}
    </Text>
  ) : props.notice ? (
    <NoticeLine notice={props.notice} width={width} />
  ) : (
    <Text> </Text>
  );

  if (mode.kind === 'detail' || (mode.kind === 'prompt' && mode.back)) {
    // One approval whole: the list's header, the lines that fit, where they are in the whole.
    const target = mode.target;
    const shownTarget = props.approvals.find((a) => a.approval_id === target.approval_id) ?? target;
    const run = props.runs[target.run_id];
    const events = props.events[target.run_id];
    const key = [shownTarget, run, events, width, age(shownTarget.created_at, now), targetLeft, props.actor.id];
    const cached = detailCache.current;
    const lines =
      cached && cached.key.every((v, i) => v === key[i])
        ? cached.lines
        : (detailCache.current = { key, lines: fullDetailLines({ approval: shownTarget, run, events, width, now, left: targetLeft, actorId: props.actor.id }) }).lines;
    const rows = Math.max(1, height - 3 - bottomRows);
    const maxTop = Math.max(0, lines.length - rows);
    detailGeom.current = { maxTop, page: Math.max(1, rows - 1) };
    const top = Math.min(mode.kind === 'detail' ? mode.top : mode.back!.top, maxTop);
    const where = lines.length > rows ? ` ${top + 1}–${Math.min(lines.length, top + rows)} of ${lines.length} lines${top + rows < lines.length ? ' ↓' : ''} ` : '';
    const lower = where && columns(where) + 4 <= width ? `──${where}${'─'.repeat(width - 2 - columns(where))}` : '─'.repeat(width);
    return (
      <Box flexDirection="column" width={width}>
        {header}
        {rule}
        <Box flexDirection="column" height={rows}>
          {lines.slice(top, top + rows).map((l, i) => (
            <Text key={i} wrap="truncate-end">
              {l || ' '}
            </Text>
          ))}
        </Box>
        <Text dimColor>{lower}</Text>
        {warnLine}
        {prompt ?? (
          <Box flexDirection="column" width={width}>
            {targetLeft ? (
              <Text wrap="truncate-end" color={tint('yellow')}>
                {fit('No longer pending (decided or cancelled elsewhere) · Esc back to the list', width)}
              </Text>
            ) : (
              statusLine
            )}
            <Text wrap="truncate-end" dimColor>
              {detailKeyLine(width, !targetLeft)}
            </Text>
          </Box>
        )}
      </Box>
    );
  }

  // Header, list, rule, detail (its fixed rows and one of args), rule, bottom. A terminal too
  // short for that drops the detail pane rather than scroll the header and list out of sight.
  const fullRows = 3 + Math.min(3, Math.max(1, items.length)) + DETAIL_FIXED_ROWS + 1 + bottomRows;
  const compact = height < fullRows;
  const listMax = compact ? Math.max(1, height - 4 - bottomRows) : Math.max(3, Math.floor((height - 14) / 2));
  const listRows = Math.max(1, Math.min(items.length, listMax));
  const detailRows = Math.max(DETAIL_FIXED_ROWS + 1, height - 3 - listRows - bottomRows);

  let bottom: React.JSX.Element;
  if (prompt) {
    bottom = prompt;
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
        {statusLine}
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
          {fit(`details need ${fullRows - height} more row${fullRows - height === 1 ? '' : 's'}; Enter shows them`, width)}
        </Text>
      ) : shown ? (
        <ApprovalDetail approval={shown} run={props.runs[shown.run_id]} events={props.events[shown.run_id]} width={width} rows={detailRows} now={now} left={targetLeft} actorId={props.actor.id} />
      ) : (
        <Box height={detailRows} />
      )}
      {rule}
      {warnLine}
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
    `↑↓/jk move · Enter details · a approve · r reject · / filter${filtering ? ' · Esc clear filter' : ''} · q quit`,
    // A filter kept: how to clear it says more than how to start one.
    `↑↓ move · Enter details · a approve · r reject · ${filtering ? 'Esc clear filter' : '/ filter'} · q quit`,
    `↑↓ move · a approve · r reject · / filter${filtering ? ' · Esc clear' : ''} · q quit`,
    `a approve · r reject · /${filtering ? ' Esc' : ''} · q quit`,
    'a ok · r no · q quit',
  ];
  return fit(forms.find((f) => columns(f) <= width) ?? forms.at(-1)!, width);
}

/** The detail view's keys line, in its longest form that fits; without a and r once the approval has left. */
export function detailKeyLine(width: number, decidable = true): string {
  const decide = decidable ? ' · a approve · r reject' : '';
  const forms = [
    `↑↓/jk scroll · PgUp/PgDn page${decide} · Esc back · q quit`,
    `↑↓ scroll${decide} · Esc back · q quit`,
    `${decidable ? 'a approve · r reject · ' : ''}Esc back · q quit`,
    `${decidable ? 'a ok · r no · ' : ''}Esc back · q quit`,
  ];
  return fit(forms.find((f) => columns(f) <= width) ?? forms.at(-1)!, width);
}

/** Below MIN_WIDTH × MIN_HEIGHT: what is needed, on as few lines as the terminal has. */
function TooSmall({ width, height }: { width: number; height: number }): React.JSX.Element {
  const size = `${width}×${height + 1}`;
  const need = `${MIN_WIDTH}×${MIN_HEIGHT + 1}`;
  const forms = [
    [`The terminal is too small (${size}): the inbox needs ${need}.`, 'Widen or heighten it; q quits.'],
    [`Too small: ${size}`, `needs ${need}`, 'q quit'],
    [`Too small: ${size}, needs ${need} · q quit`],
    [`${size} < ${need}`],
  ];
  const lines = forms.find((f) => f.length <= Math.max(1, height) && f.every((l) => columns(l) <= width)) ?? forms.at(-1)!;
  return (
    <Box flexDirection="column" width={width}>
      {lines.slice(0, Math.max(1, height)).map((l, i) => (
        <Text key={i} wrap="truncate-end" bold={i === 0}>
          {fit(l, width)}
        </Text>
      ))}
    </Box>
  );
}
