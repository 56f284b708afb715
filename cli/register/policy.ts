/**
 * `svc policy`'s commands: names, options and help texts (svc(1), svc-policy(5)). What they do is
 * in cli/commands/policy.ts, loaded when one of them runs, so that the policy compiler (CEL, RE2)
 * is loaded by the commands that use it alone (docs/design.md, "CLI start-up").
 */
import type { Command } from 'commander';
import { lazyAction } from './lazy-action.js';

const load = () => import('../commands/policy.js');

export function registerPolicy(program: Command): void {
  const policy = program.command('policy').description('lint, push, read and compare policies (man svc-policy(5))');

  policy
    .command('lint')
    .description('check a policy file offline; prints FILE:LINE:COL: message per problem, exit 1 when there are any; notes rules whose loops nest on stderr')
    .argument('<file>', 'policy source file (man svc-policy(5))')
    .action(lazyAction(load, (m) => m.policyActions.lint));

  policy
    .command('push')
    .description('post a policy version (versions are immutable)')
    .argument('<file>', 'policy source file')
    .requiredOption('--name <name>', 'policy name (required)')
    .requiredOption('--version <version>', 'policy version, e.g. 1.0.0 (required)')
    .addHelpText('after', '\nExample:\n  svc policy push fixtures/policies/refunds-v1.policy --name refunds --version 1.0.0')
    .action(lazyAction(load, (m) => m.policyActions.push));

  policy
    .command('list')
    .description('list every policy version the kernel holds')
    .action(lazyAction(load, (m) => m.policyActions.list));

  policy
    .command('show')
    .description('print a policy source (NAME is the latest version)')
    .argument('<ref>', 'NAME or NAME@VERSION')
    .action(lazyAction(load, (m) => m.policyActions.show));

  policy
    .command('test')
    .alias('diff')
    .description('decide every corpus case under A alone and B alone; print the cases whose decision flips')
    .argument('<corpus>', 'JSON or YAML list of {action, run}')
    .requiredOption('--a <ref>', 'policy A, pushed already: NAME or NAME@VERSION (required)')
    .requiredOption('--b <ref>', 'policy B: NAME, NAME@VERSION, or a policy source FILE (required)')
    .option('--fail-on-flip', 'exit 1 when any case flips (for CI)')
    .addHelpText('after', '\nExample:\n  svc policy test fixtures/corpora/refunds.json --a refunds@1.0.0 \\\n    --b fixtures/policies/refunds-v2.policy --fail-on-flip')
    .action(lazyAction(load, (m) => m.policyActions.test));
}
