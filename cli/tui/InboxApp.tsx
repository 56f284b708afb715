/**
 * The inbox wired to its data layer: subscribes to an InboxSource (which polls the kernel),
 * sends decisions through it, and turns their outcomes into a notice or an alert screen.
 */
import React, { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import { useApp, useStdout } from 'ink';
import type { Approval, ApprovalDecision } from './approvals-api.js';
import { explainNotTheApprover, type InboxSource } from './inbox-source.js';
import { Inbox, type Notice } from './Inbox.js';
import type { Alert } from './StatusScreens.js';
import { clean } from './format.js';

export interface InboxAppProps {
  source: InboxSource;
  /** Fixed terminal size; by default the real terminal's, following resizes. */
  width?: number;
  height?: number;
  /** Clock for ages (tests pin it). (Default: Date.now) */
  now?: () => number;
  /** Called after `q`, once the app has unmounted. */
  onQuit?: () => void;
}

/**
 * The terminal's size; one row is left free so Ink never fills the screen and scrolls. Not
 * raised to a minimum: below one the inbox says the terminal is too small (Inbox MIN_WIDTH).
 */
function useTerminalSize(fixed: { width?: number; height?: number }): { width: number; height: number } {
  const { stdout } = useStdout();
  const read = () => ({ width: fixed.width ?? (stdout.columns || 80), height: fixed.height ?? Math.max(1, (stdout.rows || 24) - 1) });
  const [size, setSize] = useState(read);
  useEffect(() => {
    if (fixed.width !== undefined && fixed.height !== undefined) return;
    const onResize = () => setSize(read());
    stdout.on('resize', onResize);
    return () => void stdout.off('resize', onResize);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [stdout, fixed.width, fixed.height]);
  return size;
}

export function InboxApp({ source, width, height, now, onQuit }: InboxAppProps): React.JSX.Element {
  const { exit } = useApp();
  const snap = useSyncExternalStore(
    useCallback((fn: () => void) => source.subscribe(fn), [source]),
    () => source.snapshot(),
  );
  const size = useTerminalSize({ width, height });
  const [notice, setNotice] = useState<Notice | null>(null);
  const [alert, setAlert] = useState<Alert | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  // Approvals this inbox has sent a decision for that svcd did not refuse. Keys pasted faster
  // than the list refreshes (`a⏎⏎⏎a⏎`) can decide one twice: the second meets 409
  // already_decided, and the decision that got there first is this inbox's own, not a rival's.
  const decided = useRef(new Set<string>());

  useEffect(() => {
    source.start();
    return () => source.stop();
  }, [source]);

  // A failed or unconfirmed decision's line is replaced once its approval has left the list
  // (decided after all, or by someone else) and svcd answers again: it no longer describes
  // what is there, and the run's events say who decided.
  useEffect(() => {
    if (!notice?.approvalId || snap.connection.state !== 'ok' || !snap.loaded) return;
    if (snap.approvals.some((a) => a.approval_id === notice.approvalId)) return;
    setNotice({ tone: 'info', text: `${notice.approvalId} has left the inbox (decided); the run's events say by whom and how` });
  }, [notice, snap]);

  const onDecide = useCallback(
    (approval: Approval, decision: ApprovalDecision, reason: string) => {
      const verb = decision === 'approved' ? 'Approving' : 'Rejecting';
      setBusy(`${verb} ${approval.action?.tool ?? ''} (${approval.approval_id})…`);
      const earlier = decided.current.has(approval.approval_id);
      decided.current.add(approval.approval_id);
      void source.decide(approval.approval_id, decision, reason).then((out) => {
        setBusy(null);
        // svcd answered and refused this one: nothing of this inbox's was recorded (unless an earlier one was).
        const refused = !out.ok && (out.code === 'already_decided' || ('status' in out && out.status !== null));
        if (refused && !earlier) decided.current.delete(approval.approval_id);
        if (out.ok) {
          setNotice({
            tone: 'success',
            text: `${decision === 'approved' ? 'Approved' : 'Rejected'} ${clean(approval.action?.tool)}; run ${out.run_id} is ${out.run_state}`,
          });
        } else if (out.code === 'already_decided') {
          setNotice(null);
          const current = 'current' in out ? out.current : null;
          const mine = earlier && current?.actor?.id === source.actor.id;
          setAlert({ kind: 'lost_race', approval, attempted: decision, current, mine });
        } else if (out.code === 'not_the_approver') {
          setNotice(null);
          const run = source.snapshot().runs[approval.run_id];
          setAlert({ kind: 'not_allowed', approval, attempted: decision, why: explainNotTheApprover(source.actor, approval, run, out.message, 'details' in out ? out.details : {}) });
        } else if (out.code === 'unconfirmed') {
          setNotice({ tone: 'warn', text: `Not confirmed: ${decision === 'approved' ? 'approving' : 'rejecting'} ${approval.approval_id}: ${out.message}`, approvalId: approval.approval_id });
        } else {
          setNotice({ tone: 'error', text: `Could not ${decision === 'approved' ? 'approve' : 'reject'} ${approval.approval_id}: ${out.code}: ${out.message}`, approvalId: approval.approval_id });
        }
      });
    },
    [source],
  );

  return (
    <Inbox
      approver={snap.approver}
      actor={source.actor}
      url={snap.url}
      connection={snap.connection}
      loaded={snap.loaded}
      approvals={snap.approvals}
      more={snap.more}
      runs={snap.runs}
      events={snap.events}
      notice={notice}
      busy={busy}
      alert={alert}
      width={size.width}
      height={size.height}
      now={now ? now() : Date.now()}
      onFocus={(a) => source.focus(a?.run_id ?? null)}
      onDecide={onDecide}
      onDismissAlert={() => setAlert(null)}
      onQuit={() => {
        source.stop();
        exit();
        onQuit?.();
      }}
    />
  );
}
