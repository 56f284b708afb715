/**
 * `svc worker`: runs the worker runtime (src/worker) against the kernel and the gateway until
 * SIGINT or SIGTERM. Logs one JSON line per lifecycle event on stderr; prints nothing on stdout.
 *
 *   svc worker [--kinds model,tool,action,compensation] [--provider mock|openai]
 *              [--concurrency N] [--worker-id ID] [--ttl-seconds N] [--wait-seconds N]
 *              [--grace-seconds N] [--max-turns N]
 *
 * The first SIGINT stops polling and lets running steps finish (up to --grace-seconds); a second
 * one, or the end of the grace, aborts them and fails them as `worker_shutdown` (retryable).
 */
import type { Command } from 'commander';
import { createLogger, logLevelOf, surviveBrokenPipes, type Logger, type LogLevel } from '../../src/log/logger.js';
import type { LeaseKind } from '../../src/types.js';
import { createProvider, PROVIDER_NAMES, type ProviderName } from '../../src/worker/providers/index.js';
import { openAiOptionsFromEnv } from '../../src/worker/providers/openai.js';
import { ALL_KINDS, Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { gatewayUrlOf, globals, kernelUrlOf } from '../context.js';
import { usageError } from '../exit.js';

export { registerWorker } from '../register/worker.js';

export interface WorkerFlags {
  kinds?: string;
  provider?: string;
  concurrency?: string;
  workerId?: string;
  ttlSeconds?: string;
  waitSeconds?: string;
  graceSeconds?: string;
  maxTurns?: string;
}

export interface WorkerSettings {
  kinds: LeaseKind[];
  provider: ProviderName;
  concurrency: number;
  workerId?: string;
  ttlSeconds: number;
  waitSeconds: number;
  graceMs: number;
  maxTurns: number;
}

function intFlag(name: string, raw: string | undefined, dflt: number, min: number, max: number): number {
  if (raw === undefined) return dflt;
  if (!/^\d+$/.test(raw.trim())) throw usageError(`--${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw usageError(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** Validates the flags (usage errors exit 2). */
export function parseWorkerFlags(f: WorkerFlags): WorkerSettings {
  const kindsText = f.kinds ?? ALL_KINDS.join(',');
  if (kindsText.trim() === '') throw usageError('--kinds needs at least one kind');
  const kinds = kindsText.split(',').map((k) => k.trim());
  // `model,,tool` is a typo, as in svc remit's lists: refused rather than dropped quietly.
  if (kinds.includes('')) throw usageError(`--kinds has an empty entry in "${kindsText}"; separate kinds with single commas`);
  for (const k of kinds) if (!(ALL_KINDS as readonly string[]).includes(k)) throw usageError(`--kinds: unknown kind "${k}" (expected ${ALL_KINDS.join(', ')})`);
  const provider = f.provider ?? 'mock';
  if (!(PROVIDER_NAMES as readonly string[]).includes(provider)) throw usageError(`--provider must be one of ${PROVIDER_NAMES.join(', ')}, got "${provider}"`);
  if (f.workerId !== undefined && !/^[A-Za-z0-9._:-]{1,128}$/.test(f.workerId)) throw usageError('--worker-id may use letters, digits and . _ : - (at most 128)');
  return {
    kinds: [...new Set(kinds)] as LeaseKind[],
    provider: provider as ProviderName,
    concurrency: intFlag('concurrency', f.concurrency, 1, 1, 256),
    workerId: f.workerId,
    ttlSeconds: intFlag('ttl-seconds', f.ttlSeconds, 60, 1, 3600),
    waitSeconds: intFlag('wait-seconds', f.waitSeconds, 20, 0, 30),
    graceMs: intFlag('grace-seconds', f.graceSeconds, 30, 0, 3600) * 1000,
    maxTurns: intFlag('max-turns', f.maxTurns, 16, 1, 256),
  };
}

/** Logs every lifecycle event of `worker` through `logger` (one JSON line each). */
export function logWorkerEvents(worker: Worker, logger: Logger): void {
  worker.on('worker:start', (e) => logger.info('worker started', e));
  worker.on('worker:stopping', (e) => logger.info('worker stopping', e));
  worker.on('worker:stop', (e) => logger.info('worker stopped', e));
  worker.on('poll:error', (e) => logger.warn('cannot lease from the kernel', e));
  worker.on('gateway:unreachable', (e) => logger.warn('cannot reach the gateway; asking again', { ...e }));
  worker.on('gateway:paused', (e) => logger.warn('the gateway is out of reach; taking no new step until it answers', e));
  worker.on('gateway:resumed', (e) => logger.info('the gateway answers again; taking steps', e));
  worker.on('step:start', (e) => logger.info('step started', { ...e }));
  worker.on('step:done', (e) => logger.info('step completed', { ...e }));
  // outcome null: the failure never reached the kernel; the lease expires and the step is handed out again.
  worker.on('step:error', (e) => logger.warn(e.outcome === null ? 'step failed; the kernel could not be told, so its lease will expire and the step run again' : 'step failed', { ...e }));
  worker.on('step:unreported', (e) => logger.warn('step ran, but the kernel could not be told it completed, so its lease will expire and the step run again', { ...e }));
  worker.on('step:parked', (e) => logger.info('step parked for approval', { ...e }));
  worker.on('step:lost', (e) => logger.warn('lease lost; step stopped', { ...e }));
  worker.on('step:activity', (e) => logger.debug('step activity', { ...e }));
}

/** Builds and starts a worker from settings; resolves when it has stopped after a signal. */
export async function handleWorker(settings: WorkerSettings, conn: Pick<WorkerOptions, 'kernelUrl' | 'gatewayUrl' | 'token'>, logger: Logger): Promise<void> {
  const worker = new Worker({
    ...conn,
    // An answer without usage is charged nothing: said once per step, so a budget that never
    // moves has an explanation in the log.
    provider: createProvider(settings.provider, process.env, { onWarning: (message, fields) => logger.warn(message, fields) }),
    kinds: settings.kinds,
    concurrency: settings.concurrency,
    workerId: settings.workerId,
    ttlSeconds: settings.ttlSeconds,
    waitSeconds: settings.waitSeconds,
    maxTurns: settings.maxTurns,
  });
  logWorkerEvents(worker, logger);
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals += 1;
    const finishing = signals === 1 && worker.inFlight > 0 && settings.graceMs > 0;
    logger.info(finishing ? 'finishing running steps; signal again to stop now' : 'stopping now', { signal: sig, in_flight: worker.inFlight });
    void worker.stop({ graceMs: signals === 1 ? settings.graceMs : 0 });
  };
  // A hang-up (its terminal or ssh session closed) stops it as SIGTERM does: otherwise the
  // steps it holds sat on their leases for a whole ttl and then spent an attempt.
  const stopSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const sig of stopSignals) process.on(sig, onSignal);
  worker.start();
  await new Promise<void>((resolve) => worker.once('worker:stop', () => resolve()));
  for (const sig of stopSignals) process.off(sig, onSignal);
}

/**
 * What each `svc worker` command does when it runs. The commands themselves (names, options, help
 * texts) are defined in cli/register/worker.ts, which loads this module only when one of them
 * runs (docs/design.md, "CLI start-up").
 */
export const workerActions = {
  async worker(this: Command, flags: WorkerFlags) {
    const settings = parseWorkerFlags(flags);
    const g = globals(this);
    // The environment is checked before anything starts, like the flags: a bad value is a
    // usage error naming the variable, not a default the operator did not ask for.
    const addresses = { kernelUrl: kernelUrlOf(this), gatewayUrl: gatewayUrlOf(this) };
    let level: LogLevel;
    try {
      level = logLevelOf(process.env.SVC_LOG_LEVEL, 'SVC_LOG_LEVEL');
      if (settings.provider === 'openai') openAiOptionsFromEnv(process.env);
    } catch (err) {
      throw usageError((err as Error).message);
    }
    surviveBrokenPipes(process.stderr); // the lines are lost, the steps and their leases go on
    // `ps` shows "svc worker …" (README's pkill -f 'svc worker'), whatever the global
    // options before the word were and however node was started.
    const args = process.argv.slice(2);
    const word = args.indexOf('worker');
    if (word >= 0) args.splice(word, 1); // the command word, moved to the front
    process.title = ['svc', 'worker', ...args].join(' ');
    const logger = createLogger({ level, base: { svc: 'worker' } });
    await handleWorker(settings, { ...addresses, token: g.token }, logger);
  },
};
