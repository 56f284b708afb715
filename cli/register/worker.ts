/**
 * `svc worker`'s commands: names, options and help texts (svc-worker(1)). What they do is in
 * cli/commands/worker.ts, loaded when one of them runs, so that the worker runtime and its
 * providers are loaded by `svc worker` alone (docs/design.md, "CLI start-up").
 */
import type { Command } from 'commander';
import { LEASE_KINDS as ALL_KINDS } from '../../src/types.js';
import { PROVIDER_NAMES } from '../../src/worker/providers/names.js';
import { lazyAction } from './lazy-action.js';

const load = () => import('../commands/worker.js');

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('run steps for the kernel: lease, execute through the gateway and a model provider, report')
    .option('--kinds <list>', `step kinds to lease, comma-separated (default: ${ALL_KINDS.join(',')})`)
    .option('--provider <name>', `model provider: ${PROVIDER_NAMES.join(' or ')} (default: mock)`)
    .option('--concurrency <n>', 'steps run at once, 1 to 256 (default: 1)')
    .option('--worker-id <id>', 'name shown in leases and events (default: <host>-<pid>-<random>)')
    .option('--ttl-seconds <n>', 'lease ttl asked for, 1 to 3600 seconds (default: 60)')
    .option('--wait-seconds <n>', 'long-poll wait per lease request, 0 to 30 seconds (default: 20)')
    .option('--grace-seconds <n>', 'on SIGINT/SIGTERM/SIGHUP, how long running steps may finish, 0 to 3600 (default: 30)')
    .option('--max-turns <n>', 'most model answers in one step, 1 to 256 (default: 16)')
    .action(lazyAction(load, (m) => m.workerActions.worker));
}
