/**
 * Policy references (`NAME` or `NAME@VERSION`) as the commands take them. Apart from
 * cli/commands/policy.ts, which re-exports them, so that the commands naming a policy (remit
 * mint's --policy-set) do not load the policy compiler (docs/design.md, "CLI start-up").
 */
import { usageError } from '../exit.js';

/** `name` or `name@version`. */
export function parseRef(text: string, flag: string): { name: string; version?: string } {
  const at = text.indexOf('@');
  const name = at < 0 ? text : text.slice(0, at);
  const version = at < 0 ? undefined : text.slice(at + 1);
  if (!name || version === '') throw usageError(`${flag} must be NAME or NAME@VERSION, got "${text}"`);
  return version === undefined ? { name } : { name, version };
}

/** GET path of a policy: its latest version, or the one named. */
export function policyPath(ref: string, flag = 'NAME[@VERSION]'): string {
  const { name, version } = parseRef(ref, flag);
  return version === undefined ? `/policies/${encodeURIComponent(name)}` : `/policies/${encodeURIComponent(name)}/${encodeURIComponent(version)}`;
}
