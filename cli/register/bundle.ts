/**
 * `svc bundle`'s commands: names, options and help texts (svc(1), svc-bundle(5)). What they do
 * is in cli/commands/bundle.ts, loaded when one of them runs, so that the YAML parser and the
 * bundle validator are loaded by the commands that use them alone (docs/design.md, "CLI
 * start-up").
 */
import type { Command } from 'commander';
import { lazyAction } from './lazy-action.js';

const load = () => import('../commands/bundle.js');

export function registerBundle(program: Command): void {
  const bundle = program.command('bundle').description('validate, sign, push and read workflow bundles (man svc-bundle(5))');

  bundle
    .command('validate')
    .description('check a bundle offline and list every problem with its JSON pointer (exit 1 when there are any)')
    .argument('<file>', 'bundle (YAML or JSON) or signed document')
    .action(lazyAction(load, (m) => m.bundleActions.validate));

  bundle
    .command('sign')
    .description('sign a bundle with a publisher key; writes {bundle, signature} as JSON')
    .argument('<file>', 'bundle (YAML or JSON)')
    .requiredOption('--key <keyfile>', 'publisher key pair file {key_id, public_key, private_key}, as svc keys gen writes it (required)')
    .option('-o, --output <out>', 'write the signed bundle to OUT instead of stdout')
    .action(lazyAction(load, (m) => m.bundleActions.sign));

  bundle
    .command('push')
    .description('post a bundle to the kernel; an unsigned bundle is signed first when --key is given')
    .argument('<file>', 'bundle (YAML or JSON) or signed document')
    .option('--key <keyfile>', 'publisher key pair file used when FILE is unsigned')
    .addHelpText('after', '\nExample:\n  svc bundle push fixtures/bundles/refunds.yaml --key fixtures/keys/demo-publisher.json')
    .action(lazyAction(load, (m) => m.bundleActions.push));

  bundle
    .command('list')
    .description('list the bundles the kernel holds')
    .action(lazyAction(load, (m) => m.bundleActions.list));

  bundle
    .command('show')
    .description('print a stored bundle (YAML; JSON with --json)')
    .argument('<bundle>', 'bundle id (bnd_…), or NAME[@VERSION] (the newest such)')
    .action(lazyAction(load, (m) => m.bundleActions.show));
}
