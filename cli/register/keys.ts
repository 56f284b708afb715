/**
 * `svc keys`'s commands: names, options and help texts (svc(1)). What they do is in
 * cli/commands/keys.ts, loaded when one of them runs, so that the key and YAML code is loaded by
 * these commands alone (docs/design.md, "CLI start-up").
 */
import type { Command } from 'commander';
import { lazyAction } from './lazy-action.js';

const load = () => import('../commands/keys.js');

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('publisher key pairs and the kernel control-plane keys');
  keys
    .command('gen')
    .description('make a publisher key pair {key_id, public_key, private_key} for signing bundles')
    .option('-o, --output <file>', 'write the key pair to FILE (mode 0600) instead of printing it')
    .option('--force', 'overwrite FILE if it exists')
    .action(lazyAction(load, (m) => m.keysActions.gen));
  keys
    .command('publisher')
    .argument('<keyfile>', 'a key file as svc keys gen writes it, or {key_id, public_key}')
    .description("print the KEY_ID:PUBLIC_KEY that trusts a key file: svcd --publisher \"$(svc keys publisher FILE)\"")
    .action(lazyAction(load, (m) => m.keysActions.publisher));
  keys
    .command('show')
    .description("print the kernel's control-plane key (GET /v1/keys), with previous keys")
    .action(lazyAction(load, (m) => m.keysActions.show));
}
