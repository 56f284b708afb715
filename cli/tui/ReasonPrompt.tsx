/**
 * The prompt that confirms a decision: a reason line (required to reject, optional to
 * approve), Enter submits, Esc cancels. Display only: the inbox edits `value`.
 */
import React from 'react';
import { Box, Text } from 'ink';
import type { ApprovalDecision } from './approvals-api.js';
import { clean, fit } from './format.js';

export interface ReasonPromptProps {
  decision: ApprovalDecision;
  /** What is being decided, e.g. "billing.refund (apr_…)". */
  subject: string;
  /** The reason typed so far. */
  value: string;
  /** Why Enter was refused, if it was. */
  error?: string | null;
  /** The approval left the pending list while the prompt was open. */
  gone?: boolean;
  width: number;
}

/** The number of lines the prompt takes. */
export const PROMPT_ROWS = 3;

export function ReasonPrompt({ decision, subject, value, error, gone, width }: ReasonPromptProps): React.JSX.Element {
  const required = decision === 'rejected';
  const title = `${required ? 'Reject' : 'Approve'} ${clean(subject)}?`;
  const label = required ? 'Reason (required): ' : 'Reason (optional): ';
  const room = width - label.length - 1;
  const shown = value.length > room ? '…' + value.slice(value.length - room + 1) : value;
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" bold color={required ? 'red' : 'green'}>
        {fit(title, width)}
      </Text>
      <Text wrap="truncate-end">
        {label}
        {shown}
        <Text inverse> </Text>
      </Text>
      <Text wrap="truncate-end" color={error ? 'red' : gone ? 'yellow' : undefined} dimColor={!error && !gone}>
        {fit(error ?? (gone ? 'No longer pending · Enter shows what became of it · Esc cancel' : `Enter ${required ? 'reject' : 'approve'} · Esc cancel`), width)}
      </Text>
    </Box>
  );
}
