/**
 * `svcd backup DEST` and `svcd restore FROM` (svcd(8) COMMANDS): the kernel's store
 * and key, and the gateway's store, copied consistently while svcd runs and put back while it
 * is stopped. The work is in src/store/backup.ts; this file reads the flags and prints the
 * one JSON line.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { backupStore, checkManifest, GATEWAY_FILES, isFreshTarget, KERNEL_FILES, openRestore, writeManifest, type CopiedStore, type PendingRestore, type StoreFiles } from '../src/store/backup.js';
import { DataDirInUseError } from '../src/store/dir-lock.js';

/**
 * svcd backup and restore copy SQLite files; a kernel on PostgreSQL (--store, kernel.store) is
 * backed up with PostgreSQL's own tools. Refused before anything is written (exit 1).
 */
export class StoreNotSqliteError extends Error {
  readonly code = 'SVC_STORE_NOT_SQLITE';
  constructor() {
    super(
      "the kernel's store is PostgreSQL (--store or kernel.store), and svcd backup and restore copy SQLite stores only: " +
        "back the database up with pg_dump (restore with pg_restore or psql) and copy the data directory's keys/ with it; " +
        "--no-kernel (backup) or --data-dir of a SQLite kernel leaves it out",
    );
    this.name = 'StoreNotSqliteError';
  }
}

/** The data directory svcd's --config (or --gateway-config) names for a part (null: not named there). */
export type ConfiguredDir = (part: 'kernel' | 'gateway') => string | null;

interface BackupFlags {
  dataDir?: string;
  gatewayData?: string;
  kernel: boolean;
  /** restore's --no-gateway: the gateway's directory is not needed. */
  gateway?: boolean;
}

/** The data directories a command works on (null: that store is left out). */
interface StoreDirs {
  kernel: string | null;
  gateway: string | null;
}

/** The two parts of a backup directory. */
const KERNEL_PART = 'kernel';
const GATEWAY_PART = 'gateway';

/**
 * `claimSignals` hands over the signals daemon/main.ts held while svcd loaded (the one held,
 * if any): a backup is then stopped by them as any command is, and a restore defers them
 * while it swaps files.
 */
export function registerBackupCommands(
  program: Command,
  refuseEmpty: (given: object, names: Record<string, string>) => void,
  claimSignals: () => string | null,
  configured: ConfiguredDir,
  /** The kernel's PostgreSQL URL svcd's --store or --config (kernel.store) gives; null: SQLite. */
  kernelStore: () => string | null = () => null,
): void {
  // The directories svcd itself would use: flag, then environment, then svcd's --config (and
  // --gateway-config), then the default; the gateway's only when one of them names it.
  const dirs = (o: BackupFlags): StoreDirs => {
    const programDataDir = program.opts<{ dataDir?: string }>().dataDir;
    // `svcd backup DEST --data-dir ""` hands the empty value to svcd's own --data-dir.
    refuseEmpty({ ...o, programDataDir }, { dataDir: '--data-dir', gatewayData: '--gateway-data', programDataDir: '--data-dir' });
    // The config is read only for a directory no flag or variable gives (it may not load here).
    // svcd's own --no-gateway (before the command) leaves the gateway out as restore's does.
    const noGateway = o.gateway === false || program.opts<{ gateway?: boolean }>().gateway === false;
    const gateway = o.gatewayData ?? (noGateway ? null : process.env.SVC_GATEWAY_DATA || configured('gateway'));
    const withKernel = o.kernel && program.opts<{ kernel?: boolean }>().kernel !== false;
    if (withKernel && kernelStore() !== null) throw new StoreNotSqliteError();
    return {
      // svcd's own --no-kernel and --data-dir take those flags wherever they stand.
      kernel: withKernel ? resolve(o.dataDir ?? programDataDir ?? configured('kernel') ?? './svc-data') : null,
      gateway: gateway ? resolve(gateway) : null,
    };
  };

  program
    .command('backup')
    .description("copy the kernel's store and key (and the gateway's store) into DEST while svcd runs")
    .argument('<dest>', 'a directory that does not exist yet, or is empty')
    .option('--data-dir <dir>', "kernel data directory (default: kernel.data_dir of svcd's --config, or ./svc-data)")
    .option('--gateway-data <dir>', "the gateway's data directory, backed up after the kernel's (default: SVC_GATEWAY_DATA, then the data_dir of svcd's --config or --gateway-config; without any, no gateway store)")
    .option('--no-kernel', "leave the kernel's store out (with --gateway-data: the gateway's alone)")
    .action(async (dest: string, o: BackupFlags) => {
      // Asked to stop before anything was done: no backup was made, which a cron job must not read as one.
      const held = claimSignals();
      if (held !== null) throw new Error(`stopped by ${held} before anything was backed up`);
      await backupInto(resolve(dest), dirs(o));
    });

  program
    .command('restore')
    .description('put a backup made by "svcd backup" in place, with svcd stopped; the files it replaces are kept aside')
    .argument('<from>', 'a directory written by svcd backup')
    .option('--data-dir <dir>', "kernel data directory (default: kernel.data_dir of svcd's --config, or ./svc-data)")
    .option('--gateway-data <dir>', "the gateway's data directory (default: SVC_GATEWAY_DATA, then the data_dir of svcd's --config or --gateway-config); needed when the backup holds a gateway store")
    .option('--no-gateway', "keep the gateway's store as it is: when it survived, it remembers every call made since the backup")
    .action(async (from: string, o: Omit<BackupFlags, 'kernel'> & { gateway: boolean }) => {
      // A signal before the first file moves stops the restore with nothing changed; one after
      // waits for the swap to end (a directory left half-restored would start as a fresh store).
      const signals: Signalled = { last: null };
      for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => (signals.last ??= sig));
      signals.last = claimSignals() ?? signals.last;
      const { kernel, gateway } = dirs({ dataDir: o.dataDir, gatewayData: o.gatewayData, kernel: true, gateway: o.gateway && program.opts<{ gateway?: boolean }>().gateway !== false });
      const source = resolve(from);
      // svcd's own --no-gateway takes the flag wherever it stands (as --data-dir): either says it.
      const keepGateway = !o.gateway || program.opts<{ gateway?: boolean }>().gateway === false;
      const parts = partsToRestore(source, { kernel, gateway }, keepGateway, o.gatewayData !== undefined);
      const out = await swapIn(source, parts, signals);
      process.stdout.write(JSON.stringify({ restored: source, stores: out }) + '\n');
      if (signals.last !== null) process.stderr.write(`svcd: ${signals.last} came while the files were swapped; the restore finished first\n`);
    });
}

/**
 * `svcd backup`'s work once the flags are read: the kernel's store, then the gateway's, copied
 * into `to` (absolute), and the one JSON line printed. A signal meanwhile leaves nothing there.
 */
async function backupInto(to: string, { kernel, gateway }: StoreDirs): Promise<void> {
  if (!kernel && !gateway) throw new Error('--no-kernel without --gateway-data (or SVC_GATEWAY_DATA) leaves nothing to back up');
  if (!isFreshTarget(to)) {
    const unfinished = existsSync(join(to, KERNEL_PART)) || existsSync(join(to, GATEWAY_PART)) ? existsSync(join(to, 'manifest.json')) ? '' : ' (a backup that did not finish: remove it and run svcd backup again)' : '';
    throw new Error(`${to} exists and is not an empty directory${unfinished}; a backup never writes over another`);
  }
  // A signal leaves no half-made backup behind: what this backup wrote goes, then the exit.
  const made = !existsSync(to);
  const discard = () => {
    try {
      if (made) rmSync(to, { recursive: true, force: true });
      else for (const f of readdirSync(to)) rmSync(join(to, f), { recursive: true, force: true });
    } catch {
      /* as much as could go */
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      discard();
      process.stderr.write(`svcd: stopped by ${sig}; nothing was kept in ${to}\n`);
      process.exit(1);
    });
  }
  const copied: CopiedStore[] = [];
  try {
    mkdirSync(to, { recursive: true, mode: 0o700 });
    chmodSync(to, 0o700); // an empty directory given as DEST keeps its mode otherwise
    // The kernel's first: the gateway's copy is then the later one, so every call a restored
    // kernel may hand out again finds its idempotency entry and is answered, not run twice.
    if (kernel) copied.push(...(await backupStore(kernel, join(to, KERNEL_PART), KERNEL_FILES)));
    if (gateway) copied.push(...(await backupStore(gateway, join(to, GATEWAY_PART), GATEWAY_FILES)));
    writeManifest(to, copied);
  } catch (err) {
    discard();
    throw err;
  }
  process.stdout.write(JSON.stringify({ backup: to, files: copied }) + '\n');
}

/** A store a restore puts back: the backup's directory for it, and where it goes. */
interface RestorePart {
  part: string;
  dir: string;
  files: StoreFiles;
}

/**
 * The parts of the backup in `source` that restore puts back, each with its manifest checked:
 * the kernel's unless svcd's --no-kernel, the gateway's unless `keepGateway` (--no-gateway).
 * `gatewayDataGiven`: --gateway-data was given, which --no-gateway contradicts.
 */
function partsToRestore(source: string, { kernel, gateway }: StoreDirs, keepGateway: boolean, gatewayDataGiven: boolean): RestorePart[] {
  const kernelPart = existsSync(join(source, KERNEL_PART));
  const gatewayPart = existsSync(join(source, GATEWAY_PART));
  if (!kernelPart && !gatewayPart) throw new Error(`${source} holds no kernel/ or gateway/ directory: not a backup made by svcd backup`);
  // svcd's own --no-kernel leaves the kernel's part out, as backup's does.
  const hasKernel = kernel !== null && kernelPart;
  if (keepGateway && gatewayDataGiven) throw new Error('--gateway-data and --no-gateway ask for opposite things: give one');
  const hasGateway = !keepGateway && gatewayPart;
  if (!hasKernel && !hasGateway) throw new Error(`nothing to restore: --no-kernel and --no-gateway leave out what ${source} holds`);
  if (hasGateway && !gateway) {
    throw new Error(`${source} holds a gateway store: give --gateway-data DIR (or SVC_GATEWAY_DATA) to restore it there, or --no-gateway to keep the gateway's store as it is`);
  }
  const parts: RestorePart[] = [];
  if (hasKernel) parts.push({ part: KERNEL_PART, dir: kernel!, files: KERNEL_FILES });
  if (hasGateway) parts.push({ part: GATEWAY_PART, dir: gateway!, files: GATEWAY_FILES });
  checkManifest(source, parts);
  return parts;
}

/** One store put back, as `svcd restore` prints it. */
interface RestoredStore {
  data_dir: string;
  files: CopiedStore[];
  replaced: string | null;
}

/** The last stopping signal that came and is not yet accounted for (null: none). */
interface Signalled {
  last: string | null;
}

/**
 * Puts every part in place: each opened (its data directory held) and staged before any is
 * swapped. A signal in `signals` before the swap stops the restore with nothing changed; one
 * during it is left in `signals` for the caller to report once the swap is done.
 */
async function swapIn(source: string, parts: readonly RestorePart[], signals: Signalled): Promise<RestoredStore[]> {
  // Every part checked and its directory held before any is touched: a restore that stops
  // half-way (the gateway's svcd still running) would pair a new kernel with an old gateway.
  const pending: PendingRestore[] = [];
  const out: RestoredStore[] = [];
  try {
    for (const p of parts) {
      try {
        pending.push(openRestore(join(source, p.part), p.dir, p.files));
      } catch (err) {
        if (err instanceof DataDirInUseError) throw new Error(`${err.pid === null ? 'an svcd' : `svcd (pid ${err.pid})`} is running on ${err.dir}: stop it before restoring`);
        throw err;
      }
    }
    // The checks and the copies are synchronous: a signal that came meanwhile is seen only
    // once the event loop turns, so it turns before anything svcd reads is changed.
    const stopped = async (): Promise<boolean> => {
      await new Promise((r) => setImmediate(r));
      return signals.last !== null;
    };
    if (await stopped()) throw new Error(`stopped by ${signals.last} before anything was restored`);
    try {
      for (const p of pending) p.stage();
      if (await stopped()) throw new Error(`stopped by ${signals.last} before anything was restored`);
    } catch (err) {
      for (const p of pending) p.discard();
      throw err;
    }
    signals.last = null; // from here on a signal waits for the swap, and is reported after it
    const now = new Date();
    parts.forEach((p, i) => {
      const r = pending[i]!.swap(now);
      out.push({ data_dir: p.dir, files: r.copied, replaced: r.replaced });
    });
    await new Promise((r) => setImmediate(r));
  } finally {
    for (const r of pending) r.release();
  }
  return out;
}
