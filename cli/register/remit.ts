/**
 * `svc remit`'s commands: names, options and help texts (svc(1)). What they do is in
 * cli/commands/remit.ts, loaded when one of them runs, so that the token verifier (Ed25519,
 * canonical JSON) is loaded by these commands alone (docs/design.md, "CLI start-up").
 */
import { Option, type Command } from 'commander';
import { AUTONOMY_ORDER } from '../../src/types.js';
import { usageError } from '../exit.js';
import { lazyAction } from './lazy-action.js';
import { parseListLimit } from '../list-limit.js';

const load = () => import('../commands/remit.js');

/**
 * A comma-separated list flag, repeatable. An empty value is an explicit empty list (`--tools
 * ''`: a remit for model steps alone); an empty entry inside a list (`a,,b`, `a,`) is a typo
 * and a usage error rather than something to drop quietly.
 */
function collectList(flag: string) {
  return (value: string, prev: string[] | undefined): string[] => {
    if (value.trim() === '') return prev ?? [];
    const items = value.split(',').map((s) => s.trim());
    if (items.includes('')) throw usageError(`${flag} has an empty entry in "${value}"; separate patterns with single commas`);
    return [...(prev ?? []), ...items];
  };
}

function addCreateFlags(cmd: Command): Command {
  return cmd
    .option('--tools <list>', "tool patterns, comma-separated: <connector>.<operation> or <connector>.*; '' for none", collectList('--tools'))
    .option('--scopes <list>', "scope patterns, comma-separated; a trailing * matches a prefix; '' for none", collectList('--scopes'))
    .option('--grants <list>', "data classes the run may see un-redacted, comma-separated; '' for none", collectList('--grants'))
    .option('--policy-set <list>', "policies that apply, comma-separated: NAME or NAME@VERSION; '' for none", collectList('--policy-set'))
    .option('--spend-tokens <n>', 'token budget (mint: with --spend-usd)')
    .option('--spend-usd <x>', 'USD budget (mint: with --spend-tokens)')
    .addOption(new Option('--autonomy <level>', 'autonomy level').choices([...AUTONOMY_ORDER]))
    .option('--ttl <seconds>', 'lifetime in seconds, at most 2592000 (default: 3600 for mint; the parent expiry for derive)')
    .option('--requested-by <id:role:manager>', 'the requester: id, role, and the role that approves for them');
}

export function registerRemit(program: Command): void {
  const remit = program.command('remit').description('mint, derive, list, show and decode remits (signed capability grants)');

  addCreateFlags(remit.command('mint').description('mint a remit (POST /v1/remits); prints the token'))
    .addHelpText(
      'after',
      "\nRequired: --tools, --scopes, --autonomy, --requested-by, --spend-tokens and --spend-usd.\n\nExample:\n  TOKEN=$(svc remit mint --tools 'billing.*' --scopes 'sql:table:*' --autonomy supervised \\\n    --requested-by ana:support:support-lead --spend-usd 5 --spend-tokens 100000)",
    )
    .action(lazyAction(load, (m) => m.remitActions.mint));

  addCreateFlags(
    remit
      .command('derive')
      .description('derive a narrower remit from ID (POST /v1/remits/ID/derive); flags not given are inherited')
      .argument('<id>', 'parent remit id'),
  )
    .option('--expires-at <time>', "the child's exp: ISO 8601 or epoch seconds, by the parent's (with --ttl the earlier wins)")
    .option('--not-before <time>', "the child's nbf: ISO 8601 or epoch seconds, not before the parent's")
    .addHelpText(
      'after',
      '\nA spend flag given alone narrows that budget and inherits what is left of the other.\n\nExample:\n  svc remit derive rmt_01J… --tools billing.refund --spend-usd 1 --spend-tokens 10000 --ttl 600',
    )
    .action(lazyAction(load, (m) => m.remitActions.derive));

  remit
    .command('list')
    .description('list remits, newest first (GET /v1/remits; default: those not expired)')
    .addOption(new Option('--state <state>', 'active (not expired), expired, or all').choices(['active', 'expired', 'all']).default('active'))
    .option('--run <run_id>', 'the remit bound to this run')
    .option('--parent <remit_id>', 'the remits derived from this one')
    .option('--limit <n>', 'at most this many, 1 to 10000', parseListLimit, 1000)
    .addHelpText('after', '\nExample:\n  svc remit list --state all --parent rmt_01J…')
    .action(lazyAction(load, (m) => m.remitActions.list));

  remit
    .command('show')
    .description('print a remit record (GET /v1/remits/ID)')
    .argument('<id>', 'remit id')
    .action(lazyAction(load, (m) => m.remitActions.show));

  remit
    .command('decode')
    .description("check a token against the kernel's keys; print valid, expired, not yet valid, signature invalid or malformed, then the payload")
    .argument('<token>', 'the token, or - to read it from stdin')
    .action(lazyAction(load, (m) => m.remitActions.decode));
}
