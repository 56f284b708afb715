/**
 * Arguments several commands read as `svc remit` does: a requester and a remit id. Apart from
 * cli/commands/remit.ts, which re-exports them, so that `svc run` does not load the token
 * verifier (docs/design.md, "CLI start-up").
 */
import { usageError } from '../exit.js';
import { TOKEN_PREFIX } from '../../src/remit/token-prefix.js';

/** `ID:ROLE:MANAGER` → requested_by. */
export function parseRequestedBy(v: string): { id: string; role: string; manager: string } {
  const parts = v.split(':');
  if (parts.length !== 3 || parts.some((p) => p.trim() === '')) throw usageError(`--requested-by must be ID:ROLE:MANAGER, got "${v}"`);
  return { id: parts[0]!, role: parts[1]!, manager: parts[2]! };
}

/**
 * A remit id given where one is asked for. `mint` prints the token alone, so the token is what
 * a newcomer passes next: said plainly, instead of the kernel's "must NOT have more than 128
 * characters" or a not_found that echoes the token.
 */
export function remitIdArgument(value: string, what: string): string {
  if (value.trim().startsWith(`${TOKEN_PREFIX}.`)) {
    throw usageError(`${what} takes a remit id (rmt_…), not a token: \`svc --json remit mint\` prints both (remit_id), and \`svc remit decode TOKEN\` shows a token's rid`);
  }
  return value;
}
