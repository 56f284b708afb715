/**
 * svcd: the kernel and the gateway (decisions §11). Prints one JSON line with the chosen
 * addresses on stdout, logs JSON on stderr, drains on SIGTERM/SIGINT and exits 0. Started by
 * daemon/main.ts, which holds the signals while this loads.
 */
import { urlHasCredentials } from '../src/util/url-credentials.js';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { keyFilePath, KeyRing } from '../src/keys/keyring.js';
import { DataDirInUseError, lockDataDir } from '../src/store/dir-lock.js';
import { DescriptorWatch } from '../src/metrics/descriptors.js';
import { createLogger, globalRedactor, logLevelOf, LOG_LEVELS, surviveBrokenPipes, type Logger, type LogLevel } from '../src/log/logger.js';
import { fetchBlockedPortHint, urlHasFetchBlockedPort } from '../src/util/fetch-blocked-ports.js';
import { usageLine } from '../src/util/usage-line.js';
import { VERSION } from '../src/version.js';
import { DEFAULT_DATA_DIR as GATEWAY_DEFAULT_DATA_DIR, defaultGatewayConfig, loadGatewayConfig, loadGatewayConfigFile, substitute, type GatewayConfig } from '../src/gateway/config.js';
import { kernelStoreOf, MAX_CLOCK_SKEW_SECONDS, MAX_DRAIN_SECONDS, readConfigDoc, readConfigFile, wholeSecondsOf, type SvcdFileConfig } from './config.js';
import type { RunningSvcd } from './server.js';
import { registerBackupCommands } from './backup-commands.js';
import { bearerTokenProblem } from '../src/util/http-header-syntax.js';

interface Flags {
  config?: string;
  dataDir?: string;
  store?: string;
  kernelListen?: string;
  gatewayListen?: string;
  gatewayConfig?: string;
  publisher?: string[];
  kernel: boolean;
  gateway: boolean;
  logLevel?: LogLevel;
  drainSeconds?: string;
}

function collect(value: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), value];
}

function publishersFrom(file: SvcdFileConfig, flags: Flags): string[] {
  const fromFile = (file.kernel?.publishers ?? []).map((p) => `${p.key_id}:${p.public_key}`);
  const fromEnv = (process.env.SVC_PUBLISHERS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  return [...fromFile, ...fromEnv, ...(flags.publisher ?? [])];
}

/**
 * The gateway config: --gateway-config FILE, else the `gateway:` section of --config, else
 * an empty config (no connectors; the test tools with SVC_GATEWAY_TEST_TOOLS=1). Environment
 * overrides apply in every case (man/svc-gateway.5).
 */
function gatewayConfigFrom(file: SvcdFileConfig, flags: Flags, logger: Logger): GatewayConfig {
  if (flags.gatewayConfig) {
    if (file.gateway !== undefined) logger.warn('--gateway-config is given: the gateway: section of --config is not used', { config: flags.config, gateway_config: flags.gatewayConfig });
    return loadGatewayConfigFile(flags.gatewayConfig);
  }
  if (file.gateway !== undefined && flags.config) {
    return loadGatewayConfig(file.gateway ?? {}, { source: `${flags.config} (gateway:)`, baseDir: dirname(resolve(flags.config)) });
  }
  return defaultGatewayConfig();
}

/**
 * The data directory `--config` (kernel.data_dir, the gateway: section) or `--gateway-config`
 * names for `part`, for svcd backup and restore: the same files svcd serves from. Only what
 * names the directory is read: a backup run from cron has none of the service's secrets, and
 * a `${VAR}` of a connector's key or the kernel's token is no business of a file copy.
 */
function configuredDir(flags: Flags, part: 'kernel' | 'gateway'): string | null {
  refuseEmptyFlags(flags, { config: '--config', gatewayConfig: '--gateway-config' });
  const own = part === 'gateway' && flags.gatewayConfig !== undefined;
  const path = own ? flags.gatewayConfig! : flags.config;
  if (path === undefined) return null;
  const doc = readConfigDoc(path);
  const section = own ? doc ?? {} : (doc as Record<string, unknown> | null)?.[part];
  if (section === undefined || (part === 'kernel' && section === null)) return null;
  const where = own ? '/data_dir' : `/${part}/data_dir`;
  const dir = section !== null && typeof section === 'object' ? (section as { data_dir?: unknown }).data_dir : undefined;
  if (dir === undefined || dir === null) return part === 'gateway' ? resolve(GATEWAY_DEFAULT_DATA_DIR) : null;
  if (typeof dir !== 'string' || dir === '') throw new Error(`config ${path}: ${where}: must be a non-empty string`);
  const problems: string[] = [];
  const value = substitute(dir, where, process.env, globalRedactor, problems) as string;
  if (problems.length > 0) throw new Error(`config ${path}: ${problems.join('; ')}`);
  return resolve(dirname(resolve(path)), value);
}

/**
 * The kernel's PostgreSQL store --store or --config's kernel.store names, or null (SQLite):
 * what svcd backup and restore refuse. Read as configuredDir reads data_dir: nothing else.
 */
function configuredStore(flags: Flags): string | null {
  if (flags.store !== undefined && flags.store !== '') return flags.store;
  if (flags.config === undefined) return null;
  const kernel = (readConfigDoc(flags.config) as Record<string, unknown> | null)?.kernel;
  const store = kernel !== null && typeof kernel === 'object' ? (kernel as { store?: unknown }).store : undefined;
  return typeof store === 'string' && store !== '' ? store : null;
}

/**
 * Takes over the signals daemon/main.ts held while svcd loaded: stops holding them and
 * returns the first one that came, if any. Set by main().
 */
let claimSignals: () => string | null = () => null;

/** How long a drain waits for requests in flight by default (decisions §11). */
const DRAIN_SECONDS = 15;
/** How long closing the stores may take after that. */
const CLOSE_MS = 10_000;

/**
 * A flag given an empty value is refused (exit 1), as any value svcd cannot use: most often an
 * unset shell variable (`--data-dir "$DATA"`), which would otherwise put the store in the
 * working directory, start without the config file, or drain for the default time.
 */
function refuseEmptyFlags(given: object, names: Record<string, string>): void {
  for (const [key, flag] of Object.entries(names)) {
    if ((given as Record<string, unknown>)[key] === '') throw new Error(`${flag} is empty (an unset shell variable?); give a value or leave the flag out`);
  }
}

async function serve(flags: Flags): Promise<void> {
  refuseEmptyFlags(flags, { config: '--config', dataDir: '--data-dir', store: '--store', gatewayConfig: '--gateway-config', drainSeconds: '--drain-seconds' });
  surviveBrokenPipes(process.stdout, process.stderr); // the lines are lost, the runs go on
  const logger = createLogger({ level: flags.logLevel ?? logLevelOf(process.env.SVC_LOG_LEVEL, 'SVC_LOG_LEVEL'), base: { svc: 'svcd' } });
  const file = flags.config ? readConfigFile(flags.config) : {};
  const k = file.kernel ?? {};
  const token = process.env.SVC_TOKEN || k.token || null;
  // Before the gateway config, which takes SVC_TOKEN too and would name it /token.
  const tokenProblem = token === null ? null : bearerTokenProblem(token);
  if (tokenProblem !== null) throw new Error(`the kernel's token (${process.env.SVC_TOKEN ? 'SVC_TOKEN' : 'kernel.token'}) ${tokenProblem}`);
  const store = flags.store !== undefined ? kernelStoreOf(flags.store, '--store') : (k.store ?? null);
  const clockSkewSeconds = wholeSecondsOf(process.env.SVC_CLOCK_SKEW_SECONDS, 'SVC_CLOCK_SKEW_SECONDS', MAX_CLOCK_SKEW_SECONDS, k.clock_skew_seconds ?? 0);
  const gatewayConfig = flags.gateway ? gatewayConfigFrom(file, flags, logger) : null;
  const drainSource = flags.drainSeconds !== undefined ? '--drain-seconds' : 'SVC_DRAIN_SECONDS';
  const drainMs = 1000 * wholeSecondsOf(flags.drainSeconds ?? process.env.SVC_DRAIN_SECONDS, drainSource, MAX_DRAIN_SECONDS, DRAIN_SECONDS);
  // The kernel and the gateway load only once the flags and the config have been checked: a
  // usage or config error, --help and --version answer in a fraction of the time. Signals are
  // still held by daemon/main.ts while this loads.
  const { startSvcd } = await import('./server.js');
  // Signals are handled from here on: one that arrives while svcd starts stops it as soon as
  // it has started (a supervisor may give up on a slow start), with a clean drain and exit 0.
  let running: RunningSvcd | null = null;
  let stopping = false;
  let stopRequested: string | null = null;
  const stop = (signal: string) => {
    if (!running) {
      // A second one while svcd starts: stop now, as a second one cuts a drain short (the
      // stores, if opened yet, recover as after any stop: SQLite commits are atomic).
      if (stopRequested !== null) {
        logger.warn('second signal while starting: stopping now', { signal });
        process.exit(0);
      }
      stopRequested = signal;
      return;
    }
    const svcd = running;
    if (stopping) {
      // A second signal: stop waiting for what is still running.
      logger.warn('second signal: cutting the drain short', { signal });
      svcd.cutOff();
      return;
    }
    stopping = true;
    logger.info('draining', { signal });
    // Once the drain may be cut short, a handler still running can fail against a closed
    // store: log it, and let the stop end as it would (exit 0), not as a crash.
    process.on('unhandledRejection', (reason) => logger.warn('a request cut off by the drain failed', { err: String(reason) }));
    // Decisions §11: SIGTERM drains and exits 0. Requests get drainMs to finish; then their
    // connections are closed and the stores closed cleanly all the same. Only a close that
    // itself hangs ends in exit 1.
    const cut = setTimeout(() => {
      logger.warn('drain deadline passed; closing the connections still open', { deadline_ms: drainMs });
      svcd.cutOff();
    }, drainMs);
    cut.unref();
    const force = setTimeout(() => {
      logger.error('stores did not close after the drain deadline; exiting');
      process.exit(1);
    }, drainMs + CLOSE_MS);
    force.unref();
    svcd.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error('error while stopping', { err: String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A hang-up (the terminal svcd ran in closed) stops it as cleanly; svcd reloads nothing.
  process.on('SIGHUP', () => stop('SIGHUP'));
  const held = claimSignals();
  if (held !== null) stop(held); // not running yet: stops it once it has started
  running = await startSvcd({
    token,
    logger,
    gateway: gatewayConfig ? { config: gatewayConfig, listen: flags.gatewayListen, skewSeconds: clockSkewSeconds } : false,
    gatewayUrl: gatewayUrlOf(process.env.SVC_GATEWAY_URL, k.gateway_url),
    kernel: flags.kernel
      ? {
          listen: flags.kernelListen ?? k.listen ?? '127.0.0.1:7401',
          dataDir: resolve(flags.dataDir ?? k.data_dir ?? './svc-data'),
          publishers: publishersFrom(file, flags),
          synchronous: k.synchronous,
          ...(store !== null ? { store } : {}),
          clockSkewSeconds,
        }
      : false,
  });
  // Handlers first, then the startup line: a supervisor may signal as soon as it reads it.
  process.stdout.write(JSON.stringify({ kernel: running.kernelUrl, gateway: running.gatewayUrl }) + '\n');
  logger.info('svcd started', { version: VERSION, kernel: running.kernelUrl, gateway: running.gatewayUrl });
  // Ends with the process (its timer does not hold it open).
  new DescriptorWatch(logger).start();
  if (stopRequested) stop(stopRequested);
}

export function buildProgram(): Command {
  // exitOverride first, so that subcommands inherit it and the one catch in main() maps
  // every usage error to exit 2, as svc does.
  const program = new Command('svcd')
    .exitOverride()
    // Usage errors read like every other svcd failure before it serves: one "svcd:" line.
    .configureOutput({ outputError: (text, write) => write(usageLine('svcd', text)) })
    .description('svc daemon: the run kernel (default 127.0.0.1:7401) and the tool gateway (default 127.0.0.1:7402)')
    .version(VERSION)
    .option('--config <file>', 'YAML or JSON config with kernel: and gateway: sections')
    .option('--data-dir <dir>', 'kernel data directory (store and keys) (default: ./svc-data)')
    .option('--store <url>', "the kernel's store on PostgreSQL: a postgres:// URL (or kernel.store in --config; default: SQLite in the data directory)")
    .option('--kernel-listen <host:port>', 'kernel listener; port 0 picks a free port (default: 127.0.0.1:7401)')
    .option('--gateway-listen <host:port>', 'gateway listener; port 0 picks a free port (default: 127.0.0.1:7402)')
    .option('--gateway-config <file>', 'gateway config (YAML or JSON; keys in svc-gateway(5))')
    .option('--publisher <key_id:public_key>', 'trust a bundle publisher key (repeatable; also SVC_PUBLISHERS, or kernel.publishers in --config)', collect)
    .option('--no-kernel', 'do not run the kernel')
    .option('--no-gateway', 'do not run the gateway')
    .addOption(new Option('--log-level <level>', 'log level (default: info, or SVC_LOG_LEVEL)').choices(LOG_LEVELS))
    .option('--drain-seconds <n>', 'how long SIGTERM waits for requests in flight before closing their connections (default: 15, or SVC_DRAIN_SECONDS)')
    .addHelpText(
      'after',
      [
        '',
        'Environment: SVC_TOKEN (bearer token; without it the listeners are loopback-only),',
        'SVC_PUBLISHERS, SVC_SIGNING_KEY, SVC_GATEWAY_URL, SVC_CLOCK_SKEW_SECONDS, SVC_DRAIN_SECONDS,',
        'SVC_LOG_LEVEL; the gateway reads SVC_GATEWAY_DATA, SVC_CANARY_* and SVC_GATEWAY_TEST_TOOLS.',
        'Exit status: 0 after a drain (requests still running at its deadline lose their connection),',
        '1 when startup fails (bad configuration) or the stores do not close within 10 s after the',
        'drain, 2 usage error. SIGTERM or SIGINT drains and stops.',
        'Manual: man svcd once installed with npm install -g (man -l man/svcd.8 in the source tree).',
      ].join('\n'),
    )
    .action(async (flags: Flags) => {
      if (!flags.kernel && !flags.gateway) program.error('--no-kernel and --no-gateway together leave nothing to run', { exitCode: 2 });
      await serve(flags);
    });

  program
    .command('keys')
    .description('the control-plane signing key: "svcd keys rotate [--data-dir DIR]" retires it (still trusted) and makes a new one')
    .command('rotate')
    .description('retire the current key (still trusted for verification) and create a new one')
    .option('--data-dir <dir>', 'kernel data directory (default: ./svc-data)')
    .action((o: { dataDir?: string }) => {
      // A signal while svcd loaded: it asked to stop before anything was done.
      if (claimSignals() !== null) process.exit(0);
      refuseEmptyFlags({ own: o.dataDir, program: program.opts<Flags>().dataDir }, { own: '--data-dir', program: '--data-dir' });
      const dataDir = resolve(o.dataDir ?? program.opts<Flags>().dataDir ?? './svc-data');
      const { ring, running } = rotateKey(dataDir);
      process.stdout.write(JSON.stringify({ key_id: ring.keyId, public_key: ring.published().public_key, previous: ring.previous.map((p) => p.key_id) }) + '\n');
      if (running) {
        const who = running.pid === null ? 'an svcd' : `svcd (pid ${running.pid})`;
        process.stderr.write(`svcd: ${who} is running on ${dataDir} and signs with the key it started with until it restarts; restart it to sign with ${ring.keyId} (one started with SVC_SIGNING_KEY goes on signing with that)\n`);
      }
    });
  registerBackupCommands(
    program,
    refuseEmptyFlags,
    () => claimSignals(),
    (part) => configuredDir(program.opts<Flags>(), part),
    () => configuredStore(program.opts<Flags>()),
  );
  return program;
}

/**
 * `svcd keys rotate`. Two rotations at once would both retire the same key and one new key
 * would be lost: a lock of its own in keys/ (svcd never takes it) refuses the second one.
 * `running` is the svcd that holds the data directory, if any: it keeps signing with the key
 * it started with until it restarts.
 */
function rotateKey(dataDir: string): { ring: KeyRing; running: DataDirInUseError | null } {
  let releaseRotation: (() => void) | null = null;
  let running: DataDirInUseError | null = null;
  if (existsSync(keyFilePath(dataDir)) && !process.env.SVC_SIGNING_KEY) {
    try {
      releaseRotation = lockDataDir(join(dataDir, 'keys'), 'key directory');
    } catch (err) {
      if (!(err instanceof DataDirInUseError)) throw err;
      throw new Error(`another svcd keys rotate${err.pid === null ? '' : ` (pid ${err.pid})`} is rotating the key in ${dataDir}; run it again when that one is done`);
    }
    try {
      lockDataDir(dataDir, 'data directory')();
    } catch (err) {
      if (!(err instanceof DataDirInUseError)) throw err;
      running = err;
    }
  }
  try {
    return { ring: KeyRing.rotate(dataDir), running };
  } finally {
    releaseRotation?.();
  }
}

/** Where the kernel reads tool descriptors from a gateway running apart: SVC_GATEWAY_URL wins over gateway_url. */
function gatewayUrlOf(fromEnv: string | undefined, fromFile: string | null | undefined): string | null {
  const url = fromEnv || (fromFile ?? null);
  // gateway_url in a config file is checked with the file; the variable is checked here, as
  // the file's is (an unusable one was found only at the first proposal, as a sor_write).
  if (fromEnv) {
    let parsed: URL | null = null;
    try {
      parsed = new URL(fromEnv);
    } catch {
      /* below */
    }
    if (!parsed || !/^https?:$/.test(parsed.protocol)) throw new Error(`SVC_GATEWAY_URL "${fromEnv}" must be an http:// or https:// URL`);
    if (urlHasCredentials(fromEnv)) throw new Error('SVC_GATEWAY_URL must not carry credentials (a user or password in the URL): fetch refuses such URLs');
    if (urlHasFetchBlockedPort(fromEnv)) throw new Error(`SVC_GATEWAY_URL: ${fetchBlockedPortHint(fromEnv)}`);
  }
  return url;
}

export async function main(claim: () => string | null = () => null): Promise<void> {
  claimSignals = claim;
  const program = buildProgram();
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    // A config problem's path can name a key spelt with a `${VAR}` value: registered by now.
    process.stderr.write(`svcd: ${globalRedactor.redact((err as Error).message)}\n`);
    process.exit(1);
  }
}

