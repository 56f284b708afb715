/**
 * The prompt that confirms a decision: a reason line (required to reject, optional to
 * approve), Enter submits, Esc cancels. Display only: the inbox edits `value`.
 */
import React from 'react';
import { Box, Text } from 'ink';
import type { ApprovalDecision } from './approvals-api.js';
import { clean, fit, fitEnd } from './format.js';
import { tint } from './tint.js';

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
  /** The most characters the reason can have; a count shows from 90% of it on. (Default: none) */
  maxLength?: number;
  width: number;
}

/** The number of lines the prompt takes. */
export const PROMPT_ROWS = 3;

export function ReasonPrompt({ decision, subject, value, error, gone, maxLength, width }: ReasonPromptProps): React.JSX.Element {
  const required = decision === 'rejected';
  const title = `${required ? 'Reject' : 'Approve'} ${clean(subject)}?`;
  const label = required ? 'Reason (required): ' : 'Reason (optional): ';
  // The end of the line stays in sight as it is typed; the cursor takes the last column.
  const shown = fitEnd(value, width - label.length - 1);
  // Text typed or pasted past the limit is dropped: the count says so before it happens.
  const count = maxLength === undefined ? 0 : Array.from(value).length;
  const full = maxLength !== undefined && count >= maxLength;
  const counter = maxLength !== undefined && count >= maxLength * 0.9 ? ` · ${count}/${maxLength} characters${full ? ', no more' : ''}` : '';
  const hint = (error ?? (gone ? 'No longer pending · Enter shows what became of it · Esc cancel' : `Enter ${required ? 'reject' : 'approve'} · Esc cancel`)) + counter;
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" bold color={tint(required ? 'red' : 'green')}>
        {fit(title, width)}
      </Text>
      <Text wrap="truncate-end">
        {label}
        {shown}
        <Text inverse> </Text>
      </Text>
      <Text wrap="truncate-end" color={tint(error ? 'red' : gone || full ? 'yellow' : undefined)} dimColor={!error && !gone && !full}>
        {fit(hint, width)}
      </Text>
    </Box>
  );
}
