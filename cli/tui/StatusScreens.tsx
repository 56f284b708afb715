/**
 * The inbox's whole-screen states: connecting, empty, unreachable, an error answer, and the
 * two alerts a decision can end in (lost race, not the approver). Data in, text out.
 */
import React from 'react';
import { Box, Text } from 'ink';
import type { Approval, ApprovalDecision } from './approvals-api.js';
import { clean, clock, columns, fit, wrap } from './format.js';
import { tint } from './tint.js';

interface FrameProps {
  width: number;
  children: React.ReactNode;
}

function Frame({ width, children }: FrameProps): React.JSX.Element {
  return (
    <Box flexDirection="column" width={width} borderStyle="round" paddingX={1}>
      {children}
    </Box>
  );
}

/** First poll still in flight. */
export function Connecting({ url, width }: { url: string; width: number }): React.JSX.Element {
  return (
    <Frame width={width}>
      <Text>Connecting to svcd at {clean(url)} …</Text>
    </Frame>
  );
}

/** Nothing pending for the role; the list keeps refreshing. */
export function EmptyInbox({ approver, intervalSeconds, width }: { approver: string; intervalSeconds: number; width: number }): React.JSX.Element {
  return (
    <Frame width={width}>
      <Text bold>No pending approvals for {clean(approver)}</Text>
      <Text dimColor>New requests appear here by themselves (checked every {intervalSeconds}&nbsp;s).</Text>
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/**
 * `text` wrapped to the frame on at most `rows` lines, the last ending in `…` when cut: a
 * status screen taller than the terminal scrolled its title away and was redrawn from the
 * middle at every retry.
 */
function Lines({ text, inner, rows, bold, color, dim }: { text: string; inner: number; rows: number; bold?: boolean; color?: string; dim?: boolean }): React.JSX.Element {
  return (
    <>
      {wrap(text, inner, Math.max(1, rows)).lines.map((l, i) => (
        <Text key={i} wrap="truncate-end" bold={bold} color={tint(color)} dimColor={dim}>
          {l}
        </Text>
      ))}
    </>
  );
}

/** The daemon did not answer; names the address and keeps retrying. */
export function Unreachable(props: { url: string; error: string; attempts: number; since: string; intervalSeconds: number; width: number; height?: number }): React.JSX.Element {
  const inner = props.width - 4;
  const title = `Cannot reach svcd at ${clean(props.url)}`;
  const what = `${clean(props.error)}; unreachable since ${clock(props.since)} (${props.attempts} ${props.attempts === 1 ? 'attempt' : 'attempts'}).`;
  const retry = `Retrying every ${props.intervalSeconds} s. Check that svcd runs and --kernel-url / SVC_KERNEL_URL.`;
  // The frame's two rows and `q quit`; the title and the error take what they need of the rest first.
  const free = (props.height ?? 24) - 3;
  const titleRows = Math.min(3, wrap(title, inner).lines.length);
  const whatRows = Math.min(3, wrap(what, inner).lines.length, Math.max(1, free - titleRows - 1));
  return (
    <Frame width={props.width}>
      <Lines text={title} inner={inner} rows={titleRows} bold color="red" />
      <Lines text={what} inner={inner} rows={whatRows} />
      <Lines text={retry} inner={inner} rows={Math.min(3, free - titleRows - whatRows)} dim />
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/** The daemon answered, but with an error (a wrong token, say); keeps retrying. */
export function KernelError(props: { url: string; code: string; message: string; intervalSeconds: number; width: number; height?: number }): React.JSX.Element {
  const hint = props.code === 'unauthorized' ? 'Pass the kernel token with --token or SVC_TOKEN.' : `Retrying every ${props.intervalSeconds} s.`;
  const inner = props.width - 4;
  const title = `svcd at ${clean(props.url)} refused the inbox: ${clean(props.code)}`;
  const free = (props.height ?? 24) - 3;
  const titleRows = Math.min(3, wrap(title, inner).lines.length);
  const hintRows = Math.min(2, wrap(hint, inner).lines.length);
  // The message (a proxy's page, a long error) gets the rows left, cut to them.
  return (
    <Frame width={props.width}>
      <Lines text={title} inner={inner} rows={titleRows} bold color="red" />
      <Lines text={clean(props.message)} inner={inner} rows={free - titleRows - hintRows} />
      <Lines text={hint} inner={inner} rows={hintRows} dim />
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/** What a decision that did not go through shows until a key is pressed. */
export type Alert =
  /** `mine`: the decision that got there first was this inbox's own, an earlier one on the same approval by the same actor (keys pasted faster than the list refreshed). */
  | { kind: 'lost_race'; approval: Approval; attempted: ApprovalDecision; current: Approval | null; mine?: boolean }
  | { kind: 'not_allowed'; approval: Approval; attempted: ApprovalDecision; why: string };

/** Rows of the lost-race screen besides the reason and its wrapped lines: the frame's two, tool and run, the way out. */
const LOST_RACE_FIXED_ROWS = 4;
/** Rows one sentence of an alert may wrap onto (ids are 30 columns; a frame is 36 at the narrowest). */
const ALERT_LINE_ROWS = 3;

/**
 * The decider's reason, wrapped to the frame and cut to the rows left: svcd takes reasons of
 * 4096 characters, and the screen must leave its title in sight (svc-approvals(1) THE INBOX).
 */
function ReasonLines({ current, inner, rows }: { current: Approval; inner: number; rows: number }): React.JSX.Element | null {
  const text = clean(current.reason).trim();
  if (!text) return null;
  const { cut } = wrap(`Reason: ${text}`, inner, Math.max(1, rows));
  // Cut: a line less for the text, and one that says where to read it whole.
  const { lines } = wrap(`Reason: ${text}`, inner, Math.max(1, cut ? rows - 1 : rows));
  return (
    <>
      {lines.map((l, i) => (
        <Text key={i} wrap="truncate-end">
          {l}
        </Text>
      ))}
      {cut ? (
        <Text wrap="truncate-end" dimColor>
          {cutHint(clean(current.state), inner)}
        </Text>
      ) : null}
    </>
  );
}

/** Where to read a cut reason whole, in the longest form that fits the frame (svc-approvals(1)). */
function cutHint(state: string, inner: number): string {
  // Each names the state: the list shows pending approvals unless told otherwise.
  const forms = [`Cut to fit: svc approvals list --state ${state} --json shows it whole.`, `Cut: svc approvals list --state ${state} --json`, `Cut: approvals list --state ${state}`, 'Cut to fit.'];
  return fit(forms.find((f) => columns(f) <= inner) ?? forms.at(-1)!, inner);
}

/** The way out, on one line: its short form on a narrow terminal. */
function continueLine(inner: number): string {
  const full = 'The list has been refreshed. Press any key to continue.';
  return full.length <= inner ? full : fit('Press any key to continue.', inner);
}

/** A decision lost a race (409 already_decided) or was refused (403 not_the_approver). */
export function AlertScreen({ alert, width, height = 24 }: { alert: Alert; width: number; height?: number }): React.JSX.Element {
  const a = alert.approval;
  const verb = alert.attempted === 'approved' ? 'approval' : 'rejection';
  // Inside the frame: a border and a space of padding on each side.
  const inner = width - 4;
  // Each sentence wraps to the frame (a 60-column terminal cut "before anyone decided" off),
  // on a few rows at most; `used` counts them so the reason gets the rest.
  let used = 0;
  const line = (text: string, style: { bold?: boolean; color?: string } = {}) => {
    const { lines } = wrap(text, inner, ALERT_LINE_ROWS);
    used += lines.length;
    return (
      <>
        {lines.map((l, i) => (
          <Text key={i} bold={style.bold} color={tint(style.color)} wrap="truncate-end">
            {l}
          </Text>
        ))}
      </>
    );
  };
  if (alert.kind === 'lost_race' && alert.current?.state === 'cancelled') {
    return (
      <Frame width={width}>
        {line(`Too late: ${clean(a.approval_id)} was cancelled`, { bold: true, color: 'yellow' })}
        {line(`Its run ${clean(a.run_id)} ended before anyone decided.`)}
        {line(`Your ${verb} was not recorded.`)}
        <Text dimColor>{continueLine(inner)}</Text>
      </Frame>
    );
  }
  if (alert.kind === 'lost_race') {
    const cur = alert.current;
    const what = cur?.decision ?? (cur?.state && cur.state !== 'pending' ? cur.state : null);
    const done = what === 'approved' ? 'Approved' : what === 'rejected' ? 'Rejected' : 'Decided';
    const at = cur?.decided_at ? ` at ${clock(cur.decided_at)}` : '';
    // Rendered after the sentences above it have counted their rows.
    const footer = () => (
      <>
        {cur ? <ReasonLines current={cur} inner={inner} rows={height - LOST_RACE_FIXED_ROWS - used} /> : null}
        <Text dimColor wrap="truncate-end">
          {fit(`${clean(a.action?.tool)} · run ${clean(a.run_id)}`, inner)}
        </Text>
        <Text dimColor>{continueLine(inner)}</Text>
      </>
    );
    if (alert.mine && cur?.actor) {
      // Not a race with someone else: an earlier decision of this inbox's, which was recorded.
      const title = line(`Already ${done.toLowerCase()} by you: ${clean(a.approval_id)}`, { bold: true, color: 'cyan' });
      const recorded = line(`Your ${what === 'rejected' ? 'rejection' : 'approval'} as ${clean(cur.actor.id)}, from this inbox${at}, was recorded.`);
      const outcome = line(what === alert.attempted ? `This second ${verb} changed nothing.` : `This ${verb} was not recorded: a decision is final.`);
      return (
        <Frame width={width}>
          {title}
          {recorded}
          {outcome}
          {footer()}
        </Frame>
      );
    }
    const who = cur?.actor ? `${clean(cur.actor.id)} (role:${clean(cur.actor.role)})` : 'another approver';
    const title = line(`Too late: ${clean(a.approval_id)} was already decided`, { bold: true, color: 'yellow' });
    const by = line(`${done} by ${who}${at}.`);
    const outcome = line(`Your ${verb} was not recorded.`);
    return (
      <Frame width={width}>
        {title}
        {by}
        {outcome}
        {footer()}
      </Frame>
    );
  }
  return (
    <Frame width={width}>
      <Text bold color={tint('red')}>
        Not allowed to decide {clean(a.approval_id)}
      </Text>
      <Text>{clean(alert.why)}.</Text>
      <Text dimColor>Your {verb} was not recorded (403 not_the_approver). Press any key to continue.</Text>
    </Frame>
  );
}
