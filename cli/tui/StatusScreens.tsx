/**
 * The inbox's whole-screen states: connecting, empty, unreachable, an error answer, and the
 * two alerts a decision can end in (lost race, not the approver). Data in, text out.
 */
import React from 'react';
import { Box, Text } from 'ink';
import type { Approval, ApprovalDecision } from './approvals-api.js';
import { clean, clock, fit } from './format.js';

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
      <Text dimColor>New requests appear here by themselves (checked every {intervalSeconds} s).</Text>
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/** The daemon did not answer; names the address and keeps retrying. */
export function Unreachable(props: { url: string; error: string; attempts: number; since: string; intervalSeconds: number; width: number }): React.JSX.Element {
  return (
    <Frame width={props.width}>
      <Text bold color="red">
        Cannot reach svcd at {clean(props.url)}
      </Text>
      <Text>
        {fit(clean(props.error), props.width - 4)}; unreachable since {clock(props.since)} ({props.attempts} {props.attempts === 1 ? 'attempt' : 'attempts'}).
      </Text>
      <Text dimColor>Retrying every {props.intervalSeconds} s. Check that svcd runs and --kernel-url / SVC_KERNEL_URL.</Text>
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/** The daemon answered, but with an error (a wrong token, say); keeps retrying. */
export function KernelError(props: { url: string; code: string; message: string; intervalSeconds: number; width: number }): React.JSX.Element {
  const hint = props.code === 'unauthorized' ? 'Pass the kernel token with --token or SVC_TOKEN.' : `Retrying every ${props.intervalSeconds} s.`;
  return (
    <Frame width={props.width}>
      <Text bold color="red">
        svcd at {clean(props.url)} refused the inbox: {clean(props.code)}
      </Text>
      <Text>{clean(props.message)}</Text>
      <Text dimColor>{hint}</Text>
      <Text dimColor>q quit</Text>
    </Frame>
  );
}

/** What a decision that did not go through shows until a key is pressed. */
export type Alert =
  | { kind: 'lost_race'; approval: Approval; attempted: ApprovalDecision; current: Approval | null }
  | { kind: 'not_allowed'; approval: Approval; attempted: ApprovalDecision; why: string };

/** A decision lost a race (409 already_decided) or was refused (403 not_the_approver). */
export function AlertScreen({ alert, width }: { alert: Alert; width: number }): React.JSX.Element {
  const a = alert.approval;
  const verb = alert.attempted === 'approved' ? 'approval' : 'rejection';
  if (alert.kind === 'lost_race' && alert.current?.state === 'cancelled') {
    return (
      <Frame width={width}>
        <Text bold color="yellow">
          Too late: {clean(a.approval_id)} was cancelled
        </Text>
        <Text>Its run {clean(a.run_id)} ended before anyone decided.</Text>
        <Text>Your {verb} was not recorded.</Text>
        <Text dimColor>The list has been refreshed. Press any key to continue.</Text>
      </Frame>
    );
  }
  if (alert.kind === 'lost_race') {
    const cur = alert.current;
    const who = cur?.actor ? `${clean(cur.actor.id)} (role:${clean(cur.actor.role)})` : 'another approver';
    const what = cur?.decision ?? (cur?.state && cur.state !== 'pending' ? cur.state : null);
    return (
      <Frame width={width}>
        <Text bold color="yellow">
          Too late: {clean(a.approval_id)} was already decided
        </Text>
        <Text>
          {what ? `${what === 'approved' ? 'Approved' : 'Rejected'}` : 'Decided'} by {who}
          {cur?.decided_at ? ` at ${clock(cur.decided_at)}` : ''}.
        </Text>
        <Text>Your {verb} was not recorded.</Text>
        {cur?.reason ? <Text>Reason: {clean(cur.reason)}</Text> : null}
        <Text dimColor>
          {clean(a.action?.tool)} · run {clean(a.run_id)}
        </Text>
        <Text dimColor>The list has been refreshed. Press any key to continue.</Text>
      </Frame>
    );
  }
  return (
    <Frame width={width}>
      <Text bold color="red">
        Not allowed to decide {clean(a.approval_id)}
      </Text>
      <Text>{clean(alert.why)}.</Text>
      <Text dimColor>Your {verb} was not recorded (403 not_the_approver). Press any key to continue.</Text>
    </Frame>
  );
}
