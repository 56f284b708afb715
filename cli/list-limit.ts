/**
 * `--limit` of the list commands (`svc approvals list`, `svc remit list`): how many records,
 * newest first, the command pages through the kernel for.
 */
import { usageError } from './exit.js';

export const LIST_LIMIT_MAX = 10000;

export function parseListLimit(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > LIST_LIMIT_MAX) throw usageError(`--limit must be an integer from 1 to ${LIST_LIMIT_MAX}, got "${v}"`);
  return Number(v);
}
